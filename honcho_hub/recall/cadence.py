"""Which user turns make the context call: the first of a session, then every `context_cadence`
(turns are counted at prefetch); the turns between reuse the session's last load without a request.
The count is kept per session, for the newest `cache_max_entries` sessions."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from ..bounded import BoundedMap
from ..settings.config import Settings


class Cadence:
    """The user turns prefetched per session, the newest `cache_max_entries` sessions kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # session key -> user turns prefetched
        self._turns: BoundedMap[Hashable, int] = BoundedMap()

    def count_turn(self, settings: Settings, session_key: Hashable) -> bool:
        """Count a user turn of the session; True when it is one that makes the context call."""
        with self._lock:
            turn = self._turns.get(session_key, 0) + 1
            self._turns.put(session_key, turn, settings.cache_max_entries)
        return (turn - 1) % settings.context_cadence == 0

    def loads_now(self, settings: Settings, session_key: Hashable) -> bool:
        """Whether the session's current turn makes the context call (a turn never prefetched
        does)."""
        with self._lock:
            turn = self._turns.get(session_key)
        return turn is None or (turn - 1) % settings.context_cadence == 0
