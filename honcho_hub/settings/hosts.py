"""Host names compared as DNS reads them, so the differently written names of one host are one.

`X.Honcho.Dev.`, `mcp。honcho。dev` and `mcp.honcho.dev` are one host: rules about where a key may
go compare these normal forms, never the text a user typed.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..errors import InvalidValue

HOSTED_DOMAIN = "honcho.dev"  # Plastic Labs' hosted services
_DOTS_RE = re.compile("[.\u3002\uff0e\uff61]")  # the label separators IDNA accepts (RFC 3490, 3.1)


def normal_host(host: str) -> str:
    """The host in lower case ASCII (IDNA), without the trailing dot(s) that name the same host;
    InvalidValue when it is no DNS name (an empty or too long label, text IDNA refuses)."""
    labels = _DOTS_RE.split(host.lower())
    while len(labels) > 1 and not labels[-1]:
        labels.pop()
    try:
        normal = ".".join(labels).encode("idna").decode("ascii").lower()
    except UnicodeError:
        normal = ""
    if not normal:
        raise InvalidValue("malformed host name")
    return normal


def url_host(url: str) -> str | None:
    """The URL's host as `normal_host` gives it; None when it has none or it is malformed."""
    try:
        return normal_host(urlsplit(url).hostname or "")
    except (ValueError, InvalidValue):
        return None


def in_hosted_domain(host: str) -> bool:
    """Whether a host (as `normal_host` gives it) is the hosted domain or under it."""
    return host == HOSTED_DOMAIN or host.endswith("." + HOSTED_DOMAIN)


def is_hosted_url(url: str) -> bool:
    """Whether the URL's host is the hosted domain or under it (a malformed URL is not)."""
    host = url_host(url)
    return host is not None and in_hosted_domain(host)
