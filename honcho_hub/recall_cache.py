"""Recall cache: TTL, bounded entries (LRU), single-flight loads, and the last pack per session.

The first caller of a key loads it in its own thread (the loader's client times out at the recall
deadline, so no extra thread hand-off is paid on every cold turn); concurrent identical callers wait
on that load for at most their deadline. A load that fails or times out gives the session's last pack
(stale) or nothing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, Hashable

from .recall_pack import MemoryPack


class RecallCache:
    def __init__(self, ttl_s: float, max_entries: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._fresh: OrderedDict[Hashable, tuple[float, MemoryPack]] = OrderedDict()  # key -> (stored at, pack)
        self._last: OrderedDict[Hashable, MemoryPack] = OrderedDict()  # session key -> newest pack
        self._inflight: dict[Hashable, Future] = {}
        self.counters = {"hits": 0, "loads": 0, "stale_served": 0, "timeouts": 0, "errors": 0}

    def get(self, key: Hashable, session_key: Hashable, loader: Callable[[], MemoryPack],
            deadline_s: float) -> tuple[MemoryPack | None, str]:
        """(pack, source): source is hit, fresh, stale (after a timeout or error), timeout or error."""
        with self._lock:
            cached = self._fresh.get(key)
            if cached is not None and self._monotonic() - cached[0] < self.ttl_s:
                self._fresh.move_to_end(key)
                self.counters["hits"] += 1
                return cached[1], "hit"
            future = self._inflight.get(key)
            owner = future is None
            if owner:  # single flight: the first caller loads, the others wait on its future
                future = self._inflight[key] = Future()
                self.counters["loads"] += 1
        if owner:
            return self._load(key, session_key, loader, future)
        try:
            return future.result(timeout=max(0.0, deadline_s)), "fresh"
        except FutureTimeout:
            return self._fallback(session_key, "timeout")
        except Exception as exc:
            return self._fallback(session_key, _kind(exc))

    def clear(self) -> int:
        """Forget every pack; returns how many entries there were."""
        with self._lock:
            count = len(self._fresh)
            self._fresh.clear()
            self._last.clear()
            return count

    def entries(self) -> int:
        with self._lock:
            return len(self._fresh)

    def _load(self, key: Hashable, session_key: Hashable, loader: Callable[[], MemoryPack],
              future: Future) -> tuple[MemoryPack | None, str]:
        try:
            pack = loader()
        except Exception as exc:
            future.set_exception(exc)
            return self._fallback(session_key, _kind(exc))
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        with self._lock:
            self._fresh[key] = (self._monotonic(), pack)
            self._fresh.move_to_end(key)
            self._last[session_key] = pack
            self._last.move_to_end(session_key)
            for entries in (self._fresh, self._last):
                while len(entries) > self.max_entries:
                    entries.popitem(last=False)
        future.set_result(pack)
        return pack, "fresh"

    def _fallback(self, session_key: Hashable, source: str) -> tuple[MemoryPack | None, str]:
        with self._lock:
            self.counters[source + "s"] += 1
            stale = self._last.get(session_key)
            if stale is not None:
                self.counters["stale_served"] += 1
                return stale, "stale"
        return None, source


def _kind(exc: BaseException) -> str:
    """timeout for a load that ran out of time, error for anything else."""
    return "timeout" if getattr(exc, "code", "") in ("timeout", "connect_timeout") else "error"
