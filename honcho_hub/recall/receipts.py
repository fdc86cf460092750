"""Receipts: what a turn's memory pack held, as labels and counts only (a receipt is saved in the
chat's file, which outlives a forget and which backfill reads), and the injected blocks held in
memory for a while so that opening a receipt can show its pack. docs/reference.md ("Receipts").
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..bounded import BoundedMap
from ..settings.config import Settings
from .pack import AGENT_TITLE, NOTE_TITLE, MemoryPack, estimate_tokens

# Recall's own word for where the pack came from -> the receipt's freshness. A pack reused between
# context calls (context_cadence) or served after a slow or failed load was loaded on an earlier
# turn: stale. Anything else (timeout, error, disabled) injected nothing: none.
FRESHNESS = {"hit": "fresh", "fresh": "fresh", "base": "base", "stale": "stale", "reused": "stale"}
# The pack's section titles (pack.py) -> the receipt's names for them; a title not listed is
# "other", so no text a later section might carry reaches the receipt.
SECTION_NAMES = {
    NOTE_TITLE: "dialectic note",
    "Relevant conclusions about the user": "conclusions",
    "The user's card": "card",
    "Summary of this conversation": "summary",
    "Relevant recent messages": "messages",
    AGENT_TITLE: "agent self-model",
}
LOG_ID_PREFIX = "honcho-receipt-"  # the log item's id: the page's script finds receipts by it
RECEIPT_ID = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class Receipt:
    """One turn's recall in labels and counts; nothing recalled is in it."""

    receipt_id: str
    freshness: str  # fresh, base, stale, none
    source: str  # recall's word: hit, fresh, reused, base, stale, timeout, error, empty
    sections: tuple[tuple[str, int], ...]  # (name, estimated tokens), in the pack's order
    tokens: int  # the injected block, estimated
    note: bool  # whether the dialectic's note was in it

    @property
    def log_id(self) -> str:
        return LOG_ID_PREFIX + self.receipt_id

    def heading(self) -> str:
        """One line for the chat's log."""
        if self.freshness == "none":
            return f"Honcho memory: none ({self.source})"
        count = len(self.sections)
        parts = [f"Honcho memory: {self.freshness}",
                 f"{count} section{'' if count == 1 else 's'}", f"{self.tokens} tokens"]
        if self.note:
            parts.append("dialectic note")
        return " · ".join(parts)

    def kvps(self) -> dict[str, str | int]:
        """The rows the log item shows under its heading."""
        return {"memory": self.freshness, "recall": self.source,
                "sections": " · ".join(f"{name} {tokens}" for name, tokens in self.sections)
                or "none",
                "tokens": self.tokens, "dialectic_note": "yes" if self.note else "no"}


def receipt_of(receipt_id: str, source: str, pack: MemoryPack | None, block: str) -> Receipt:
    """The receipt of a turn that got `block` (rendered from `pack`) from recall's `source`."""
    if not block or pack is None or pack.empty:
        return Receipt(receipt_id, "none", source if source not in FRESHNESS else "empty", (), 0,
                       False)
    sections = tuple((SECTION_NAMES.get(title, "other"), estimate_tokens(text))
                     for title, text in pack.sections)
    return Receipt(receipt_id, FRESHNESS[source], source, sections, estimate_tokens(block),
                   any(title == NOTE_TITLE for title, _ in pack.sections))


class HeldBlocks:
    """The blocks turns got, by receipt id, for the recall cache's lifetime and within its entry
    bound; dropped whenever the cache is cleared (a forget, Clear cache, the marker moving). A
    receipt opens its pack only while memory still holds it."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._held: BoundedMap[str, tuple[float, str]] = BoundedMap()  # id -> (held at, block)

    def hold(self, settings: Settings, block: str) -> str:
        """Keep `block` ('' for a turn that got nothing); its new receipt id."""
        receipt_id = secrets.token_hex(8)
        with self._lock:
            self._held.put(receipt_id, (self._monotonic(), block), settings.cache_max_entries)
        return receipt_id

    def get(self, settings: Settings, receipt_id: str) -> str | None:
        """The block of that receipt ('' when its turn got nothing); None once it is gone."""
        with self._lock:
            held = self._held.get(receipt_id)
            if held is None:
                return None
            if self._monotonic() - held[0] >= settings.cache_ttl_s:
                del self._held[receipt_id]
                return None
            return held[1]

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
