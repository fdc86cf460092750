"""The credential shapes `redact` replaces, most specific first.

Each pattern is bounded (no unbounded backtracking) and anchored on a boundary, so that words which
merely contain a prefix survive; a named group `keep` is text kept in front of the placeholder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_B = r"(?<![A-Za-z0-9_\-])"  # start boundary that also treats '-' and '_' as part of a token
_E = r"(?![A-Za-z0-9_\-])"


@dataclass(frozen=True)
class Shape:
    """A credential shape; `needles` are literals one of which must occur for the regex to be
    tried (compared case-insensitively when the pattern is), a cheap pre-check that keeps redaction
    fast."""

    kind: str
    needles: tuple[str, ...]
    pattern: re.Pattern
    ignore_case: bool
    short: bool  # can match without any run of LONG_RUN characters (see below)

    def may_occur(self, text: str, lowered: str) -> bool:
        """Whether any needle occurs; `lowered` is text.lower(), computed once by the caller."""
        haystack = lowered if self.ignore_case else text
        for needle in self.needles:
            if needle in haystack:
                return True
        return False


def _p(kind: str, needles: tuple[str, ...], pattern: str, flags: int = 0,
       short: bool = False) -> Shape:
    return Shape(kind, needles, re.compile(pattern, flags), bool(flags & re.IGNORECASE), short)


# Every token shape below except the `short` ones is at least 16 characters without whitespace, so
# text without such a word (most prose) needs only the short shapes: see `has_long_word`.
LONG_WORD = 16


def has_long_word(text: str) -> bool:
    """Whether some whitespace-separated word has LONG_WORD or more characters."""
    return max(map(len, text.split()), default=0) >= LONG_WORD


# redact.placeholder("aws_access_key"), which is a floor below
AWS_ID_PLACEHOLDER = "[REDACTED:aws_access_key]"
AWS_PAIR_DISTANCE = 80  # how far after its id an unlabelled secret key is taken for one


def is_aws_secret_beside_id(text: str, start: int, word: str) -> bool:
    """Whether the 40-character `word` at `start` is an AWS secret key: mixed case with a digit,
    `/` or `+` (not a hex digest), within AWS_PAIR_DISTANCE characters after a redacted access key
    id."""
    if word.lower() == word or word.upper() == word or word.isalpha():
        return False
    return AWS_ID_PLACEHOLDER in text[
        max(0, start - AWS_PAIR_DISTANCE - len(AWS_ID_PLACEHOLDER)):start]


PATTERNS: tuple[Shape, ...] = (
    _p("private_key", ("-----BEGIN",),
       r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----"
       r"(?:[\s\S]{0,20000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----|[\s\S]*)",
       short=True),
    # The header is JSON (`eyJ` is `{"`); the payload need not be (`eyA` is `{ "`, or not JSON at
    # all).
    _p("jwt", ("eyJ",),
       _B + r"eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}" + _E),
    # Webhook URLs whose last path parts are the credential: the service's prefix is kept.
    _p("discord_webhook", ("/webhooks/",),
       r"(?P<keep>https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/"
       r"(?:v\d{1,2}/)?webhooks/)\d{15,22}/[A-Za-z0-9_\-]{40,128}" + _E),
    _p("teams_webhook", ("office.com/webhook",),
       r"(?P<keep>https://[A-Za-z0-9.\-]{0,64}\.office\.com/webhook(?:b2)?/)"
       r"[A-Za-z0-9@/_.~%\-]{40,600}", re.IGNORECASE),
    # Mattermost (`/hooks/<26 lower-case letters and digits>`) and Rocket.Chat
    # (`/hooks/<id>/<token>`).
    _p("chat_webhook", ("/hooks/",), r"(?P<keep>https?://[A-Za-z0-9.\-:]{1,253}/hooks/)"
       r"(?:(?=[a-z]{0,25}[0-9])[a-z0-9]{26}|[A-Za-z0-9]{17}/[A-Za-z0-9_\-]{40,64})" + _E),
    # The user information runs to the LAST `@` on the line (a password may hold `@`, `#`, `?`, `/`
    # or, in an assignment, spaces), not past another `://`: `url_userinfo` decides how much of it
    # is a credential. (It starts with the literal `://`, so the regex engine skips to those; the
    # scheme is checked behind, and a URL with no `@` before the next `://` or the line's end is
    # given up on by one cheap scan.)
    _p("url_credentials", ("://",), r"(?P<keep>://)(?<=[A-Za-z0-9]://)"
       r"(?=[^\n\r@:\"'`<>]{0,512}+(?::(?!//)[^\n\r@:\"'`<>]{0,512}+){0,16}+@)"
       r"(?P<userinfo>(?:[^\n\r:\"'`<>]|:(?!//)){1,512})(?=@)", short=True),
    _p("putty_private_key", ("Private-Lines",),
       r"(?P<keep>Private-Lines:[ \t]*\d{1,4}\s{1,16})[A-Za-z0-9+/=]{1,4096}"
       r"(?:\s{1,16}(?!Private-)[A-Za-z0-9+/=]{1,4096}){0,400}", short=True),
    _p("authorization", ("authorization",),
       r"(?P<keep>\bAuthorization\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest|Bot)\s+)"
       r"[^\s\"',;]{1,4096}", re.IGNORECASE, short=True),
    _p("bearer_token", ("Bearer",), r"(?P<keep>\bBearer\s+)[A-Za-z0-9._~+/=\-]{16,4096}"),
    _p("anthropic_key", ("sk-ant-",), _B + r"sk-ant-[a-z]{2,8}\d{2}-[A-Za-z0-9_\-]{20,512}" + _E),
    _p("openai_key", ("sk-",),
       _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,512}" + _E),
    _p("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
       _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
    _p("slack_token", ("xox", "xapp-"), _B + r"(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,255}" + _E),
    _p("slack_webhook", ("hooks.slack.com",),
       r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/\-]{20,255}"),
    _p("aws_access_key",
       ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA"),
       r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b"),
    # A secret key pasted without a label beside its id (`AKIA… wJalr…`, a CSV row): a
    # 40-character base64 word that `is_aws_secret_beside_id` accepts (the id was redacted just
    # above).
    _p("aws_secret_beside_id", (AWS_ID_PLACEHOLDER,),
       r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    _p("aws_secret_key", ("aws",),
       r"(?P<keep>\baws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"
       r"(?![A-Za-z0-9/+=])", re.IGNORECASE),
    _p("google_api_key", ("AIza",), _B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
    _p("google_oauth_token", ("ya29.",), _B + r"ya29\.[0-9A-Za-z_\-]{20,2048}" + _E),
    _p("google_client_secret", ("GOCSPX-",), _B + r"GOCSPX-[A-Za-z0-9_\-]{20,64}" + _E),
    _p("stripe_key", ("_live_", "_test_"),
       _B + r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,255}" + _E),
    _p("stripe_webhook_secret", ("whsec_",), _B + r"whsec_[A-Za-z0-9]{24,255}" + _E),
    _p("huggingface_token", ("hf_",), _B + r"hf_[A-Za-z0-9]{30,64}" + _E),
    _p("npm_token", ("npm_",), _B + r"npm_[A-Za-z0-9]{36}" + _E),
    _p("gitlab_token", ("glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "glft-", "glsoat-"),
       _B + r"(?:glpat|gldt|glrt|glcbt|glptt|glft|glsoat)-[A-Za-z0-9_\-]{20,64}" + _E),
    _p("pypi_token", ("pypi-",), _B + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,512}" + _E),
    _p("sendgrid_key", ("SG.",), _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
    _p("twilio_key", ("SK",), r"\bSK[0-9a-f]{32}\b"),
    _p("mailgun_key", ("key-",), _B + r"key-[0-9a-z]{32}" + _E),
    _p("digitalocean_token", ("_v1_",), _B + r"do[opr]_v1_[a-f0-9]{64}" + _E),
    _p("shopify_token", ("shp",), _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
    _p("groq_key", ("gsk_",), _B + r"gsk_[A-Za-z0-9]{40,64}" + _E),
    _p("xai_key", ("xai-",), _B + r"xai-[A-Za-z0-9]{40,128}" + _E),
    _p("perplexity_key", ("pplx-",), _B + r"pplx-[A-Za-z0-9]{40,64}" + _E),
    _p("replicate_token", ("r8_",), _B + r"r8_[A-Za-z0-9]{30,64}" + _E),
    _p("linear_key", ("lin_api_",), _B + r"lin_api_[A-Za-z0-9]{40}" + _E),
    _p("notion_token", ("secret_", "ntn_"),
       _B + r"(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,64})" + _E),
    _p("atlassian_token", ("ATATT3",), _B + r"ATATT3[A-Za-z0-9_=\-]{50,300}" + _E),
    _p("telegram_bot_token", (":AA",), r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E),
    # The boundary check follows the first letter so the regex engine can skip ahead to M, N or O.
    _p("discord_bot_token", (".",),
       r"[MNO](?<![A-Za-z0-9_\-].)[A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\."
       r"[A-Za-z0-9_\-]{27,40}" + _E),
    # Signed URLs: an Azure SAS or Power Automate `sig`, an S3 or GCS presigned signature.
    _p("url_signature", ("sig=", "-signature="),
       r"(?P<keep>[?&](?:sig|x-amz-signature|x-goog-signature)=)"
       r"[A-Za-z0-9%+/=_.~\-]{16,1024}", re.IGNORECASE),
    # `token:` / `secret:` in the middle of a line ("here is my token: …"): only a value that looks
    # generated (see `looks_generated`), so "The secret: patience" stays. A label at the start of a
    # line is an assignment (ASSIGNMENTS). The match starts at the colon so the regex engine can
    # skip to colons.
    _p("labelled_secret", ("token:", "secret:"), r"(?P<keep>:(?:(?<=[^A-Za-z0-9_.\-]token:)"
       r"|(?<=[^A-Za-z0-9_.\-]secret:))[ \t]{0,8}[\"']?)(?P<value>[A-Za-z0-9_+/=~\-]{16,512})"
       r"(?![A-Za-z0-9_+/=~\-])", re.IGNORECASE),
    _p("azure_storage_key", ("AccountKey=", "SharedAccess"),
       r"(?P<keep>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=)[^;\s\"']{16,1024}"),
)

# Names whose value is a credential: the name must END with one of these words, so `max_tokens`,
# `token_count` or `author` do not match while `DB_PASSWORD`, `github_token` or `apiKey` do.
SECRET_NAME_RE = re.compile(
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key"
    r"|client[_\-]?secret|(?:secret|signing|encryption|master|session)[_\-]?key|credentials?"
    r"|private[_\-]?key[_\-]?id)$", re.IGNORECASE)
# Shorter endings that are credential names only as the last part of a longer name (`DB_PASS`,
# `OPENAI_KEY`, `dbPass`, `HTTP_AUTH`, `session_cookie`): alone, or as the tail of a word (`bypass`,
# `monkey`), they are not.
_PART_NAME_RE = re.compile(
    r"(?:[_.\-](?i:pass|key|auth|cookie)|[a-z0-9](?:Pass|Key|Auth|Cookie|PASS|KEY))$")
# `<prefix>_key` names that hold no credential: database, cache and sort keys, and public keys.
NOT_SECRET_KEY_PREFIXES = frozenset({
    "sort", "primary", "foreign", "partition", "cache", "lookup", "idempotency", "dedup", "dedupe",
    "group", "shard", "index", "row", "unique", "composite", "hot", "public", "pub", "map", "dict",
    "object", "routing", "hash", "sequence", "range", "order", "join", "cluster", "natural",
    "surrogate", "candidate"})
NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd"})  # the shell's working directories
# HTTP headers whose whole value is a credential, whatever it looks like.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def is_credential_name(name: str) -> bool:
    """Whether a value assigned to `name` (a variable, key, flag or header) is a credential."""
    lower = name.lower()
    if lower in NOT_SECRET_NAMES:
        return False
    if lower in CREDENTIAL_HEADERS or SECRET_NAME_RE.search(name):
        return True
    if not _PART_NAME_RE.search(name):
        return False
    if lower.endswith("key"):
        prefix = re.split(r"[_.\-]", lower[:-3].rstrip("_.-"))[-1]
        return prefix not in NOT_SECRET_KEY_PREFIXES
    return True


_IDENT = r"(?P<name>[A-Za-z0-9_.\-]{1,80})"
_PLACEHOLDER = r"\[(?:REDACTED|secret-ref):[^\]\n]{0,80}\]"
# A value: a placeholder, a quoted string, or (`_TO_EOL`) the rest of the line up to a quote — a
# credential runs to the end of its quoted string or line (`abc;def`, `correct horse battery
# staple`); `_WORD` is one shell word (flags) or JSON scalar.
_TO_EOL = (r"(?P<value>" + _PLACEHOLDER
           + r"|\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"'`][^\n\r\"'`]{0,511})")
_WORD = (r"(?P<value>" + _PLACEHOLDER
         + r"|\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"',;&}\]\)]{1,512})")

# Every credential name ends with one of these words (see is_credential_name). Whether one is
# followed by `=` or `:` (`FLAG_LABEL_RE`: whether a flag names one) is a cheap test of whether an
# assignment can occur.
_ENDINGS = (r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|key(?:[_\-]?id)?|credentials?|auth"
            r"|authorization|cookie)")
LABEL_RE = re.compile(_ENDINGS + r"[\"' \t]{0,3}[:=]")
FLAG_LABEL_RE = re.compile(r"-[a-z0-9_.\-]{0,60}?" + _ENDINGS + r"[= \t]")

# Assignment forms, each matching ANY name; the caller keeps only names `is_credential_name`
# accepts. Matching the name first and checking its ending afterwards is far cheaper than a lazy
# name regex.
ASSIGNMENTS: tuple[Shape, ...] = (
    # env, ini, shell, query strings:  DB_PASSWORD=x  export TOKEN="x"  ?token=x
    _p("assigned_secret", ("=",),
       r"(?P<key>(?<![A-Za-z0-9_.\-])" + _IDENT + r"[ \t]*=[ \t]*)" + _TO_EOL),
    # JSON and Python dicts:  "password": "x"
    _p("assigned_secret", ('":', "':", '" :', "' :"),
       r"(?P<key>[\"']" + _IDENT + r"[\"']\s*:\s*)" + _WORD),
    # YAML and HTTP headers at the start of a line:  password: x   - api_key: x   Authorization: x
    _p("assigned_secret", (":",),
       r"(?P<key>^[ \t]*(?:-[ \t]+)?" + _IDENT + r"[ \t]*:[ \t]+)" + _TO_EOL, re.MULTILINE),
    # HTTP headers and settings anywhere (`curl -H "X-Api-Key: x"`, `… OPENAI_KEY: x`): a compound
    # name (dashed, dotted, snake or camel case), a credential header or `password`, or any name
    # right after a quote; another lone word before a colon is prose ("The secret: patience",
    # "Token: a unit of text").
    _p("assigned_secret", (":",),
       r"(?P<key>(?:(?<=[\"'])(?P<name>[A-Za-z][A-Za-z0-9\-]{0,60})|(?<![A-Za-z0-9_.\-])"
       r"(?P<hname>(?i:authorization|cookie|password|passwd|passphrase)"
       r"|[A-Za-z0-9]{1,30}(?:[-_.][A-Za-z0-9]{1,30}){1,4}"
       r"|[a-z][a-z0-9]{0,30}[A-Z][A-Za-z0-9]{0,30}))[ \t]*:[ \t]*)" + _TO_EOL),
    # command-line flags:  --password x  --api-key=x
    _p("assigned_secret", ("-",),
       r"(?P<key>(?<![A-Za-z0-9-])--?" + _IDENT + r"(?:=|[ \t]+)(?!-))" + _WORD),
)

# Values that are not secrets: booleans, nulls, references to variables, placeholders, redactions.
SAFE_VALUE_RE = re.compile(
    r"^(?:|true|false|null|none|nil|yes|no|on|off|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_]+%"
    r"|<[^<>]{0,64}>|\*+|x{3,}|\.{3}|…|\[(?:REDACTED|secret-ref)[^\]]{0,80}\])$",
    re.IGNORECASE,
)
# Unquoted values that are code or a file, not a secret: `os.environ["X"]`, `get_token(user)`,
# `/etc/x/y.json`.
CODE_OR_PATH_RE = re.compile(
    r"^(?:[A-Za-z_][\w.]{0,80}[(\[].{0,400}[)\]][;,]?|(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+/?)$")
# How a URL's user information without a password can still be a credential: a long random-looking
# token.
_TOKEN_USER_RE = re.compile(r"[A-Za-z0-9_\-]{20,512}")
# What ends a URL's authority when no password holds it: a path, query or fragment, or a space.
_AFTER_AUTHORITY_RE = re.compile(r"[/?#\s]")
_PORT_RE = re.compile(r"\d{1,5}[.,;]?")  # (a port may be followed by punctuation in prose)
# The URL is the value of an assignment (`DATABASE_URL=`, `url: `, `"dsn": "`): its password may
# hold spaces.
_ASSIGNED_URL_RE = re.compile(
    r"[A-Za-z0-9_\]\"'][ \t]{0,3}[:=][ \t]{0,3}[\"']?[A-Za-z][A-Za-z0-9+.\-]{0,30}$")


def url_userinfo(text: str, scheme_end: int, span: str) -> str:
    """The part of `span` (the text from after `://` at `scheme_end` up to the line's last `@`)
    that is a URL's user information: within one word, to its last `@`, unless the URL is an
    assignment's value (then `span` whole); "" when none is a credential
    (`url_userinfo_is_secret`)."""
    if not _ASSIGNED_URL_RE.search(text, max(0, scheme_end - 48), scheme_end):
        word = span.split(None, 1)[0] if span[:1].strip() else ""
        span = word if len(word) == len(span) else word[:max(0, word.rfind("@"))]
    return span if span and url_userinfo_is_secret(span) else ""


def url_userinfo_is_secret(userinfo: str) -> bool:
    """`user:password` always; a user alone only when it looks like a token (`git`, `ada` stay).
    When a `/`, `?`, `#` or space comes before the last `@`, only if what stands before it is
    `user:password`: not `host:port` nor a host whose path, query or fragment holds the `@`
    (`a.com:8080/x?to=bob@x.org`)."""
    cut = _AFTER_AUTHORITY_RE.search(userinfo)
    if cut is None:
        return _plain_userinfo_is_secret(userinfo)
    head = userinfo[:cut.start()]
    if "@" in head:  # `user:pw@host/path?to=bob@x.org`: the user information ends at the host
        return _plain_userinfo_is_secret(head[:head.rindex("@")])
    if head.startswith("[") or ":" not in head:
        return False
    host, _, port = head.rpartition(":")
    return not (host and _PORT_RE.fullmatch(port) and userinfo[cut.start()] in "/? \t")


def _plain_userinfo_is_secret(userinfo: str) -> bool:
    if ":" in userinfo:
        return True
    if not _TOKEN_USER_RE.fullmatch(userinfo):
        return False
    digits = sum(c.isdigit() for c in userinfo)
    return digits >= 2 and len(userinfo) - digits - userinfo.count("_") - userinfo.count("-") >= 2


def looks_generated(value: str) -> bool:
    """Whether a word looks like a generated credential, not a word or a name: 16+ characters,
    letters and digits, switching between lower case, upper case and digits once every 4 characters
    or more often (`Zq8vLm3pRt55Wx9A`, hex; not `ISO-8601-formatted`, `gpt-4o-2024-08-06`,
    `CamelCaseName`)."""
    value = value[:64]  # enough to judge, and a bounded cost for a long value
    if (len(value) < 16 or not any(c.isdigit() for c in value)
            or not any(c.isalpha() for c in value)):
        return False
    pairs = zip(value, value[1:], strict=False)
    switches = sum(1 for a, b in pairs if a.isalnum() and b.isalnum() and _kind(a) != _kind(b))
    return switches * 4 >= len(value)


def _kind(char: str) -> int:
    return 0 if char.isdigit() else 1 if char.islower() else 2


# The body of a private key pasted without its BEGIN line (a split paste) ends at an END line:
# walking back from that line over whitespace-separated base64 runs finds where it starts. Reversed
# text lets one regex match from the END line backwards; every run but the key's last line is 16+
# characters, so prose words before the body are not taken for it.
KEY_END_RE = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_BODY_BACKWARDS_RE = re.compile(
    r"\s{0,16}(?:[A-Za-z0-9+/=]{1,128}+\s{1,16})?(?:[A-Za-z0-9+/=]{16,4096}+\s{0,16}){1,2000}")
BODY_SCAN_CHARS = 160_000


def key_body_start(text: str, end_line: int) -> int:
    """Where a base64 key body closed by the END line at `end_line` starts, or `end_line` if
    none."""
    floor = max(0, end_line - BODY_SCAN_CHARS)
    backwards = text[floor:end_line][::-1]
    found = _BODY_BACKWARDS_RE.match(backwards)
    if not found:
        return end_line
    return end_line - len(found.group(0).rstrip())


SHORT_PATTERNS: tuple[Shape, ...] = tuple(shape for shape in PATTERNS if shape.short)
