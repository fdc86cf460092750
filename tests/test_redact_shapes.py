"""Redaction of the credential shapes that got through in issue 22, one test per shape, with the
look-alikes each new rule must leave alone."""

import unittest

import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)
from test_redact_classes import KEY, RedactTestCase

SECRET40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY7EXAMPLEKE"
HEX40 = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"


class UrlPasswordDelimiterTest(RedactTestCase):
    def test_a_password_holding_a_component_delimiter_is_redacted_up_to_the_last_at(self):
        for text, parts, host in (
                ("DATABASE_URL=postgres://svc:Kp4x#Qm9z@db:5432/app", ("Kp4x", "Qm9z"),
                 "@db:5432/app"),
                ("mysql://root:Kp4x?Qm9z@db.internal/shop", ("Kp4x", "Qm9z"), "@db.internal/shop"),
                ("redis://:Kp4x/Qm9z@cache:6379/0", ("Kp4x", "Qm9z"), "@cache:6379/0"),
                ("amqp://app:Kp4x#Qm9z/Wd7@rabbit/vhost", ("Kp4x", "Qm9z", "Wd7"), "@rabbit/vhost"),
                ("mongodb+srv://admin:Kp4x?Qm9z#Wd7@cluster0.example.net/?retryWrites=true",
                 ("Kp4x", "Qm9z", "Wd7"), "@cluster0.example.net"),
                ("postgres://svc:1234#5678@db/app", ("1234", "5678"), "@db/app"),
                ("redis://:1234/5678@cache", ("1234", "5678"), "@cache")):
            with self.subTest(text=text):
                out = self.assertGone(text, *parts)
                self.assertIn(host, out)

    def test_a_password_with_a_space_is_redacted_where_the_url_is_assigned(self):
        for text, parts in (("DATABASE_URL=postgres://svc:pa ss@db/app", ("pa ss", " ss")),
                            ('REDIS_URL="redis://:two words9@cache:6379"', ("two", "words9")),
                            ("url: mysql://root:open sesame 42@db/x", ("open", "sesame", " 42")),
                            ("export AMQP_URL=amqp://app:Kp4x Qm9z@rabbit", ("Kp4x", "Qm9z"))):
            with self.subTest(text=text):
                out = self.assertGone(text, *parts)
                self.assertIn("@", out)

    def test_a_url_and_a_later_address_or_path_at_sign_survive(self):
        for text in ("see http://a.com:8080/x, write to bob@x.org",
                     "HOMEPAGE=http://a.com:8080/x, write to bob@x.org",
                     "HOMEPAGE=http://localhost:8080 ask bob@x.org",
                     "see http://a.com/x,bob@x.org or http://a.com:8080/x,bob@x.org",
                     "http://localhost:3000/@vite/client",
                     "https://example.com:8443/users?email=bob@x.org",
                     "https://medium.com/@ada/notes",
                     "https://cdn.jsdelivr.net/npm/pkg@1.2.3/dist/x.js",
                     "pip install git+https://github.com/org/repo.git@v1.2.3#egg=repo",
                     "git+ssh://git@github.com:org/repo.git@v1.2",
                     "http://[::1]:8080/x?u=bob@x.org",
                     "https://user@example.com:8443/path?email=bob@x.org",
                     "https://web.archive.org/web/2020/https://a.com:81/@x"):
            with self.subTest(text=text):
                self.assertKept(text)

    def test_a_url_inside_a_url_is_still_redacted(self):
        self.assertGone("https://a.com/login?next=https://u:Kp4x#Qm9z@db/app", "Kp4x", "Qm9z")


class WebhookTest(RedactTestCase):
    DISCORD = "AbCdEf_GhIjKlMnOpQrStUvWxYz0123456789-abcdefghijklmnopqrstuvwxyzABCDEFGH"

    def test_discord_webhook_tokens(self):
        for host in ("discord.com", "discordapp.com", "canary.discord.com", "ptb.discordapp.com"):
            for api in ("api", "api/v10"):
                with self.subTest(host=host, api=api):
                    self.assertGone(f"post to https://{host}/{api}/webhooks/1234567890123456789/"
                                    f"{self.DISCORD}", self.DISCORD, self.DISCORD[:20])

    def test_teams_and_mattermost_webhooks(self):
        guid, tail = "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
        for text, secret in (
                (f"https://contoso.webhook.office.com/webhookb2/{guid}@{guid}/IncomingWebhook/"
                 f"{tail}/{guid}", tail),
                (f"https://outlook.office.com/webhook/{guid}@{guid}/IncomingWebhook/{tail}/{guid}",
                 tail),
                ("https://chat.example.com/hooks/x1b2c3d4e5f6g7h8i9j0k1l2m3",
                 "x1b2c3d4e5f6g7h8i9j0k1l2m3")):
            with self.subTest(text=text[:40]):
                self.assertGone(f"notify {text} now", secret)

    def test_webhook_look_alikes_survive(self):
        for text in ("https://discord.com/api/webhooks is the endpoint",
                     "https://discord.com/channels/12345/67890",
                     "https://api.github.com/repos/org/app/hooks/123456789",
                     "https://docs.mattermost.com/developer/webhooks-incoming.html",
                     "https://learn.microsoft.com/en-us/microsoftteams/platform/"
                     "webhooks-and-connectors/what"):
            with self.subTest(text=text):
                self.assertKept(text)


class LabelTest(RedactTestCase):
    def test_private_key_id_in_a_service_account_json(self):
        text = ('{\n  "type": "service_account",\n  "project_id": "demo-123",\n'
                f'  "private_key_id": "{HEX40}",\n'
                '  "client_email": "sa@demo-123.iam.gserviceaccount.com"\n}')
        out = self.assertGone(text, HEX40)
        self.assertIn('"project_id": "demo-123"', out)

    def test_a_credential_after_a_token_or_secret_label_mid_line(self):
        for text, value in (("here is my token: Zq8vLm3pRt55Wx9AbCd thanks", "Zq8vLm3pRt55Wx9AbCd"),
                            ("ok, the secret: Zq8vLm3pRt55Wx9AbCd.", "Zq8vLm3pRt55Wx9AbCd"),
                            (f"use this Token: {HEX40} for the bot", HEX40),
                            ('the app secret: "Qm9zKp4xWd7T2vB8nR5s" is new',
                             "Qm9zKp4xWd7T2vB8nR5s")):
            with self.subTest(text=text):
                out = self.assertGone(text, value)
                self.assertIn(text.split(":")[0] + ":", out)

    def test_prose_after_a_token_or_secret_label_survives(self):
        for text in ("The secret: patience and butter.",
                     "One more token: a unit of text for the model.",
                     "The secret: AbstractSingletonProxyFactoryBean is a joke.",
                     "Next token: ISO-8601-formatted-date, then the time zone.",
                     "The secret: chapter-12-revisited-2024 explains it.",
                     "the model's token: gpt-4o-2024-08-06 sets the budget"):
            with self.subTest(text=text):
                self.assertKept(text)


class JwtTest(RedactTestCase):
    def test_a_jwt_whose_payload_does_not_start_with_a_json_brace_and_quote(self):
        sig = "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
        for payload in ("eyAic3ViIjogIjEyMyJ9", "eyAgInN1YiI6ICIxMjMiIH0",
                        "aGVsbG8gd29ybGQgdG9rZW4"):
            with self.subTest(payload=payload):
                self.assertGone(f"jwt eyJhbGciOiJIUzI1NiJ9.{payload}.{sig} ok", payload, sig)

    def test_dotted_names_after_eyj_survive(self):
        self.assertKept("The eyJ prefix and eyJhbGciOi.json are in docs.example.com/eyJ.html")


class AwsKeyPairTest(RedactTestCase):
    def test_an_unlabelled_secret_key_beside_its_access_key_id(self):
        for text in (f"AKIAIOSFODNN7EXAMPLE {SECRET40}", f"AKIAIOSFODNN7EXAMPLE,{SECRET40}",
                     f"id AKIAIOSFODNN7EXAMPLE and the other one is {SECRET40}",
                     f"Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,{SECRET40}\n",
                     f"creds: ASIAIOSFODNN7EXAMPLE / {SECRET40}",
                     f"AKIAIOSFODNN7EXAMPLE\n{SECRET40}"):
            with self.subTest(text=text):
                self.assertGone(text, "AKIAIOSFODNN7EXAMPLE", SECRET40)

    def test_a_lowercase_hash_after_an_access_key_id_survives(self):
        out = self.assertGone(f"AKIAIOSFODNN7EXAMPLE was rotated in commit {HEX40}",
                              "AKIAIOSFODNN7")
        self.assertIn(HEX40, out)


class SignatureTest(RedactTestCase):
    def test_sas_and_presigned_url_signatures(self):
        for text, sig in (
                ("https://acct.blob.core.windows.net/c/b.txt?sv=2021-06-08&sp=r"
                 "&sig=AbC%2Bdef0123456789xyzXYZ%3D",
                 "AbC%2Bdef0123456789xyzXYZ%3D"),
                ("https://prod-12.westus.logic.azure.com:443/workflows/abc/triggers/manual/"
                 "paths/invoke?api-version=2016-06-01&sp=%2Ftriggers&sv=1.0"
                 "&sig=Qm9zKp4xWd7T2vB8nR5sQm9zKp4xWd7T2vB8nR5s123",
                 "Qm9zKp4xWd7T2vB8nR5sQm9zKp4xWd7T2vB8nR5s123"),
                ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
                 + "ab12" * 16,
                 "ab12" * 16),
                ("https://storage.googleapis.com/b/o?X-Goog-Signature=" + "cd34" * 32 + "&x=1",
                 "cd34" * 32)):
            with self.subTest(text=text[:40]):
                out = self.assertGone(text, sig)
                self.assertNotIn(sig[:12], out)

    def test_signature_look_alikes_survive(self):
        for text in ("sig=1 is the flag", "https://example.com/?sig=short",
                     "email_sig=yes and design=flat",
                     "https://example.com/x?signature=none&page=2"):
            with self.subTest(text=text):
                self.assertKept(text)


class NoBreakSpaceTest(RedactTestCase):
    def test_a_no_break_space_inside_a_key(self):
        for char in ("\u00a0", "\u202f"):
            with self.subTest(char=hex(ord(char))):
                pasted = KEY[:15] + char + KEY[15:]
                out = self.assertGone(f"my key: {pasted} ok", KEY[:15], KEY[15:])
                self.assertTrue(out.startswith("my key: ") and out.endswith(" ok"), out)

    def test_text_with_no_break_spaces_but_no_key_is_unchanged(self):
        for text in ("Prix\u00a0: 100\u00a0€, soit 1\u00a0000\u00a0000 au total\u00a0!",
                     "Bonjour\u00a0Madame, sk\u00a0learn et sk-8\u00a0ne sont pas des clés.",
                     "see\u00a0AbstractSingletonProxyFactoryBean\u00a0and\u00a0node_modules"):
            with self.subTest(text=text):
                self.assertKept(text)


if __name__ == "__main__":
    unittest.main()
