"""Redaction of credentials before anything is queued, sent or shown; fail-closed.

`redact()` replaces known secret values, Agent Zero secret aliases, credential shapes and credential
assignments with placeholders that name the kind; any failure raises RedactionError.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache

from ..errors import RedactionError
from .patterns import (
    ASSIGNMENTS,
    CODE_OR_PATH_RE,
    FLAG_LABEL_RE,
    KEY_END_RE,
    LABEL_RE,
    PATTERNS,
    SAFE_VALUE_RE,
    SHORT_PATTERNS,
    has_long_word,
    is_aws_secret_beside_id,
    is_credential_name,
    key_body_start,
    looks_generated,
    url_userinfo,
)
from .view import redact_view

ALIAS_RE = re.compile(r"§§\s*secret\s*\(\s*([^)\s]{0,128})\s*\)", re.IGNORECASE)
MIN_SECRET_CHARS = 4  # as Agent Zero's own masker: shorter values would shred ordinary text


def placeholder(kind: str) -> str:
    """The deterministic stand-in for one redacted credential."""
    return f"[REDACTED:{kind}]"


def redact(text: str, secrets: Mapping[str, str] | None = None) -> str:
    """Return `text` with credentials replaced; raise RedactionError on any failure."""
    if not isinstance(text, str):
        raise RedactionError("content is not text")
    try:
        text = redact_view(text, lambda view: _redact_plain(view, secrets))
        return _redact_plain(text, secrets)
    except RedactionError:
        raise
    except Exception as exc:  # fail closed: a bug here must never let text through unredacted
        raise RedactionError(type(exc).__name__) from exc


def _redact_plain(text: str, secrets: Mapping[str, str] | None) -> str:
    text = _replace_known_values(text, secrets)
    if "§§" in text:
        text = ALIAS_RE.sub(_neutral_alias, text)
    lowered = text.lower()
    for shape in PATTERNS if has_long_word(text) else SHORT_PATTERNS:
        if shape.may_occur(text, lowered):
            text = shape.pattern.sub(_REPLACERS[shape.kind], text)
    if "-----END" in text:
        text = _redact_key_bodies(text)
    if any(w in lowered for w in _NAME_WORDS):
        labelled, flagged = (LABEL_RE.search(lowered) is not None,
                             "-" in text and FLAG_LABEL_RE.search(lowered))
        for shape in ASSIGNMENTS:
            if ((flagged if shape is ASSIGNMENTS[-1] else labelled)
                    and shape.may_occur(text, lowered)):
                text = shape.pattern.sub(_redact_assignment, text)
    return text


def _replace_known_values(text: str, secrets: Mapping[str, str] | None) -> str:
    if not secrets:
        return text
    values = tuple(sorted({v for v in secrets.values()
                           if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS},
                          key=lambda v: (-len(v), v)))  # longest first: one may contain another
    return _known_values_re(values).sub(placeholder("host_secret"), text) if values else text


@lru_cache(maxsize=8)
def _known_values_re(values: tuple[str, ...]) -> re.Pattern:
    # Any case: a secret typed in capitals (`HUNTER2-PASSWORD`) is the same secret.
    return re.compile("|".join(map(re.escape, values)), re.IGNORECASE)


def _neutral_alias(match: re.Match) -> str:
    # Keeps the name (useful, not secret) in a form Agent Zero's unmasking regex does not match.
    name = re.sub(r"[^A-Za-z0-9_]", "", match.group(1))[:64]
    return f"[secret-ref:{name}]"


def _replacer(kind: str) -> Callable[[re.Match], str]:
    def replace(match: re.Match) -> str:
        keep = match.groupdict().get("keep") or ""
        return keep + placeholder(kind)
    return replace


def _url_replacer(match: re.Match) -> str:
    span = match.group("userinfo")
    userinfo = url_userinfo(match.string, match.start(), span)
    if not userinfo:
        return match.group(0)
    return match.group("keep") + placeholder("url_credentials") + span[len(userinfo):]


def _labelled_replacer(match: re.Match) -> str:
    if not looks_generated(match.group("value")):
        return match.group(0)
    return match.group("keep") + placeholder("labelled_secret")


def _aws_pair_replacer(match: re.Match) -> str:
    if not is_aws_secret_beside_id(match.string, match.start(), match.group(0)):
        return match.group(0)
    return placeholder("aws_secret_key")


_REPLACERS = {shape.kind: _replacer(shape.kind) for shape in PATTERNS} | {
    "url_credentials": _url_replacer, "labelled_secret": _labelled_replacer,
    "aws_secret_beside_id": _aws_pair_replacer}


def _redact_key_bodies(text: str) -> str:
    """Base64 runs that an END line of a private key closes (the second half of a split paste)."""
    for end in reversed(list(KEY_END_RE.finditer(text))):
        start = key_body_start(text, end.start())
        if start < end.start():
            text = text[:start] + placeholder("private_key") + text[end.end():]
    return text


# Every credential name contains one of these (see is_credential_name): the cheapest pre-check.
_NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "credential", "auth", "cookie")
_SCHEME_RE = re.compile(r"(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Key|Negotiate)[ \t]+",
                        re.IGNORECASE)


def _redact_assignment(match: re.Match) -> str:
    groups = match.groupdict()
    if not is_credential_name(groups.get("name") or groups.get("hname") or ""):
        return match.group(0)
    key, value = match.group("key"), match.group("value")
    if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0]:
        if SAFE_VALUE_RE.match(value[1:-1].strip()):
            return match.group(0)
        return key + value[0] + placeholder("assigned_secret") + value[0]
    before = match.string[match.start() - 1:match.start()]
    cut = len(value)
    if before in ("?", "&"):  # a query string: the value ends at the next parameter
        cut = min([i for i in (value.find("&"), value.find("#"), value.find(" ")) if i >= 0],
                  default=cut)
    elif before == ";":  # a connection string (`Server=x;Password=y;Database=z`)
        cut = value.find(";") if ";" in value else cut
    body = value[:cut].rstrip()
    tail = value[len(body):]
    scheme_match = _SCHEME_RE.match(body)
    scheme = scheme_match.group(0) if scheme_match else ""
    rest = body[len(scheme):]
    if (not rest or SAFE_VALUE_RE.match(rest.split()[0])
            or CODE_OR_PATH_RE.match(_rest_of_line(match))):
        return match.group(0)
    return key + scheme + placeholder("assigned_secret") + tail


def _rest_of_line(match: re.Match) -> str:
    # Code (`os.environ["X"]`) holds quotes the value stopped at: judge it by the whole rest of its
    # line.
    line_end = match.string.find("\n", match.start("value"))
    return match.string[
        match.start("value"):line_end if line_end >= 0 else len(match.string)].rstrip()


# One regex pass over 1 MB holds the interpreter ≈ 50 ms, even from a thread. A thread that waits
# for the interpreter (Agent Zero's event loop) gets it only after 5 ms, unless the holder lets go
# sooner: between slices this one does.
SLICE_CHARS = 16_000
_BLOCK_START, _BLOCK_END = "-----BEGIN", "-----END"


def redact_long(text: str, secrets: Mapping[str, str] | None = None,
                clean: Callable[[str], str] | None = None) -> str:
    """`redact` (after `clean`) of text of any length, slice by slice, letting other threads run
    between slices, so no other thread (the event loop's) waits long for the interpreter meanwhile.

    Slices end at a line break (else a space), never inside a `-----BEGIN … -----END` block nor
    inside a key body that a later END line closes, so every pattern, all of them line-bound but
    the key blocks, sees whole lines."""
    if len(text) <= SLICE_CHARS:
        return redact(clean(text) if clean else text, secrets)
    parts = []
    for start, end in _slices(text, SLICE_CHARS):
        parts.append(redact(clean(text[start:end]) if clean else text[start:end], secrets))
        time.sleep(0)  # hand the interpreter to a waiting thread now, not after its 5 ms wait
    return "".join(parts)


def _keep_key_body_whole(text: str, start: int, end: int, limit: int) -> int:
    """Move a cut that falls inside a key body closed by a later END line (a body pasted without its
    BEGIN line) to before the body's first line, or after the END line when the body starts before
    `start`."""
    closed = text.find(_BLOCK_END, end, end + limit)
    body = key_body_start(text, closed) if closed >= 0 else end
    if body >= end:
        return end
    line = text.rfind("\n", start, body) + 1
    return line if line > start else (text.find("\n", closed) + 1 or len(text))


def _slices(text: str, limit: int) -> Iterator[tuple[int, int]]:
    start, size = 0, len(text)
    while start < size:
        end = min(size, start + limit)
        if end < size:
            floor = start + limit // 2
            line = text.rfind("\n", floor, end)
            end = line + 1 if line >= 0 else (text.rfind(" ", floor, end) + 1 or end)
            if text[end - 1] == "\r":
                end -= 1  # keep a CRLF together: cleaning turns it into one line break
            opened = text.rfind(_BLOCK_START, start, end)
            if opened >= 0 and text.find(_BLOCK_END, opened, end) < 0:
                if opened > start:
                    end = opened  # the whole block goes to the next slice
                else:  # a block longer than a slice: keep it whole (bounded by its end line)
                    closed = text.find(_BLOCK_END, end, end + 8 * limit)
                    if closed >= 0:
                        end = text.find("\n", closed) + 1 or size
            end = _keep_key_body_whole(text, start, end, limit)
        yield start, end
        start = end
