"""What capture keeps for the whole process, across module generations.

The journal (it holds the file lock), the writer thread, the outcome counters, and where a dead
process's project secrets come from, on runtime's process state under the names older generations
gave them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..runtime import Kept
from ..storage.journal import Journal
from .service import Counters
from .writer import CaptureWriter

JOURNAL: Kept[Journal | None] = Kept("journal", lambda: None)
WRITER: Kept[CaptureWriter | None] = Kept("writer", lambda: None)
COUNTERS: Kept[Counters] = Kept("capture_counters", Counters)
# A project's secrets, to redact a dead process's journal records when they are replayed.
REPLAY_SECRETS: Kept[Callable[[str | None], Mapping[str, str]] | None] = Kept(
    "replay_secrets", lambda: None)
