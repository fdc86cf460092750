"""Redaction of credentials before anything is queued, sent or shown. Fail-closed.

`redact()` replaces, in this order: the values of secrets the host knows, Agent Zero secret aliases
(`§§secret(NAME)`, which the host would turn back into real values inside tool arguments), then
well-known credential shapes. Placeholders name the kind (`[REDACTED:github_token]`) and are the same
for the same input, so redacted text stays stable across retries. Any failure raises RedactionError;
callers then queue nothing.
"""

from __future__ import annotations

import re
import time
from typing import Callable, Mapping

from .redact_patterns import (ASSIGNMENTS, NOT_SECRET_NAMES, PATTERNS, SAFE_VALUE_RE, SECRET_NAME_RE,
                              SHORT_PATTERNS, has_long_word)

ALIAS_RE = re.compile(r"§§\s*secret\s*\(\s*([^)\s]{0,128})\s*\)", re.IGNORECASE)
MIN_SECRET_CHARS = 4  # as Agent Zero's own masker: shorter values would shred ordinary text


class RedactionError(Exception):
    """Redaction could not be completed; the text must not be queued."""


def placeholder(kind: str) -> str:
    """The deterministic stand-in for one redacted credential."""
    return f"[REDACTED:{kind}]"


def redact(text: str, secrets: Mapping[str, str] | None = None) -> str:
    """Return `text` with credentials replaced; raise RedactionError on any failure."""
    if not isinstance(text, str):
        raise RedactionError("content is not text")
    try:
        text = _replace_known_values(text, secrets)
        if "§§" in text:
            text = ALIAS_RE.sub(_neutral_alias, text)
        lowered = text.lower()
        for shape in PATTERNS if has_long_word(text) else SHORT_PATTERNS:
            if shape.may_occur(text, lowered):
                text = shape.pattern.sub(_REPLACERS[shape.kind], text)
        for shape in ASSIGNMENTS:
            if shape.may_occur(text, lowered) and any(w in lowered for w in _NAME_WORDS):
                text = shape.pattern.sub(_redact_assignment, text)
        return text
    except RedactionError:
        raise
    except Exception as exc:  # fail closed: a bug here must never let text through unredacted
        raise RedactionError(type(exc).__name__) from exc


def _replace_known_values(text: str, secrets: Mapping[str, str] | None) -> str:
    if not secrets:
        return text
    values = {v for v in secrets.values() if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
    for value in sorted(values, key=len, reverse=True):  # longest first: one may contain another
        text = text.replace(value, placeholder("host_secret"))
    return text


def _neutral_alias(match: re.Match) -> str:
    # Keeps the name (useful, not secret) in a form Agent Zero's unmasking regex does not match.
    name = re.sub(r"[^A-Za-z0-9_]", "", match.group(1))[:64]
    return f"[secret-ref:{name}]"


def _replacer(kind: str):
    def replace(match: re.Match) -> str:
        keep = match.groupdict().get("keep") or ""
        return keep + placeholder(kind)
    return replace


_REPLACERS = {shape.kind: _replacer(shape.kind) for shape in PATTERNS}


_NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "credential")  # every SECRET_NAME_RE ending has one


def _redact_assignment(match: re.Match) -> str:
    name, value = match.group("name"), match.group("value")
    if not SECRET_NAME_RE.search(name) or name.lower() in NOT_SECRET_NAMES:
        return match.group(0)
    if SAFE_VALUE_RE.match(value.strip("\"'")):
        return match.group(0)
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return match.group("key") + quote + placeholder("assigned_secret") + quote


# One regex pass over 1 MB holds the interpreter ≈ 50 ms, even from a thread. A thread that waits for
# the interpreter (Agent Zero's event loop) gets it only after 5 ms, unless the holder lets go sooner:
# between slices this one does.
SLICE_CHARS = 16_000
_BLOCK_START, _BLOCK_END = "-----BEGIN", "-----END"


def redact_long(text: str, secrets: Mapping[str, str] | None = None,
                clean: Callable[[str], str] | None = None) -> str:
    """`redact` (after `clean`) of text of any length, slice by slice, letting other threads run between
    slices, so no other thread (the event loop's) waits long for the interpreter meanwhile.

    Slices end at a line break (else a space), never inside a `-----BEGIN … -----END` block, so every
    pattern, all of them line-bound but the key blocks, sees whole lines."""
    if len(text) <= SLICE_CHARS:
        return redact(clean(text) if clean else text, secrets)
    parts = []
    for start, end in _slices(text, SLICE_CHARS):
        parts.append(redact(clean(text[start:end]) if clean else text[start:end], secrets))
        time.sleep(0)  # hand the interpreter to a waiting thread now rather than after its 5 ms wait
    return "".join(parts)


def _slices(text: str, limit: int):
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
        yield start, end
        start = end
