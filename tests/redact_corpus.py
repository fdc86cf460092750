"""The redaction corpus, generated when a test or bench asks for it (never pasted literals).

`secret_cases()` gives texts that each hold one credential and the parts of it that must not
survive redaction; `lookalikes()` gives texts that merely resemble credentials and must come out
unchanged. Both come from a seeded random source, so every run sees the same corpus; the tokens
follow the providers' published shapes, with random bodies. Shared by tests/test_redact*.py and
bench/redact.py.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass, field

SEED = 20261202
ALNUM = string.ascii_letters + string.digits
LOWER_HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
FORMAT_CHARS = ("\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")  # invisible in a paste


@dataclass(frozen=True)
class Case:
    """A text holding a credential; no string in `parts` may appear in the redacted text."""

    kind: str  # the class this case belongs to (for reports), not the placeholder kind
    text: str
    parts: tuple[str, ...]
    host: dict = field(default_factory=dict)  # the host's secrets passed to redact()


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def tok(self, n: int, alphabet: str = ALNUM) -> str:
        body = "".join(self.rng.choice(alphabet) for _ in range(n))
        if alphabet in (ALNUM, URLSAFE, B64) and n >= 8 and not any(c.isdigit() for c in body):
            # real keys of this length hold a digit
            body = body[:-1] + self.rng.choice(string.digits)
        return body

    def upper(self, n: int) -> str:
        return self.tok(n, string.ascii_uppercase + string.digits)

    def words(self, n: int) -> str:
        pool = ("correct", "horse", "battery", "staple", "orange", "window", "quiet", "river",
                "violet", "anchor")
        return " ".join(self.rng.choice(pool) for _ in range(n)) + str(self.rng.randrange(10, 99))


def provider_tokens(g: _Gen) -> list[tuple[str, str]]:
    """(sentence with {s}, token) for the providers' published token shapes."""
    t = g.tok
    return [
        ("my key is {s} ok", "sk-" + t(48)),
        ("OPENAI_API_KEY={s}", "sk-proj-" + t(64, URLSAFE)),
        ("use {s} for the service account", "sk-svcacct-" + t(40, URLSAFE)),
        ("admin key {s}", "sk-admin-" + t(40, URLSAFE)),
        ("claude: {s}", "sk-ant-api03-" + t(93, URLSAFE)),
        ("anthropic admin {s}.", "sk-ant-admin01-" + t(60, URLSAFE)),
        ("git token {s}", "ghp_" + t(36)),
        ("oauth {s}", "gho_" + t(36)),
        ("user-to-server {s}", "ghu_" + t(36)),
        ("server {s}", "ghs_" + t(36)),
        ("refresh {s}", "ghr_" + t(36)),
        ("fine-grained {s}", "github_pat_" + t(22) + "_" + t(59)),
        ("slack bot {s}",
         "xoxb-" + t(12, string.digits) + "-" + t(13, string.digits) + "-" + t(24)),
        ("slack user {s}", "xoxp-" + t(12, string.digits) + "-" + t(24)),
        ("slack app {s}",
         "xapp-1-" + t(11) + "-" + t(13, string.digits) + "-" + t(64, LOWER_HEX)),
        ("slack refresh {s}", "xoxe-1-" + t(140)),
        ("post to {s}",
         "https://hooks.slack.com/services/T" + g.upper(8) + "/B" + g.upper(8) + "/" + t(24)),
        ("aws id {s}", "AKIA" + g.upper(16)),
        ("temp creds {s}", "ASIA" + g.upper(16)),
        ("aws_secret_access_key = {s}", t(40, B64)),
        ("AWS_SECRET_ACCESS_KEY={s}", t(40, B64)),
        ("maps key {s}", "AIza" + t(35, URLSAFE)),
        ("oauth access {s}", "ya29." + t(120, URLSAFE)),
        ("client secret {s}", "GOCSPX-" + t(28, URLSAFE)),
        ("stripe {s}", "sk_live_" + t(24)),
        ("stripe restricted {s}", "rk_live_" + t(24)),
        ("stripe test {s}", "sk_test_" + t(24)),
        ("webhook signing {s}", "whsec_" + t(32)),
        ("hf {s}", "hf_" + t(34)),
        ("npm publish {s}", "npm_" + t(36)),
        ("gitlab {s}", "glpat-" + t(20, URLSAFE)),
        ("deploy token {s}", "gldt-" + t(20, URLSAFE)),
        ("runner {s}", "glrt-" + t(20, URLSAFE)),
        ("pypi upload {s}", "pypi-AgEIcHlwaS5vcmc" + t(70, URLSAFE)),
        ("sendgrid {s}", "SG." + t(22, URLSAFE) + "." + t(43, URLSAFE)),
        ("twilio api key {s}", "SK" + t(32, LOWER_HEX)),
        ("mailgun {s}", "key-" + t(32, string.ascii_lowercase + string.digits)),
        ("droplet token {s}", "dop_v1_" + t(64, LOWER_HEX)),
        ("shopify {s}", "shpat_" + t(32, LOWER_HEX)),
        ("groq {s}", "gsk_" + t(52)),
        ("grok {s}", "xai-" + t(80)),
        ("perplexity {s}", "pplx-" + t(48)),
        ("replicate {s}", "r8_" + t(37)),
        ("linear {s}", "lin_api_" + t(40)),
        ("notion {s}", "secret_" + t(43)),
        ("notion new {s}", "ntn_" + t(46)),
        ("jira {s}", "ATATT3" + t(180, URLSAFE)),
        ("telegram bot {s}", t(10, string.digits) + ":AA" + t(33, URLSAFE)),
        ("discord {s}", "M" + t(25, URLSAFE) + "." + t(6, URLSAFE) + "." + t(38, URLSAFE)),
        ("session jwt {s}",
         "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + t(43, URLSAFE)),
    ]


def _classic(g: _Gen) -> list[Case]:
    """The shapes the first corpus covered: provider tokens, schemes, keys, URL passwords,
    assignments."""
    cases = [Case("token", text.format(s=s), (s,)) for text, s in provider_tokens(g)]
    t = g.tok
    rest = [
        ('headers = {{"Authorization": "Bearer {s}"}}', t(40, URLSAFE)),
        ("Authorization: Basic {s}", t(24, B64) + "=="),
        ("curl -H 'Authorization: token {s}'", t(40, LOWER_HEX)),
        ("send it with Bearer {s}", t(32, URLSAFE)),
        ("key:\n{s}\nend", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + t(64, B64)
         + "\n-----END RSA PRIVATE KEY-----"),
        ("{s}", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + t(70, B64)
         + "\n-----END OPENSSH PRIVATE KEY-----"),
        ("pasted half a key: {s}", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg" + t(50, B64)),
        ("clone https://deploy:{s}@git.example.com/repo.git", t(20)),
        ("DATABASE_URL=postgres://app:{s}@db:5432/main", t(16)),
        ("mongodb+srv://admin:{s}@cluster0.mongodb.net", t(18)),
        ("redis://default:{s}@cache:6379/0", t(24)),
        ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={s};EndpointSuffix=core",
         t(86, B64) + "=="),
        ("ftp://bob:{s}@files.local/x", "pw12"),
        ("DB_PASSWORD={s}", t(14)),
        ("export GITHUB_TOKEN='{s}'", t(18)),
        ('{{"password": "{s}", "user": "bob"}}', t(12) + " with space"),
        ("{{'api_key': '{s}'}}", t(20)),
        ("database:\n  password: {s}\n  host: db", t(15)),
        ("- client_secret: {s}", t(30)),
        ("run: tool --password {s} --verbose", t(10)),
        ("mysql --api-key={s}", t(22)),
        ("https://api.example.com/v1?access_token={s}&page=2", t(30)),
        ("passphrase = \"{s}\"", "correct horse battery"),
        ("SECRET_KEY={s}", t(50, ALNUM + "!@#%^*")),
        ("credentials={s}", t(25)),
        ("APIKEY: {s}", t(26)),
    ]
    return cases + [Case("classic", text.format(s=s), (s,)) for text, s in rest]


def _url_credentials(g: _Gen) -> list[Case]:
    cases = []
    for scheme, host in (("redis", "cache:6379/0"), ("rediss", "redis.example.net:6380"),
                         ("postgres", "db/main"), ("postgresql", "10.0.0.5:5432/app"),
                         ("mysql", "db.internal/shop"), ("amqp", "rabbit/vhost"),
                         ("mongodb+srv", "cluster0.example.net/?retryWrites=true"),
                         ("https", "proxy.corp:8080"), ("smtp", "mail.example.com:587"),
                         ("ftp", "files.example.org/pub")):
        password = g.tok(g.rng.randrange(12, 30))
        cases.append(Case("url_empty_user", f"connect with {scheme}://:{password}@{host} please",
                          (password,)))
    for scheme in ("postgres", "mysql", "redis", "https", "amqps"):
        head, tail = g.tok(6), g.tok(10) + "-Secret"
        password = f"{head}@{tail}" if scheme != "https" else f"{head}@{tail}@x{g.tok(4)}"
        cases.append(Case("url_at_in_password", f"{scheme}://app:{password}@db.example.com/main",
                          (password, tail, "@" + tail)))
    for text, token in (("git clone https://{s}@github.com/org/repo.git", g.tok(32, LOWER_HEX)),
                        ("remote = https://{s}@git.example.com/team/app", g.tok(40, LOWER_HEX)),
                        ("pip install git+https://{s}@github.com/org/lib.git", g.tok(28)),
                        ("https://{s}@api.example.com/v2/items", g.tok(24, URLSAFE)),
                        ("https://x-access-token:{s}@github.com/org/repo", g.tok(36)),
                        ("https://oauth2:{s}@gitlab.example.com/group/p.git", g.tok(20, URLSAFE))):
        cases.append(Case("url_token_user", text.format(s=token), (token,)))
    return cases


_SECRET_NAMES = ("DB_PASS", "REDIS_PASS", "SMTP_PASS", "OPENAI_KEY", "STRIPE_KEY", "ANTHROPIC_KEY",
                 "MAILGUN_KEY", "SLACK_BOT_TOKEN", "VAULT_TOKEN", "MYSQL_PWD", "ADMIN_PWD",
                 "AWS_CREDENTIALS", "GCP_CREDENTIALS", "dbPass", "apiKey", "clientSecret",
                 "authToken", "JWT_SECRET", "WEBHOOK_SECRET", "ENCRYPTION_KEY", "master_key",
                 "HTTP_AUTH", "session_cookie", "DJANGO_SECRET_KEY", "SERVICE_ACCOUNT_KEY",
                 "db.pass")
_FORMS = ("{n}={v}", "export {n}={v}", '{n}="{v}"', "{n}: {v}", "set {n}={v}", '$env:{n} = "{v}"',
          "  {n} = {v}", '{{"{n}": "{v}"}}', "--{n} {v}", "{n}={v} # from the vault")


def _assignments(g: _Gen) -> list[Case]:
    cases = []
    for i, name in enumerate(_SECRET_NAMES):
        value = g.tok(g.rng.randrange(10, 24))
        form = _FORMS[i % len(_FORMS)]
        if form.startswith("--") and "." in name:
            form = "{n}={v}"
        cases.append(Case("assignment_name", "config: " + form.format(n=name, v=value), (value,)))
    for name in ("DB_PASSWORD", "API_TOKEN", "SECRET", "OPENAI_KEY"):
        head, tail = g.tok(3), g.tok(5) + "SecretTail" + g.tok(2, string.digits)
        cases.append(Case("assignment_semicolon", f"{name}={head};{tail}", (tail, ";" + tail)))
    for template in ("password={v}", "passwd = {v}", "Password: {v}", "export ADMIN_PASSWORD={v}",
                     "DB_PASS={v}\nDB_HOST=db"):
        phrase = g.words(4)
        words = phrase.split()
        cases.append(Case("assignment_spaces", template.format(v=phrase),
                          (phrase, " ".join(words[1:]))))
    return cases


def _headers(g: _Gen) -> list[Case]:
    t = g.tok
    rows = [("X-API-Key: {s}", t(32)), ("x-api-key: {s}", t(24, LOWER_HEX)),
            ("X-Auth-Token: {s}", t(30, URLSAFE)), ("X-Access-Token: {s}", t(28)),
            ("Api-Key: {s}", t(26)), ("Authorization: {s}", t(36, URLSAFE)),
            ("Authorization: ApiKey {s}", t(30)),
            ("Proxy-Authorization: Basic {s}", t(20, B64) + "="),
            ("Cookie: sessionid={s}; csrftoken=" + t(20), t(32)),
            ("Set-Cookie: session={s}; Path=/; HttpOnly; Secure", t(40, URLSAFE)),
            ('curl -H "X-Api-Key: {s}" https://api.example.com/v1/items', t(24)),
            ("curl -H 'Authorization: Bearer {s}' https://api.example.com", t(10)),
            ('curl --header "Cookie: sid={s}" https://app.example.com/', t(26)),
            ('curl -s -H "X-Token: {s}" -H "Accept: application/json" https://x.example', t(22)),
            ('requests.get(url, headers={{"X-API-Key": "{s}"}})', t(30))]
    return [Case("header", "request:\n" + text.format(s=s), (s,)) for text, s in rows]


def _with_format_char(g: _Gen, token: str, char: str) -> str:
    at = g.rng.randrange(len(token) // 3, 2 * len(token) // 3)
    return token[:at] + char + token[at:]


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _unicode(g: _Gen) -> list[Case]:
    cases = []
    t = g.tok
    tokens = ["sk-proj-" + t(48, URLSAFE), "ghp_" + t(36),
              "xoxb-" + t(12, string.digits) + "-" + t(24), "AKIA" + g.upper(16), "hf_" + t(34),
              "glpat-" + t(20, URLSAFE), "AIza" + t(35, URLSAFE), "sk-ant-api03-" + t(60, URLSAFE),
              "github_pat_" + t(22) + "_" + t(40), "gsk_" + t(52),
              "sk_live_" + t(24), "npm_" + t(36)]
    for i, token in enumerate(tokens):
        char = FORMAT_CHARS[i % len(FORMAT_CHARS)]
        pasted = _with_format_char(g, token, char)
        halves = tuple(part for part in pasted.split(char))
        cases.append(Case("unicode_format_char", f"the key from the docs page: {pasted} (copied)",
                          (pasted,) + halves))
    two = _with_format_char(g, _with_format_char(g, "sk-" + t(48), "\u00ad"), "\u200b")
    cases.append(Case("unicode_format_char", f"key {two}",
                      (two,) + tuple(p for p in two.replace("\u200b", "\u00ad").split("\u00ad"))))
    for token in ("sk-" + t(40), "sk-proj-" + t(40, URLSAFE), "ghp_" + t(36),
                  "xoxp-" + t(12, string.digits) + "-" + t(24)):
        wide_prefix = _fullwidth(token[:4]) + token[4:]
        cases.append(Case("unicode_fullwidth", f"キー：{wide_prefix}", (wide_prefix, token[4:])))
    wide = _fullwidth("sk-" + t(40))
    cases.append(Case("unicode_fullwidth", f"全角のキー {wide} です", (wide,)))
    for token in ("sk-proj-" + t(80, URLSAFE), "ghp_" + t(36), "github_pat_" + t(22) + "_" + t(59),
                  "hf_" + t(34), "AIza" + t(35, URLSAFE),
                  "xoxb-" + t(12, string.digits) + "-" + t(13, string.digits) + "-" + t(24)):
        cut = len(token) - g.rng.randrange(9, 16)
        head, tail = token[:cut], token[cut:]
        if not any(c.isdigit() for c in tail):
            tail = tail[:-1] + "7"
        cases.append(Case("unicode_wrapped", f"my key is {head}\n{tail}\nthanks", (head, tail)))
    soft = _with_format_char(g, "sk-" + t(30), "\u00ad")
    cases.append(Case("unicode_wrapped", f"here: {soft[:20]}\u00ad\n{soft[20:]}",
                      (soft[:20], soft[20:])))
    return cases


def _pem_body(g: _Gen, lines: int, width: int = 64) -> list[str]:
    return ([g.tok(width, B64) for _ in range(lines - 1)]
            + [g.tok(g.rng.randrange(10, width), B64) + "=="])


def _split_pastes(g: _Gen) -> list[Case]:
    cases = []
    for kind, lead in (("RSA PRIVATE KEY", "second half of the key:\n"), ("PRIVATE KEY", ""),
                       ("EC PRIVATE KEY", "rest:\n"), ("OPENSSH PRIVATE KEY", "  "),
                       ("ENCRYPTED PRIVATE KEY", "continued from above\n\n")):
        body = _pem_body(g, g.rng.randrange(3, 8), 70 if "OPENSSH" in kind else 64)
        text = lead + "\n".join(body) + f"\n-----END {kind}-----\nthat's all"
        cases.append(Case("pem_without_begin", text, tuple(body)))
    first = g.tok(40, B64)
    body = _pem_body(g, 4)
    cases.append(Case("pem_without_begin",
                      f"rest of it: {first}\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----",
                      (first,) + tuple(body)))
    for version, algo in (("2", "ssh-rsa"), ("3", "ssh-ed25519"), ("3", "ecdsa-sha2-nistp256")):
        public = _pem_body(g, 2)
        private = _pem_body(g, g.rng.randrange(1, 5))
        mac = g.tok(64, LOWER_HEX)
        text = (f"PuTTY-User-Key-File-{version}: {algo}\nEncryption: none\n"
                "Comment: imported-openssh-key\n"
                f"Public-Lines: {len(public)}\n" + "\n".join(public)
                + f"\nPrivate-Lines: {len(private)}\n"
                + "\n".join(private) + f"\nPrivate-MAC: {mac}\n")
        cases.append(Case("putty_private_key", text, tuple(private)))
    return cases


def _host_secrets(g: _Gen) -> list[Case]:
    cases = []
    for stored, shown in (("hunter2-password", "HUNTER2-PASSWORD"), ("Tr0ub4dor&3", "tr0ub4dor&3"),
                          ("MySecretValue42", "mysecretvalue42"),
                          ("s3cr3t-" + g.tok(8).lower(), None), ("pa55" + g.tok(6), None)):
        shown = shown or stored.swapcase()
        cases.append(Case("host_secret_case", f"the db password is {shown} I think", (shown,),
                          {"DB": stored}))
    stored = "zebra-" + g.tok(10)
    laced = _with_format_char(g, stored, "\u200b")
    cases.append(Case("host_secret_unicode", f"it is {laced}",
                      (laced,) + tuple(laced.split("\u200b")), {"Z": stored}))
    return cases


def _url_delimiters(g: _Gen) -> list[Case]:
    """URL passwords holding a character that ends a URL component, or (assigned) a space."""
    cases = []
    for i, (scheme, user, host) in enumerate((
            ("postgres", "svc", "db:5432/app"), ("mysql", "root", "db.internal/shop"),
            ("redis", "", "cache:6379/0"), ("amqp", "app", "rabbit/vhost"),
            ("mongodb+srv", "admin", "cluster0.example.net/?retryWrites=true"),
            ("postgresql", "app", "10.0.0.5/main"), ("rediss", "", "redis.example.net"))):
        head, mid, tail = g.tok(5), g.tok(6), g.tok(4)
        password = f"{head}{'#?/'[i % 3]}{mid}{'/#?'[i % 3]}{tail}"
        url = f"{scheme}://{user}:{password}@{host}"
        form = ("DATABASE_URL={u}", "connect with {u} please", "{u}")[i % 3]
        cases.append(Case("url_delimiter_in_password", form.format(u=url),
                          (password, head, mid, tail)))
    for form, scheme, host in (("DATABASE_URL={u}", "postgres", "db/app"),
                               ('REDIS_URL="{u}"', "redis", "cache:6379"),
                               ("dsn: {u}", "mysql", "db/x"),
                               ('{{"url": "{u}"}}', "amqp", "rabbit"),
                               ("export MONGO_URL={u} # prod", "mongodb+srv",
                                "cluster0.example.net")):
        phrase = g.words(3)
        words = phrase.split()
        url = f"{scheme}://{'' if scheme == 'redis' else 'app'}:{phrase}@{host}"
        cases.append(Case("url_space_in_password", form.format(u=url),
                          (phrase, words[1], words[2])))
    return cases


def _more_shapes(g: _Gen) -> list[Case]:
    """Webhooks, service-account key ids, mid-line labels, JWTs without a JSON payload, an AWS key
    pair, signed URLs and keys with a no-break space: the shapes issue 22 found passing."""
    t = g.tok
    rows = [("post to https://discord.com/api/webhooks/{s}",
             t(19, string.digits) + "/" + t(68, URLSAFE)),
            ("hook https://discordapp.com/api/webhooks/{s} ok",
             t(18, string.digits) + "/" + t(68, URLSAFE)),
            ("https://canary.discord.com/api/v10/webhooks/{s}",
             t(19, string.digits) + "/" + t(68, URLSAFE)),
            ("teams https://contoso.webhook.office.com/webhookb2/{s}",
             "-".join(t(n, LOWER_HEX) for n in (8, 4, 4, 4, 12))
             + "@" + t(8, LOWER_HEX) + "/IncomingWebhook/" + t(32, LOWER_HEX)
             + "/" + t(8, LOWER_HEX)),
            ("old teams https://outlook.office.com/webhook/{s}",
             t(36, LOWER_HEX) + "@" + t(36, LOWER_HEX)
             + "/IncomingWebhook/" + t(32, LOWER_HEX) + "/" + t(36, LOWER_HEX)),
            ("mattermost https://chat.example.com/hooks/{s}",
             t(25, string.ascii_lowercase) + t(1, string.digits)),
            ("rocket https://rocket.example.org/hooks/{s}", t(17) + "/" + t(48)),
            ('{{"type": "service_account", "project_id": "demo-42", "private_key_id": "{s}"}}',
             t(40, LOWER_HEX)),
            ('  "private_key_id": "{s}",', t(40, LOWER_HEX)),
            ("here is my token: {s} thanks", t(24)),
            ("ok, and the secret: {s}.", t(32)),
            ('the app secret: "{s}" is new', t(20)),
            ("use this Token: {s} for the bot", t(40, LOWER_HEX)),
            ("jwt {s} ok", "eyJhbGciOiJIUzI1NiJ9.eyAic3ViIjogIjEyMyJ9." + t(43, URLSAFE)),
            ("bearer-less {s}", "eyJ0eXAiOiJKV1QifQ." + t(30, URLSAFE) + "." + t(43, URLSAFE)),
            ("blob https://acct.blob.core.windows.net/c/b.txt?sv=2021-06-08&sp=r&sig={s}",
             t(40) + "%2B" + t(3) + "%3D"),
            ("flow https://prod-12.westus.logic.azure.com:443/workflows/a/triggers/manual/paths/"
             "invoke?sp=%2Ftriggers&sv=1.0&sig={s}", t(43, URLSAFE)),
            ("s3 https://b.s3.amazonaws.com/k?X-Amz-Expires=60&X-Amz-Signature={s}",
             t(64, LOWER_HEX)),
            ("gcs https://storage.googleapis.com/b/o?X-Goog-Signature={s}&x=1", t(256, LOWER_HEX))]
    cases = [Case("shape_22", text.format(s=s), (s,)) for text, s in rows]
    for form in ("{i} {s}", "{i},{s}", "aws: {i} / {s}",
                 "Access key ID,Secret access key\n{i},{s}\n",
                 "id {i} and the other one is {s}", "{i}\n{s}"):
        key_id, secret = "AKIA" + g.upper(16), t(40, B64)
        cases.append(Case("aws_key_pair", form.format(i=key_id, s=secret), (key_id, secret)))
    for i, token in enumerate(("sk-proj-" + t(48, URLSAFE), "ghp_" + t(36),
                               "glpat-" + t(20, URLSAFE), "hf_" + t(34))):
        pasted = _with_format_char(g, token, "\u00a0\u202f"[i % 2])
        cases.append(Case("unicode_no_break_space", f"the key: {pasted} (copied)",
                          (pasted,) + tuple(pasted.replace("\u202f", "\u00a0").split("\u00a0"))))
    return cases


def secret_cases(seed: int = SEED) -> list[Case]:
    g = _Gen(seed)
    return (_classic(g) + _url_credentials(g) + _assignments(g) + _headers(g) + _unicode(g)
            + _split_pastes(g) + _host_secrets(g) + _url_delimiters(g) + _more_shapes(g))


_FIXED_LOOKALIKES = [
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
    "price=4.99 currency=EUR quantity=3",
    "The key-value store holds key-12 and key-abc.",
    "token=***",
    "PWD=/home/ada/projects and OLDPWD=/tmp",
    "Pass key=value pairs in the query string, e.g. key=value&page=2.",
    "sort_key=created_at primary_key=id partition_key=user_id",
    "SSH_KEY=~/.ssh/id_ed25519",
    "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/service-account.json",
    "git@github.com:org/repo.git is the remote",
    "https://ada@example.com/profile is a URL with a user name only",
    "The hyphen\u00adation of this word was copied from a web page.",
    "家族👨\u200d👩\u200d👧で旅行：東京、大阪（三日間）。",
    "Привет, мир! Ключ к успеху — терпение.",
    "Ｆｕｌｌｗｉｄｔｈ text is common in Japanese input: ＡＢＣ１２３",
    "password = os.environ[\"DB_PASSWORD\"]",
    "token = get_token(user)",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----",
    # A URL and, later on the line, an address or an `@` in its path, query or fragment (issue 22).
    "see http://a.com:8080/x, write to bob@x.org",
    "HOMEPAGE=http://a.com:8080/x, write to bob@x.org",
    "HOMEPAGE=http://localhost:8080 ask bob@x.org",
    "Note: https://a.com/x and mail bob@x.org",
    "http://localhost:3000/@vite/client",
    "https://example.com:8443/users?email=bob@x.org",
    "https://user@example.com:8443/path?email=bob@x.org",
    "https://cdn.jsdelivr.net/npm/pkg@1.2.3/dist/x.js",
    "pip install git+https://github.com/org/repo.git@v1.2.3#egg=repo",
    "git+ssh://git@github.com:org/repo.git@v1.2",
    "http://[::1]:8080/x?u=bob@x.org",
    "https://web.archive.org/web/2020/https://a.com:81/@x",
    # Webhook, signature, label, JWT and service-account look-alikes.
    "https://discord.com/api/webhooks is the endpoint; see https://discord.com/channels/12345/67890",
    "https://api.github.com/repos/org/app/hooks/123456789",
    "https://docs.mattermost.com/developer/webhooks-incoming.html",
    "https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/what",
    "sig=1 is the flag; https://example.com/?sig=short; email_sig=yes",
    "The secret: patience and butter.",
    "One more token: a unit of text for the model.",
    "Next token: ISO-8601-formatted-date, then the time zone.",
    "the model's token: gpt-4o-2024-08-06 sets the budget",
    "The secret: AbstractSingletonProxyFactoryBean is a joke.",
    "The eyJ prefix and eyJhbGciOi.json are in docs.example.com/eyJ.html",
    '{"type": "service_account", "project_id": "demo-42", "client_id": "109876543210987654321"}',
    "Prix\u00a0: 100\u00a0€, soit 1\u00a0000\u00a0000 au total\u00a0!",
    "Bonjour\u00a0Madame, sk\u00a0learn et sk-8\u00a0ne sont pas des clés.",
]


def lookalikes(seed: int = SEED) -> list[str]:
    g = _Gen(seed + 1)
    out = list(_FIXED_LOOKALIKES)
    for word in ("sha1", "md5", "checksum", "digest", "build id", "etag", "hash", "fingerprint"):
        n = 32 if word in ("md5", "etag") else 40
        out.append(f"The {word} of the release is {g.tok(n, LOWER_HEX)}, "
                   "compare it before installing.")
    for _ in range(6):
        u = g.tok(32, LOWER_HEX)
        out.append(f"request id {u[:8]}-{u[8:12]}-4{u[13:16]}-a{u[17:20]}-{u[20:]} "
                   "failed at step 3")
    for _ in range(5):
        full = g.tok(40, LOWER_HEX)
        out.append(f"commit {full}\nAuthor: Ada <ada@example.com>\n\n"
                   f"    fix: cherry-picked {full[:7]}")
    for _ in range(4):
        png = base64.b64encode(bytes(g.rng.randrange(256) for _ in range(300))).decode()
        out.append(f'<img src="data:image/png;base64,{png}" alt="chart">')
    for _ in range(4):
        out.append(f"docker pull ghcr.io/org/app@sha256:{g.tok(64, LOWER_HEX)}")
    for name in ("AbstractSingletonProxyFactoryBean",
                 "test_redaction_keeps_long_identifiers_untouched_2024",
                 "com.example.payments.internal.ReconciliationScheduler",
                 "kubernetes.io/service-account-token-x9k2p",
                 "node_modules/.pnpm/@types+node@20.11.5/node_modules",
                 "__pycache__/honcho_hub.cpython-311.pyc"):
        out.append(f"see {name} for details")
    for url in ("https://example.com/a/b?x=1&y=2#top", "https://docs.python.org/3/library/re.html",
                "postgres://db.internal:5432/main", "redis://cache:6379/0", "https://[2001:db8::1]:8443/health",
                "http://localhost:8080/api/v1/items?page=2"):
        out.append(f"open {url} in the browser")
    for user in ("ada.lovelace", "bob", "first.last+tag", "support", "no-reply"):
        out.append(f"write to {user}@"
                   f"{g.rng.choice(['example.com', 'mail.example.org', 'corp.test'])} today")
    for user in ("ada", "bob.smith", "team"):
        port = g.rng.randrange(1024, 65535)
        out.append(f"see http://{g.tok(6).lower()}.example.com:{port}/{g.tok(4).lower()}, "
                   f"write to {user}@x.org")
        out.append(f"open https://medium.com/@{user}/{g.tok(8).lower()}-{g.tok(6, LOWER_HEX)}")
    for word in ("patience", "practice", "good-butter-2024", "chapter-12"):
        out.append(f"and the secret: {word}, said the baker; next token: {word}")
    return out
