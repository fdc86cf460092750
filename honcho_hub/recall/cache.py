"""Recall cache: TTL, bounded entries (LRU), single-flight loads, and the last load per session.
It keeps what Honcho returned (`ContextData`), not the rendered pack. Loads run on a thread the
caller supplies; a caller waits at most its own deadline, else gets the session's last load (stale)
or nothing. docs/architecture.md ("Recall") tells the story.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..bounded import BoundedMap
from ..settings.config import Settings
from .pack import ContextData

# Outcomes of the latest waited loads kept (status: is recall timing out on most turns?).
RECENT_LOADS = 10
Submit = Callable[..., bool]  # submit(fn, *args) -> False when no thread could take it


def session_key(settings: Settings, session_id: str) -> tuple[str, str, str]:
    """What a session's own loads are kept under: its destination, its id and the human they were
    read for. The same chat can be read for two humans (one of Agent Zero's integrations names its
    sender only after the chat started, a mapping changes): neither gets the other's load."""
    return (settings.destination(), session_id, settings.user_peer_id)


class RecallCache:
    def __init__(self, ttl_s: float, max_entries: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # key -> (loaded at, data)
        self._fresh: BoundedMap[Hashable, tuple[float, ContextData]] = BoundedMap(max_entries)
        # session key -> its newest load
        self._last: BoundedMap[Hashable, ContextData] = BoundedMap(max_entries)
        self._inflight: dict[Hashable, Future] = {}
        self.counters = {"hits": 0, "loads": 0, "stale_served": 0, "timeouts": 0, "errors": 0,
                         "reused": 0}
        # hit, fresh, timeout or error: how each of the latest loads a turn waited for ended.
        self.recent: deque[str] = deque(maxlen=RECENT_LOADS)

    def get(self, key: Hashable, session_key: Hashable, loader: Callable[[], ContextData],
            wait_s: float, submit: Submit) -> tuple[ContextData | None, str]:
        """(data, source): source is hit, fresh, stale (not ready in time, or failed), timeout or
        error."""
        future, owner = self._hit_or_flight(key)
        if isinstance(future, ContextData):
            return self._noted(future, "hit")
        if owner and not submit(self._load, key, session_key, loader, future):
            self._abandon(key, future)
            return self._fallback(session_key, "timeout")
        try:
            return self._noted(future.result(timeout=max(0.0, wait_s)), "fresh")
        except FutureTimeout:
            return self._fallback(session_key, "timeout")
        except Exception as exc:
            return self._fallback(session_key, _kind(exc))

    def _noted(self, data: ContextData, source: str) -> tuple[ContextData, str]:
        with self._lock:
            self.recent.append(source)
        return data, source

    def start(self, key: Hashable, session_key: Hashable,
              loader: Callable[[], ContextData]) -> None:
        """Load `key` on this thread unless it is cached or already loading (a prefetch)."""
        future, owner = self._hit_or_flight(key)
        if owner:
            assert isinstance(future, Future), "the owner of a load always gets the new flight"
            self._load(key, session_key, loader, future)

    def _hit_or_flight(self, key: Hashable) -> tuple[ContextData | Future, bool]:
        """The fresh cached data, else the load in flight for `key` (registered now if none:
        owner)."""
        with self._lock:
            cached = self._fresh.get(key)
            if cached is not None and self._monotonic() - cached[0] < self.ttl_s:
                self._fresh.move_to_end(key)
                self.counters["hits"] += 1
                return cached[1], False
            future = self._inflight.get(key)
            if future is not None:
                return future, False
            # Single flight: later callers wait on this one.
            future = self._inflight[key] = Future()
            self.counters["loads"] += 1
            return future, True

    def _abandon(self, key: Hashable, future: Future) -> None:
        with self._lock:
            self._inflight.pop(key, None)
        future.set_exception(TimeoutError("no thread free for the load"))

    def clear(self) -> int:
        """Forget everything loaded; returns how many entries there were."""
        with self._lock:
            count = len(self._fresh)
            self._fresh.clear()
            self._last.clear()
            return count

    def peek_last(self, session_key: Hashable) -> ContextData | None:
        """The session's newest load, counted as nothing (for a look, not for a turn)."""
        with self._lock:
            return self._last.get(session_key)

    def last(self, session_key: Hashable) -> ContextData | None:
        """The session's newest load, without loading (a turn between context calls reuses it)."""
        with self._lock:
            found = self._last.get(session_key)
            if found is not None:
                self.counters["reused"] += 1
            return found

    def entries(self) -> int:
        with self._lock:
            return len(self._fresh)

    def _load(self, key: Hashable, session_key: Hashable, loader: Callable[[], ContextData],
              future: Future) -> None:
        try:
            data = loader()
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(key, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._inflight.pop(key, None)
            self._fresh.put(key, (self._monotonic(), data))
            self._last.put(session_key, data)
        future.set_result(data)

    def _fallback(self, session_key: Hashable, source: str) -> tuple[ContextData | None, str]:
        with self._lock:
            self.counters[source + "s"] += 1
            self.recent.append(source)
            stale = self._last.get(session_key)
            if stale is not None:
                self.counters["stale_served"] += 1
                return stale, "stale"
        return None, source


def _kind(exc: BaseException) -> str:
    """timeout for a load that ran out of time, error for anything else."""
    return "timeout" if getattr(exc, "code", "") in ("timeout", "connect_timeout") else "error"
