"""The normalised view redaction also matches on, so a disguised key is still that key.

A key with invisible characters in it, in fullwidth forms or wrapped onto a second line is
normalised in a window around them; only the span redaction changed is replaced in the original.
"""

from __future__ import annotations

import os
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache

# Code points whose compatibility form carries a character a credential or its label is made of,
# plus every format character (Cf: invisible, and dropped from the view).
_MEANINGFUL = re.compile(r"[A-Za-z0-9_\-]")
_ASTRAL_COMPAT = ((0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF), (0xE0000, 0xE007F), (0x1BCA0, 0x1BCA3),
                  (0x13430, 0x1343F), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x1D173, 0x1D17A))
# A line break inside a wrapped token: 16+ token characters end the line and the next line is one
# run of token characters with a digit or a lower-upper hump in it (a key's tail, not a word).
# (The pattern starts with its literal line break so the regex engine can skip to line breaks.)
# Invisible characters count as token characters here: the view drops them anyway.
_T = "[A-Za-z0-9_\\-+/=\u00ad\u200b-\u200d\u2060\ufeff]"
_WRAP = re.compile(rf"\n(?<={_T}{{16}}\n)"
                   rf"(?={_T}{{0,63}}?(?:[0-9]|[a-z][A-Z]){_T}{{0,64}}[ \t]*(?:\r?\n|$))")
# A no-break space inside a key (copied from a page that glued the key's parts with one): dropped
# from the view, so the key is whole there. A key is 16+ characters, so one side of the space holds
# 8 of them; `1 000 000` or `ab cd` with no-break spaces are left as they are.
_NB = "[\u00a0\u2007\u202f]"
_NBSP = re.compile(f"(?<=[A-Za-z0-9_\\-]{{8}}){_NB}(?=[A-Za-z0-9_\\-])"
                   f"|(?<=[A-Za-z0-9_\\-]){_NB}(?=[A-Za-z0-9_\\-]{{8}})")
LONE_RUN = 8  # a run of changed characters this long is normalised wherever it stands
WINDOW = 96  # characters kept on each side of a changed character, before widening to whitespace
WIDEN = 512  # how far a window is widened to reach whitespace (a token is at most this long)


@lru_cache(maxsize=1)
def _special() -> re.Pattern:
    """A character class of the code points the view changes (built once, on first non-ASCII
    text)."""
    ranges = [(0x80, 0xFFFF)] + list(_ASTRAL_COMPAT)
    codes = []
    for low, high in ranges:
        for code in range(low, high + 1):
            char = chr(code)
            if unicodedata.category(char) == "Cf" or (
                    not unicodedata.is_normalized("NFKC", char)
                    and _MEANINGFUL.search(unicodedata.normalize("NFKC", char))):
                codes.append(code)
    spans, start = [], None
    for i, code in enumerate(codes):
        if start is None:
            start = code
        if i + 1 == len(codes) or codes[i + 1] != code + 1:
            spans.append(f"{re.escape(chr(start))}-{re.escape(chr(code))}" if code > start
                         else re.escape(chr(code)))
            start = None
    return re.compile("[" + "".join(spans) + "]")


# Only runs of such characters that can change what matches are normalised: runs touching an ASCII
# token character (`ｓｋ-…`, a soft hyphen inside a key) and runs long enough to be a token
# themselves (a whole fullwidth key). An emoji's zero-width joiner or fullwidth digits between
# ideographs cannot. The scans below are simple character classes: a class of thousands of code
# points in a lookaround made one pass over a megabyte of mixed scripts take 400 ms.
_EDGE = re.compile(r"[\x80-\U0010ffff][A-Za-z0-9_\-]|[A-Za-z0-9_\-][\x80-\U0010ffff]")
# four fullwidth ASCII forms in a row: maybe a fullwidth key
_WIDE = re.compile("[\uff01-\uff5e]" * 4)


def _runs(text: str) -> list[tuple[int, int]]:
    """Spans of the runs of special characters worth normalising, in order, overlapping ones
    merged."""
    special, found = _special(), []
    for hit in _EDGE.finditer(text):
        at = hit.start()
        if text[at].isascii():  # the run starts after the ASCII character
            end = at + 1
            while end < len(text) and end - at <= WIDEN and special.match(text, end):
                end += 1
            found.append((at + 1, end))
        else:  # the run ends at this character
            start = at + 1
            while start > 0 and at - start < WIDEN and special.match(text, start - 1):
                start -= 1
            found.append((start, at + 1))
    covered = 0
    for hit in _WIDE.finditer(text):
        if hit.start() < covered:
            continue  # inside the run just found: growing it again would make a long run quadratic
        first = next((i for i in range(hit.start(), hit.end()) if special.match(text, i)), None)
        if first is not None:
            start, end = first, first + 1
            while start > 0 and first - start < WIDEN and special.match(text, start - 1):
                start -= 1
            while end < len(text) and end - first <= WIDEN and special.match(text, end):
                end += 1
            covered = end
            if end - start >= LONE_RUN:
                found.append((start, end))
    merged: list[list[int]] = []
    for start, end in sorted(span for span in found if span[1] > span[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _view_of(char: str) -> str:
    if unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char)


def _changes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, view text) for each run of the original that the view changes, in order."""
    found = []
    if "\n" in text:
        found += [(m.start(), m.end(), "") for m in _WRAP.finditer(text)]
    if not text.isascii():
        found += [(start, end, "".join(map(_view_of, text[start:end])))
                  for start, end in _runs(text)]
        if "\u00a0" in text or "\u202f" in text or "\u2007" in text:
            found += [(m.start(), m.end(), "") for m in _NBSP.finditer(text)]
        found.sort()
    return found


def _windows(text: str, changes: list[tuple[int, int, str]]) -> list[tuple[int, int, list]]:
    """Windows (start, end, the changes inside) around the changes, overlapping ones merged."""
    merged: list[list] = []
    for change in changes:
        low, high = _widen_left(text, change[0] - WINDOW), _widen_right(text, change[1] + WINDOW)
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
            merged[-1][2].append(change)
        else:
            merged.append([low, high, [change]])
    return [(low, high, inside) for low, high, inside in merged]


def _widen_left(text: str, at: int) -> int:
    if at <= 0:
        return 0
    space = max(text.rfind(" ", max(0, at - WIDEN), at), text.rfind("\n", max(0, at - WIDEN), at))
    return space + 1 if space >= 0 else max(0, at - WIDEN)


def _widen_right(text: str, at: int) -> int:
    if at >= len(text):
        return len(text)
    limit = min(len(text), at + WIDEN)
    ends = [i for i in (text.find(" ", at, limit), text.find("\n", at, limit)) if i >= 0]
    return min(ends) if ends else limit


class _View:
    """The normalised text of one window and the map from its positions back to the window's."""

    def __init__(self, window: str, changes: list[tuple[int, int, str]], offset: int) -> None:
        parts, self._view_at, self._orig_at = [], [0], [0]
        cursor = view_len = 0
        for start, end, replacement in changes:
            start, end = start - offset, end - offset
            parts.append(window[cursor:start])
            view_len += start - cursor
            self._view_at.append(view_len)
            self._orig_at.append(start)
            parts.append(replacement)
            view_len += len(replacement)
            self._view_at.append(view_len)  # the first view position after the changed run ...
            self._orig_at.append(end)  # ... is the first original position after it
            cursor = end
        parts.append(window[cursor:])
        self.text = "".join(parts)

    def original(self, at: int, start: bool) -> int:
        """The window position of view position `at`: a changed run is taken whole (its start for
        the start of a span, its end for the end of one)."""
        i = bisect_right(self._view_at, at) - 1
        if i % 2 == 0:  # in unchanged text
            return self._orig_at[i] + (at - self._view_at[i])
        return self._orig_at[i] if start or at == self._view_at[i] else self._orig_at[i + 1]


def redact_view(text: str, redact_plain: Callable[[str], str]) -> str:
    """`text` with whatever `redact_plain` finds in the normalised view of its windows replaced in
    the original; unchanged (the same object) when the view adds nothing."""
    changes = _changes(text)
    if not changes:
        return text
    out, last = [], 0
    for low, high, inside in _windows(text, changes):
        view = _View(text[low:high], inside, low)
        redacted = redact_plain(view.text)
        if redacted == view.text:
            continue
        head = len(os.path.commonprefix([view.text, redacted]))
        room = min(len(view.text), len(redacted)) - head
        tail = min(room, len(os.path.commonprefix([view.text[::-1], redacted[::-1]])))
        start = low + view.original(head, True)
        end = low + view.original(len(view.text) - tail, False)
        out += [text[last:start], redacted[head:len(redacted) - tail]]
        last = end
    if last == 0:
        return text
    out.append(text[last:])
    return "".join(out)
