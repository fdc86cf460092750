"""Redaction corpus: every secret shape is removed, every look-alike survives byte for byte."""

import random
import string
import unittest

import hub_testkit  # noqa: F401

from honcho_hub.redact import RedactionError, redact

_rng = random.Random(20261202)
ALNUM = string.ascii_letters + string.digits
LOWER_HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"


def tok(n, alphabet=ALNUM):
    return "".join(_rng.choice(alphabet) for _ in range(n))


def upper(n):
    return tok(n, string.ascii_uppercase + string.digits)


# (text containing a secret, the secret part that must not survive)
SECRETS = []


def add(text_template, secret):
    SECRETS.append((text_template.format(s=secret), secret))


add("my key is {s} ok", "sk-" + tok(48))
add("OPENAI_API_KEY={s}", "sk-proj-" + tok(64, URLSAFE))
add("use {s} for the service account", "sk-svcacct-" + tok(40, URLSAFE))
add("admin key {s}", "sk-admin-" + tok(40, URLSAFE))
add("claude: {s}", "sk-ant-api03-" + tok(93, URLSAFE))
add("anthropic admin {s}.", "sk-ant-admin01-" + tok(60, URLSAFE))
add("git token {s}", "ghp_" + tok(36))
add("oauth {s}", "gho_" + tok(36))
add("user-to-server {s}", "ghu_" + tok(36))
add("server {s}", "ghs_" + tok(36))
add("refresh {s}", "ghr_" + tok(36))
add("fine-grained {s}", "github_pat_" + tok(22) + "_" + tok(59))
add("slack bot {s}", "xoxb-" + tok(12, string.digits) + "-" + tok(13, string.digits) + "-" + tok(24))
add("slack user {s}", "xoxp-" + tok(12, string.digits) + "-" + tok(24))
add("slack app {s}", "xapp-1-" + tok(11) + "-" + tok(13, string.digits) + "-" + tok(64, LOWER_HEX))
add("slack refresh {s}", "xoxe-1-" + tok(140))
add("post to {s}", "https://hooks.slack.com/services/T" + upper(8) + "/B" + upper(8) + "/" + tok(24))
add("aws id {s}", "AKIA" + upper(16))
add("temp creds {s}", "ASIA" + upper(16))
add("aws_secret_access_key = {s}", tok(40, ALNUM + "/+"))
add("AWS_SECRET_ACCESS_KEY={s}", tok(40, ALNUM + "/+"))
add("maps key {s}", "AIza" + tok(35, URLSAFE))
add("oauth access {s}", "ya29." + tok(120, URLSAFE))
add("client secret {s}", "GOCSPX-" + tok(28, URLSAFE))
add("stripe {s}", "sk_live_" + tok(24))
add("stripe restricted {s}", "rk_live_" + tok(24))
add("stripe test {s}", "sk_test_" + tok(24))
add("webhook signing {s}", "whsec_" + tok(32))
add("hf {s}", "hf_" + tok(34))
add("npm publish {s}", "npm_" + tok(36))
add("gitlab {s}", "glpat-" + tok(20, URLSAFE))
add("deploy token {s}", "gldt-" + tok(20, URLSAFE))
add("runner {s}", "glrt-" + tok(20, URLSAFE))
add("pypi upload {s}", "pypi-AgEIcHlwaS5vcmc" + tok(70, URLSAFE))
add("sendgrid {s}", "SG." + tok(22, URLSAFE) + "." + tok(43, URLSAFE))
add("twilio api key {s}", "SK" + tok(32, LOWER_HEX))
add("mailgun {s}", "key-" + tok(32, string.ascii_lowercase + string.digits))
add("droplet token {s}", "dop_v1_" + tok(64, LOWER_HEX))
add("shopify {s}", "shpat_" + tok(32, LOWER_HEX))
add("groq {s}", "gsk_" + tok(52))
add("grok {s}", "xai-" + tok(80))
add("perplexity {s}", "pplx-" + tok(48))
add("replicate {s}", "r8_" + tok(37))
add("linear {s}", "lin_api_" + tok(40))
add("notion {s}", "secret_" + tok(43))
add("notion new {s}", "ntn_" + tok(46))
add("jira {s}", "ATATT3" + tok(180, URLSAFE))
add("telegram bot {s}", tok(10, string.digits) + ":AA" + tok(33, URLSAFE))
add("discord {s}", "M" + tok(25, URLSAFE) + "." + tok(6, URLSAFE) + "." + tok(38, URLSAFE))
add("session jwt {s}", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + tok(43, URLSAFE))
add('headers = {{"Authorization": "Bearer {s}"}}', tok(40, URLSAFE))
add("Authorization: Basic {s}", tok(24, ALNUM + "+/") + "==")
add("curl -H 'Authorization: token {s}'", tok(40, LOWER_HEX))
add("send it with Bearer {s}", tok(32, URLSAFE))
add("key:\n{s}\nend", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + tok(64, ALNUM + "+/")
    + "\n-----END RSA PRIVATE KEY-----")
add("{s}", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + tok(70, ALNUM + "+/")
    + "\n-----END OPENSSH PRIVATE KEY-----")
add("pasted half a key: {s}", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg" + tok(50, ALNUM + "+/"))
add("clone https://deploy:{s}@git.example.com/repo.git", tok(20))
add("DATABASE_URL=postgres://app:{s}@db:5432/main", tok(16))
add("mongodb+srv://admin:{s}@cluster0.mongodb.net", tok(18))
add("redis://default:{s}@cache:6379/0", tok(24))
add("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={s};EndpointSuffix=core", tok(86, ALNUM + "+/") + "==")
add("ftp://bob:{s}@files.local/x", "pw12")
add("DB_PASSWORD={s}", tok(14))
add("export GITHUB_TOKEN='{s}'", tok(18))
add('{{"password": "{s}", "user": "bob"}}', tok(12) + " with space")
add("{{'api_key': '{s}'}}", tok(20))
add("database:\n  password: {s}\n  host: db", tok(15))
add("- client_secret: {s}", tok(30))
add("run: tool --password {s} --verbose", tok(10))
add("mysql --api-key={s}", tok(22))
add("https://api.example.com/v1?access_token={s}&page=2", tok(30))
add("passphrase = \"{s}\"", "correct horse battery")
add("SECRET_KEY={s}", tok(50, ALNUM + "!@#%^*"))
add("credentials={s}", tok(25))
add("APIKEY: {s}", tok(26))

LOOKALIKES = [
    "Please reset your password from the account settings page.",
    "The token bucket algorithm smooths bursts of traffic.",
    "The secret to good bread is patience.",
    "Set max_tokens=500 and keep token_count=12 for the test.",
    "I asked the author=Jane about the draft.",
    "scikit-learn, sk-learn and sk-8 are not keys.",
    "Skip the task list, ask me later.",
    "Use github_pat_ as the prefix in the docs.",
    "My SSH key is in ~/.ssh/id_ed25519, do not print it.",
    "The AKIA prefix marks AWS access key ids.",
    "-----BEGIN PUBLIC KEY----- is fine to share.",
    "git commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed it",
    "uuid 123e4567-e89b-12d3-a456-426614174000 is an id",
    "Visit https://example.com/path?page=2&sort=asc for more.",
    "password=${DB_PASSWORD} reads it from the environment",
    "token: <your-token-here>",
    'export API_KEY="$API_KEY"',
    "Bearer tokens are sent in headers.",
    "Authorization headers are required.",
    "The eyJ prefix is base64 for a JSON brace.",
    "ssh://git@github.com/org/repo.git",
    "mailto:someone@example.com",
    "Call me at 555-0100 or write to box 42.",
    "is_secret=false and password_required=true",
    "The passwords must be 12 characters long.",
    "hf_transfer speeds up downloads; npm_config_cache is a path.",
    "See RFC 6750 section 2.1 on bearer token usage.",
    "Die Geheimzahl ist nicht hier; مرحبا بالعالم; 你好，世界",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "price=4.99 currency=EUR quantity=3",
    "The key-value store holds key-12 and key-abc.",
    "token=***",
]


class CorpusTest(unittest.TestCase):
    def test_corpus_sizes(self):
        self.assertGreaterEqual(len(SECRETS), 60)
        self.assertGreaterEqual(len(LOOKALIKES), 30)

    def test_no_secret_survives(self):
        survivors = [text for text, secret in SECRETS if secret in redact(text)]
        self.assertEqual(survivors, [])

    def test_each_redaction_names_its_kind(self):
        for text, _ in SECRETS:
            with self.subTest(text=text[:30]):
                self.assertRegex(redact(text), r"\[REDACTED:[a-z_]+\]")

    def test_lookalikes_survive_untouched(self):
        changed = [text for text in LOOKALIKES if redact(text) != text]
        self.assertEqual(changed, [])

    def test_redaction_is_deterministic_and_idempotent(self):
        for text, _ in SECRETS:
            once = redact(text)
            self.assertEqual(redact(text), once)
            self.assertEqual(redact(once), once)


class HostSecretsTest(unittest.TestCase):
    def test_values_the_host_knows_are_replaced_longest_first(self):
        secrets = {"SHORT": "abcd1234", "LONG": "abcd1234-and-more", "TINY": "ab"}
        out = redact("a abcd1234-and-more b abcd1234 c ab", secrets)
        self.assertEqual(out, "a [REDACTED:host_secret] b [REDACTED:host_secret] c ab")

    def test_agent_zero_aliases_are_neutralised(self):
        for alias in ["§§secret(OPENAI_KEY)", "§§SECRET( OPENAI_KEY )", "§§secret(a.b)"]:
            with self.subTest(alias=alias):
                out = redact(f"use {alias} now")
                self.assertNotIn("§§", out)
                self.assertIn("[secret-ref:", out)

    def test_non_text_and_internal_failures_fail_closed(self):
        for bad in [None, 42, b"bytes", ["list"]]:
            with self.subTest(bad=repr(bad)):
                with self.assertRaises(RedactionError):
                    redact(bad)  # type: ignore[arg-type]
        with self.assertRaises(RedactionError):
            redact("text", {"K": object()} | {"X": _Exploding()})  # a secret value that breaks on use


class _Exploding(str):
    def strip(self, *args):
        raise RuntimeError("broken secret store value")


if __name__ == "__main__":
    unittest.main()
