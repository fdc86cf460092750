"""Redaction of the credential classes an independent attack got through (issue 13), one test per
class, with the look-alikes each new rule must leave alone."""

import unittest

import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)

from honcho_hub.safety.redact import SLICE_CHARS, redact, redact_long

HEX32 = "0123456789abcdef" * 2
KEY = "sk-proj-Q7wErTy9UiOp3AsDfGh5JkLzXcVbNm12"


class RedactTestCase(unittest.TestCase):
    def assertGone(self, text, *parts, secrets=None, out=None):
        out = redact(text, secrets) if out is None else out
        for part in parts:
            self.assertNotIn(part, out, f"{part!r} survived in {out!r}")
        self.assertIn("[REDACTED:", out)
        return out

    def assertKept(self, text):
        self.assertEqual(redact(text), text)


class UrlCredentialsTest(RedactTestCase):
    def test_an_empty_user_password_is_redacted(self):
        for text in ("redis://:S3cretRedisPass@cache", "rediss://:S3cretRedisPass@cache:6380/0",
                     "amqp://:S3cretRedisPass@rabbit/vhost",
                     "see (redis://:S3cretRedisPass@cache) for the queue"):
            with self.subTest(text=text):
                out = self.assertGone(text, "S3cretRedisPass")
                self.assertIn("@cache" if "cache" in text else "@rabbit", out)

    def test_a_password_holding_at_signs_is_redacted_up_to_the_last_at_before_the_host(self):
        for text, parts in (("postgres://app:p@ssw0rd-Secret@db", ("ssw0rd-Secret",)),
                            ("mysql://root:a@b@cSecretTail@db.internal:3306/x",
                             ("cSecretTail", "b@c")),
                            ("DATABASE_URL=postgres://app:p@ss@word9@db/main?sslmode=require",
                             ("word9", "ss@"))):
            with self.subTest(text=text):
                out = self.assertGone(text, *parts)
                self.assertIn("@db", out)

    def test_a_long_token_as_the_url_user_is_redacted(self):
        for text, token in ((f"https://{HEX32}@host/repo.git", HEX32),
                            ("git+https://a1B2c3D4e5F6g7H8i9J0k1L2@github.com/o/r",
                             "a1B2c3D4e5F6g7H8i9J0k1L2")):
            with self.subTest(text=text):
                self.assertGone(text, token)

    def test_ordinary_url_users_and_addresses_survive(self):
        for text in ("ssh://git@github.com/org/repo.git", "mailto:me@example.com",
                     "https://ada@example.com/x",
                     "https://first.last2024@example.com/", "git@github.com:org/repo.git",
                     "postgres://db.internal:5432/main", "https://[2001:db8::1]:8443/health"):
            with self.subTest(text=text):
                self.assertKept(text)


class AssignmentTest(RedactTestCase):
    def test_names_ending_in_any_credential_word_are_secret_names(self):
        for name in ("DB_PASS", "OPENAI_KEY", "SLACK_BOT_TOKEN", "MYSQL_PWD", "AWS_CREDENTIALS",
                     "dbPass", "apiKey", "HTTP_AUTH", "session_cookie", "db.pass",
                     "SERVICE_ACCOUNT_KEY"):
            with self.subTest(name=name):
                self.assertGone(f"{name}=Zq8vLm3pRt", "Zq8vLm3pRt")

    def test_a_value_runs_to_the_end_of_its_line_or_quoted_string(self):
        cases = (("DB_PASSWORD=abc;defSecretTail99", ("defSecretTail99",), ""),
                 ("password=correct horse battery staple", ("horse", "battery", "staple"), ""),
                 ("DB_PASS=river violet anchor42\nDB_HOST=db", ("violet", "anchor42"),
                  "\nDB_HOST=db"),
                 ('curl -d "password=open sesame 42" https://x.example/login', ("sesame",),
                  '" https://x.example/login'),
                 ("Password: two words", ("two words",), ""))
        for text, parts, tail in cases:
            with self.subTest(text=text):
                out = self.assertGone(text, *parts)
                self.assertTrue(out.endswith(tail), out)

    def test_query_string_values_end_at_the_next_parameter(self):
        out = self.assertGone("https://api.example.com/v1?access_token=Zq8vLm3pRt55&page=2",
                              "Zq8vLm3pRt55")
        self.assertTrue(out.endswith("&page=2"), out)

    def test_look_alike_names_and_values_survive(self):
        for text in ("max_tokens=5", "token_count=12", "PWD=/home/x", "OLDPWD=/tmp",
                     "key=value in prose", "sort_key=name primary_key=id cache_key=user",
                     "monkey=3 hotkey=ctrl", "SSH_KEY=~/.ssh/id_rsa",
                     "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/sa.json",
                     "password = os.environ[\"DB_PASSWORD\"]",
                     "token = get_token(user)", "bypass=true", "compass=north",
                     "public_key=ssh-ed25519", "password=${DB_PASSWORD} reads it", "author=Jane"):
            with self.subTest(text=text):
                self.assertKept(text)


class HeaderTest(RedactTestCase):
    def test_key_and_token_headers(self):
        for text in ("X-API-Key: Zq8vLm3pRt55Wx", "x-api-key: Zq8vLm3pRt55Wx",
                     "X-Auth-Token: Zq8vLm3pRt55Wx", "Api-Key: Zq8vLm3pRt55Wx",
                     "headers: X-Access-Token: Zq8vLm3pRt55Wx"):
            with self.subTest(text=text):
                self.assertGone(text, "Zq8vLm3pRt55Wx")

    def test_authorization_without_a_scheme(self):
        for text in ("Authorization: Zq8vLm3pRt55Wx", "Authorization: ApiKey Zq8vLm3pRt55Wx",
                     "Proxy-Authorization: Basic Zq8vLm3pRt55Wx=="):
            with self.subTest(text=text):
                self.assertGone(text, "Zq8vLm3pRt55Wx")

    def test_cookie_values(self):
        out = self.assertGone("Cookie: sessionid=Zq8vLm3pRt55Wx; csrftoken=Ab12Cd34Ef",
                              "Zq8vLm3pRt55Wx", "Ab12Cd34Ef")
        self.assertTrue(out.startswith("Cookie: "))
        self.assertGone("Set-Cookie: session=Zq8vLm3pRt55Wx; Path=/; HttpOnly", "Zq8vLm3pRt55Wx")

    def test_curl_header_flags(self):
        for text in ('curl -H "X-Api-Key: abc123def456" https://api.example.com',
                     "curl -H 'Authorization: Bearer x1y2z3' https://api.example.com",
                     'curl --header "Cookie: sid=abc123def456" https://app.example.com'):
            with self.subTest(text=text):
                out = self.assertGone(text, "abc123def456" if "abc" in text else "x1y2z3")
                self.assertIn("https://", out)  # the header value ends at its closing quote

    def test_prose_about_headers_survives(self):
        for text in ("Authorization headers are required.", "Set the Cookie header yourself.",
                     "Send X-API-Key with each request."):
            with self.subTest(text=text):
                self.assertKept(text)


class UnicodeTest(RedactTestCase):
    def test_format_characters_inside_a_key(self):
        for char in ("\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"):
            with self.subTest(char=hex(ord(char))):
                pasted = KEY[:15] + char + KEY[15:]
                self.assertGone(f"my key: {pasted} ok", KEY[:15], KEY[15:])

    def test_fullwidth_prefixes_and_keys(self):
        for pasted in ("ｓｋ-" + KEY[3:], "ｓｋ－" + KEY[3:],
                       "".join(chr(ord(c) + 0xFEE0) for c in KEY)):
            with self.subTest(pasted=pasted[:6]):
                self.assertGone(f"キー：{pasted}", pasted, KEY[3:])

    def test_a_key_wrapped_across_two_lines(self):
        for head, tail in ((KEY[:30], KEY[30:]),
                           ("ghp_a1B2c3D4e5F6g7H8i9J0k1L2", "m3N4o5P6q7R8")):
            with self.subTest(head=head[:6]):
                out = self.assertGone(f"my key is {head}\n{tail}\nthanks", head, tail)
                self.assertTrue(out.endswith("\nthanks"), out)

    def test_only_the_keys_span_of_the_original_changes(self):
        before, after = "前文：\u200b«quoted»，", "，後文\u00ad end ＡＢＣ"
        out = redact(f"{before}ｓｋ-{KEY[3:]}{after}")
        self.assertTrue(out.startswith(before), out)
        self.assertTrue(out.endswith(after), out)
        self.assertNotIn(KEY[3:], out)

    def test_text_with_format_and_fullwidth_characters_but_no_key_is_unchanged(self):
        for text in ("hyphen\u00adation", "家族👨\u200d👩\u200d👧で旅行：東京、大阪。",
                     "ＡＢＣ１２３ and ｓｋｉ", "\ufeffBOM at the start", "Привет, мир"):
            with self.subTest(text=text):
                self.assertKept(text)


def _body(lines=4):
    return [("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + str(i)) * 2 for i in range(lines)]


class SplitPasteTest(RedactTestCase):
    def test_a_key_body_without_its_begin_line_is_redacted_when_an_end_line_closes_it(self):
        body = _body()
        for lead, kind in (("", "PRIVATE KEY"), ("second half:\n", "RSA PRIVATE KEY"),
                           ("  ", "OPENSSH PRIVATE KEY"), ("rest of it: ", "EC PRIVATE KEY")):
            with self.subTest(kind=kind):
                out = self.assertGone(lead + "\n".join(body) + f"\n-----END {kind}-----\nthanks",
                                      *body)
                self.assertTrue(out.endswith("\nthanks"))

    def test_putty_private_lines(self):
        private = _body(3)
        text = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\n"
                "Public-Lines: 1\nAAAAC3NzaC1lZDI1NTE5AAAAIGvN\nPrivate-Lines: 3\n"
                + "\n".join(private)
                + "\nPrivate-MAC: 00ff\n")
        out = self.assertGone(text, *private)
        self.assertIn("AAAAC3NzaC1lZDI1NTE5AAAAIGvN", out)  # the public half is not a secret

    def test_public_key_and_certificate_bodies_survive(self):
        for kind in ("PUBLIC KEY", "CERTIFICATE", "RSA PUBLIC KEY"):
            with self.subTest(kind=kind):
                self.assertKept("\n".join(_body()) + f"\n-----END {kind}-----")

    def test_redact_long_keeps_a_body_without_begin_together_with_its_end_line(self):
        body = _body(200)  # about 13 KB of key lines
        for filler in (SLICE_CHARS - 2000, SLICE_CHARS - 9000, 10, SLICE_CHARS * 2 - 3000):
            with self.subTest(filler=filler):
                text = (("word " * (filler // 5)).strip() + "\n" + "\n".join(body)
                        + "\n-----END PRIVATE KEY-----\n")
                text += "after " * 4000
                self.assertGreater(len(text), SLICE_CHARS)
                out = redact_long(text)
                self.assertEqual([line for line in body if line in out], [])
                self.assertTrue(out.endswith("after " * 10))


class HostSecretCaseTest(RedactTestCase):
    def test_a_host_secret_is_matched_in_any_case(self):
        for stored, shown in (("hunter2-password", "HUNTER2-PASSWORD"),
                              ("Tr0ub4dor&3", "tr0ub4dor&3"), ("MixedCase99", "mIXEDcASE99")):
            with self.subTest(stored=stored):
                self.assertGone(f"it is {shown} now", shown, secrets={"DB": stored})

    def test_a_host_secret_with_a_zero_width_character_inside(self):
        self.assertGone("it is zebra-\u200bcrossing-42 now", "zebra-", "crossing-42",
                        secrets={"Z": "zebra-crossing-42"})


if __name__ == "__main__":
    unittest.main()
