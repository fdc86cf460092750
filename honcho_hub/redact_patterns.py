"""The credential shapes `redact` replaces, most specific first.

Shapes come from the providers' published token formats. Each pattern is bounded (no unbounded
backtracking) and anchored on a boundary so that words which merely contain a prefix survive.
A named group `keep` is text kept in front of the placeholder (a header name, a URL scheme).
"""

from __future__ import annotations

import re

_B = r"(?<![A-Za-z0-9_\-])"  # start boundary that also treats '-' and '_' as part of a token
_E = r"(?![A-Za-z0-9_\-])"


def _p(kind: str, pattern: str, flags: int = 0) -> tuple[str, re.Pattern]:
    return kind, re.compile(pattern, flags)


PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    _p("private_key", r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----"
                      r"(?:[\s\S]{0,20000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----|[\s\S]*)"),
    _p("jwt", _B + r"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}" + _E),
    _p("url_credentials", r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://)[^\s:/@]{1,256}:[^\s@/]{1,256}(?=@)"),
    _p("authorization", r"(?P<keep>\bAuthorization\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest|Bot)\s+)"
                        r"[^\s\"',;]{1,4096}", re.IGNORECASE),
    _p("bearer_token", r"(?P<keep>\bBearer\s+)[A-Za-z0-9._~+/=\-]{16,4096}"),
    _p("anthropic_key", _B + r"sk-ant-[a-z]{2,8}\d{2}-[A-Za-z0-9_\-]{20,512}" + _E),
    _p("openai_key", _B + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,512}" + _E),
    _p("github_token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
    _p("slack_token", _B + r"(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,255}" + _E),
    _p("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/\-]{20,255}"),
    _p("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b"),
    _p("aws_secret_key", r"(?P<keep>\baws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"
                         r"(?![A-Za-z0-9/+=])", re.IGNORECASE),
    _p("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
    _p("google_oauth_token", _B + r"ya29\.[0-9A-Za-z_\-]{20,2048}" + _E),
    _p("google_client_secret", _B + r"GOCSPX-[A-Za-z0-9_\-]{20,64}" + _E),
    _p("stripe_key", _B + r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,255}" + _E),
    _p("stripe_webhook_secret", _B + r"whsec_[A-Za-z0-9]{24,255}" + _E),
    _p("huggingface_token", _B + r"hf_[A-Za-z0-9]{30,64}" + _E),
    _p("npm_token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
    _p("gitlab_token", _B + r"(?:glpat|gldt|glrt|glcbt|glptt|glft|glsoat)-[A-Za-z0-9_\-]{20,64}" + _E),
    _p("pypi_token", _B + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,512}" + _E),
    _p("sendgrid_key", _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
    _p("twilio_key", r"\bSK[0-9a-f]{32}\b"),
    _p("mailgun_key", _B + r"key-[0-9a-z]{32}" + _E),
    _p("digitalocean_token", _B + r"do[opr]_v1_[a-f0-9]{64}" + _E),
    _p("shopify_token", _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
    _p("groq_key", _B + r"gsk_[A-Za-z0-9]{40,64}" + _E),
    _p("xai_key", _B + r"xai-[A-Za-z0-9]{40,128}" + _E),
    _p("perplexity_key", _B + r"pplx-[A-Za-z0-9]{40,64}" + _E),
    _p("replicate_token", _B + r"r8_[A-Za-z0-9]{30,64}" + _E),
    _p("linear_key", _B + r"lin_api_[A-Za-z0-9]{40}" + _E),
    _p("notion_token", _B + r"(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,64})" + _E),
    _p("atlassian_token", _B + r"ATATT3[A-Za-z0-9_=\-]{50,300}" + _E),
    _p("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E),
    _p("discord_bot_token", _B + r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}" + _E),
    _p("azure_storage_key", r"(?P<keep>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)=)[^;\s\"']{16,1024}"),
)

# Names whose value is a credential: the name must END with one of these words, so `max_tokens`,
# `token_count` or `author` do not match while `DB_PASSWORD`, `github_token` or `apiKey` do.
_NAME = (r"(?<![A-Za-z0-9])[A-Za-z0-9_.\-]{0,64}?"
         r"(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key"
         r"|client[_\-]?secret|(?:secret|signing|encryption|master|session)[_\-]?key|credentials?)(?![A-Za-z0-9])")
_VALUE = r"(?P<value>\[(?:REDACTED|secret-ref):[^\]\n]{0,80}\]|\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"',;&}\]\)]{1,512})"

ASSIGNMENT_RES: tuple[re.Pattern, ...] = (
    # env, ini, shell, query strings:  DB_PASSWORD=x  export TOKEN="x"  ?token=x
    re.compile(r"(?P<key>" + _NAME + r"\s*=\s*)" + _VALUE, re.IGNORECASE),
    # JSON and Python dicts:  "password": "x"
    re.compile(r"(?P<key>[\"']" + _NAME + r"[\"']\s*:\s*)" + _VALUE, re.IGNORECASE),
    # YAML at the start of a line:  password: x   - api_key: x
    re.compile(r"(?P<key>^[ \t]*(?:-[ \t]+)?" + _NAME + r"[ \t]*:[ \t]+)" + _VALUE,
               re.IGNORECASE | re.MULTILINE),
    # command-line flags:  --password x  --api-key=x
    re.compile(r"(?P<key>(?<![A-Za-z0-9-])--?" + _NAME + r"(?:=|[ \t]+)(?!-))" + _VALUE, re.IGNORECASE),
)

# Values that are not secrets: booleans, nulls, references to variables, placeholders, redactions.
SAFE_VALUE_RE = re.compile(
    r"^(?:|true|false|null|none|nil|yes|no|on|off|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_]+%"
    r"|<[^<>]{0,64}>|\*+|x{3,}|\.{3}|…|\[(?:REDACTED|secret-ref)[^\]]{0,80}\])$",
    re.IGNORECASE,
)
