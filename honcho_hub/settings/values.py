"""Validation of one raw setting value against its `Field`.

Values arrive as JSON types from Agent Zero's settings or as strings from the environment; the
reason an `InvalidValue` gives never repeats the value (it may be a credential pasted in error).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidValue
from ..names import ID_RE
from .hosts import normal_host
from .spec import FIELDS_BY_NAME, MAX_PASS_LEVELS, REASONING_LEVELS, SENDER_CHANNELS, Field

PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]{0,64}$")
# A chat's sender as `sender_peers` names it: its channel, then its id there.
SENDER_KEY_RE = re.compile(rf"^(?:{'|'.join(SENDER_CHANNELS)}):[^\s,=]{{1,512}}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
MAX_URL_CHARS = 2_048
MAX_PATH_CHARS = 4_096
MAX_TEXT_CHARS = 200


def coerce(field: Field, raw: Any) -> Any:
    """Return `raw` as the field's type, or raise InvalidValue."""
    return _COERCERS[field.kind](field, raw)


def _bool(field: Field, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise InvalidValue("expected true or false")


def _number(field: Field, raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise InvalidValue("expected a number")
    if isinstance(raw, str):
        try:
            raw = float(raw.strip())
        except ValueError:
            raise InvalidValue("expected a number") from None
    if isinstance(raw, int) and abs(raw) > 2**53:  # float() of a huge int would overflow
        raise InvalidValue(f"out of range {field.bounds_text()}")
    number = float(raw)
    if math.isnan(number) or math.isinf(number):
        raise InvalidValue("expected a finite number")
    assert field.lo is not None and field.hi is not None, (
        "every int and float field has bounds (spec.FIELDS)")
    if not (field.lo <= number <= field.hi):
        raise InvalidValue(f"out of range {field.bounds_text()}")
    return number


def _int(field: Field, raw: Any) -> int:
    number = _number(field, raw)
    if not number.is_integer():
        raise InvalidValue("expected a whole number")
    return int(number)


def _enum(field: Field, raw: Any) -> str:
    if isinstance(raw, str):
        for choice in field.choices:
            if raw.strip().lower() == choice.lower():
                return choice
    raise InvalidValue(f"expected one of {field.bounds_text()}")


def _url(field: Field, raw: Any) -> str:
    if not isinstance(raw, str):
        raise InvalidValue("expected a URL")
    text = raw.strip()
    if not text:
        return ""
    if len(text) > MAX_URL_CHARS or _CONTROL_RE.search(text):
        raise InvalidValue("malformed URL")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise InvalidValue("malformed URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValue("expected an http(s) URL with a host")
    normal_host(parts.hostname)  # raises on a host that is no DNS name
    if parts.username or parts.password:
        raise InvalidValue("URL must not carry credentials; use HONCHO_API_KEY")
    if parts.query or parts.fragment:
        raise InvalidValue("URL must not carry a query or fragment")
    return text.rstrip("/")


def _id(field: Field, raw: Any) -> str:
    if isinstance(raw, str) and ID_RE.match(raw.strip()):
        return raw.strip()
    raise InvalidValue(f"expected {field.bounds_text()}")


def _optional_id(field: Field, raw: Any) -> str:
    if isinstance(raw, str) and (not raw.strip() or ID_RE.match(raw.strip())):
        return raw.strip()
    raise InvalidValue(f"expected {field.bounds_text()}")


def _peer_map(field: Field, raw: Any) -> str:
    """`profile=peer` pairs, kept as 'a=x,b=y' (no spaces); a profile named twice is refused."""
    return _pairs(field, raw, ID_RE)


def with_sender_peer(sender_peers: Any, key: str, peer: str) -> str:
    """`sender_peers` with `key=peer` added, checked as the setting is; InvalidValue when the sender
    is named already, or the key, the peer or the value held so far cannot be written there."""
    held = sender_peers if isinstance(sender_peers, str) else None
    if held is None:
        raise InvalidValue("sender_peers holds no text")
    return _sender_map(FIELDS_BY_NAME["sender_peers"],
                       ",".join(part for part in (held.strip(), f"{key}={peer}") if part))


def _sender_map(field: Field, raw: Any) -> str:
    """`channel:id=peer` pairs, kept as `sender_peers` reads them; a sender named twice is
    refused. An e-mail address is kept in lower case, as a chat's sender address is read (its case
    names no other mailbox); other channels' ids keep theirs."""
    if not isinstance(raw, str):
        raise InvalidValue(f"expected {field.bounds_text()}")
    return _pairs(field, ",".join(_email_folded(pair) for pair in raw.split(",")), SENDER_KEY_RE)


def _email_folded(pair: str) -> str:
    """One `channel:id=peer` pair with an `email:` id in lower case."""
    key, equals, peer = pair.partition("=")
    channel, colon, sender = key.strip().partition(":")
    return f"{channel}:{sender.lower()}{equals}{peer}" if channel == "email" and colon else pair


def _pairs(field: Field, raw: Any, key_re: re.Pattern[str]) -> str:
    """`key=peer` pairs with keys matching `key_re`, kept as 'a=x,b=y' (no spaces)."""
    if not isinstance(raw, str):
        raise InvalidValue(f"expected {field.bounds_text()}")
    pairs = [part.strip() for part in raw.split(",")] if raw.strip() else []
    seen: set[str] = set()
    for pair in pairs:
        key, equals, peer = (side.strip() for side in pair.partition("="))
        if not equals or not key_re.match(key) or not ID_RE.match(peer) or key in seen:
            raise InvalidValue(f"expected {field.bounds_text()}")
        seen.add(key)
    return ",".join("=".join(side.strip() for side in pair.partition("=")[::2]) for pair in pairs)


def _prefix(field: Field, raw: Any) -> str:
    if isinstance(raw, str) and PREFIX_RE.match(raw.strip()):
        return raw.strip()
    raise InvalidValue(f"expected {field.bounds_text()}")


def _path(field: Field, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidValue("expected an absolute path")
    text = os.path.expanduser(raw.strip())
    if len(text) > MAX_PATH_CHARS or _CONTROL_RE.search(text):
        raise InvalidValue("malformed path")
    if not os.path.isabs(text):
        raise InvalidValue("expected an absolute path, got a relative one")
    return os.path.normpath(text)


def _text(field: Field, raw: Any) -> str:
    if not isinstance(raw, str):
        raise InvalidValue("expected text")
    text = raw.strip()
    if len(text) > MAX_TEXT_CHARS or _CONTROL_RE.search(text):
        raise InvalidValue(f"expected {field.bounds_text()}")
    return text


def _levels(field: Field, raw: Any) -> str:
    """Reasoning levels as a list or comma-separated text, kept as 'low,high' (no spaces)."""
    if isinstance(raw, str):
        parts = [part.strip().lower() for part in raw.split(",")] if raw.strip() else []
    elif isinstance(raw, (list, tuple)) and all(isinstance(part, str) for part in raw):
        parts = [part.strip().lower() for part in raw]
    else:
        raise InvalidValue("expected reasoning levels, comma-separated")
    if len(parts) > MAX_PASS_LEVELS or any(part not in REASONING_LEVELS for part in parts):
        raise InvalidValue(f"expected {field.bounds_text()}")
    return ",".join(parts)


_COERCERS = {
    "bool": _bool,
    "int": _int,
    "float": _number,
    "enum": _enum,
    "url": _url,
    "id": _id,
    "optional_id": _optional_id,
    "peer_map": _peer_map,
    "sender_map": _sender_map,
    "prefix": _prefix,
    "path": _path,
    "text": _text,
    "levels": _levels,
}
