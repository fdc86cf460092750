"""Recall's background work: a small bounded pool of threads that loads from Honcho, so a slow
server holds a pool thread, never the turn; and the deadline each load runs under. Beyond
MAX_QUEUED_LOADS waiting, a load is not started (the turn gets the base pack)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from ..gateway import deadline
from ..runtime import close_pool
from ..settings.config import Settings

RECALL_THREADS = 6
MAX_QUEUED_LOADS = 32


class Loads:
    """The pool: `submit` runs work on it unless too many loads wait already, or `may_start` says
    no thread may start now (the Hub's: not while the plugin's threads are held)."""

    def __init__(self, threads: int = RECALL_THREADS, max_queued: int = MAX_QUEUED_LOADS,
                 may_start: Callable[[], bool] = lambda: True) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="honcho-hub-recall")
        self._may_start = may_start
        self._max_queued = max_queued
        self._lock = threading.Lock()
        self._queued = 0  # submitted, not started
        self._unfinished: set[Future] = set()

    def submit(self, work: Callable[..., Any], *args: Any) -> bool:
        """Run `work(*args)` on the pool; False when it was not started (too many waiting, closed,
        or held)."""
        if not self._may_start():
            return False
        with self._lock:
            if self._queued >= self._max_queued:
                return False
            self._queued += 1

        def run() -> None:
            with self._lock:
                self._queued -= 1
            work(*args)
        try:
            future = self._pool.submit(run)
        except RuntimeError:  # the pool was shut down (the plugin is being reloaded)
            with self._lock:
                self._queued -= 1
            return False
        with self._lock:
            self._unfinished.add(future)
        future.add_done_callback(self._finished)  # at once when it is done already
        return True

    def unfinished(self) -> list[Future]:
        """The work submitted and not finished (what `close` waits for; a benchmark or a test may
        wait for it too)."""
        with self._lock:
            return list(self._unfinished)

    def close(self, timeout_s: float = 0.0) -> bool:
        """Cancel the loads not started and wait at most `timeout_s` for the running ones; True
        when the pool's threads have ended."""
        return close_pool(self._pool, self.unfinished, timeout_s)

    def _finished(self, future: Future) -> None:
        with self._lock:
            self._unfinished.discard(future)


def load_deadline(settings: Settings, monotonic: Callable[[], float]) -> AbstractContextManager:
    """A background load's deadline: the turn waits recall_timeout_s at most, and the load goes on
    filling the cache after that, but its reads end with those of any other call, at two SDK
    timeouts."""
    return deadline.within(settings.operation_deadline_s, monotonic)
