"""Text hygiene and splitting of long messages into ordered parts that fit Honcho's limit.

Honcho rejects message content over 25,000 characters. Longer text becomes several events, split at
a paragraph, else a sentence, else a word boundary; nothing is truncated.
"""

from __future__ import annotations

import re
import unicodedata

from ..names import MAX_CONTENT_CHARS

MARKER_ROOM = 40  # "[continued, part 12 of 40]\n" and friends fit in this
# Control characters but tab, line feed and carriage return. A regex, not str.translate: translating
# with a table costs ≈ 85 ms per MB of non-ASCII text, a search that finds nothing ≈ 1 ms.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"')\]]*\s+")


def clean_text(text: str) -> str:
    """Drop NUL and other control characters (Honcho strips NUL), replace lone surrogates."""
    try:
        text.encode("utf-8")  # fast path: only text with lone surrogates fails to encode
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    if _CONTROLS.search(text):
        text = _CONTROLS.sub("", text)
    return text.replace("\r\n", "\n")


def split_message(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """Split into parts of at most `limit` characters including continuation markers."""
    if len(text) <= limit:
        return [text]
    bodies, start, room = [], 0, limit - MARKER_ROOM
    while len(text) - start > room:  # positions, not copies of the rest: a 10 MB paste stays linear
        cut = start + _cut_point(text, start, room)
        bodies.append(text[start:cut])
        start = cut
    bodies.append(text[start:])
    total = len(bodies)
    return [body if i == 0 else f"[continued, part {i + 1} of {total}]\n{body}"
            for i, body in enumerate(bodies)]


def _cut_point(text: str, start: int, room: int) -> int:
    """The best length for the part starting at `start`: up to a paragraph, a sentence, a space,
    else a hard cut."""
    window = text[start:start + room]
    floor = room // 2  # never make a part smaller than half the room just to find a nicer boundary
    paragraph = window.rfind("\n\n")
    if paragraph >= floor:
        return paragraph + 2
    sentence_ends = [m.end() for m in _SENTENCE_END.finditer(window, floor)]
    if sentence_ends:
        return sentence_ends[-1]
    space = max(window.rfind(" "), window.rfind("\n"))
    if space >= floor:
        return space + 1
    cut = room
    while cut > floor and unicodedata.combining(text[start + cut]):
        cut -= 1  # a hard cut must not separate a letter from its combining marks
    return cut
