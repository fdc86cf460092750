"""The capture writer: one thread per process that moves journal records into the outbox.

Woken after every accepted message; while records wait it tries again on a short, growing timer.
The thread's body is `step`, which tests call on an injected clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import tenacity

from ..backoff import wait_s
from ..settings.config import Settings
from .service import CaptureService

log = logging.getLogger(__name__)


class CaptureWriter(threading.Thread):
    """The process's writer: moves journal records into the outbox whenever woken, and retries on
    a timer while records wait (a locked, full or unusable outbox)."""

    SHORTEST_S, LONGEST_S = 0.05, 5.0
    # Short, growing, capped: 0.05, 0.25, 1.25 s, then every 5 s.
    RETRY_WAIT = tenacity.wait_exponential(multiplier=SHORTEST_S, exp_base=5, max=LONGEST_S)

    def __init__(self, service: Callable[[], CaptureService], settings: Callable[[], Settings], *,
                 monotonic: Callable[[], float] = time.monotonic,
                 held_s: Callable[[], float] = lambda: 0.0) -> None:
        """`held_s`: how long a due pass waits still (prompt_window.PromptWindow.held_s)."""
        super().__init__(name="honcho-hub-capture-writer", daemon=True)
        self._service, self._settings, self._monotonic = service, settings, monotonic
        self._held_s = held_s
        self._wake = threading.Event()
        self._stop_event = threading.Event()
        self._failures, self._broken = 0, False
        self._due_mono: float | None = 0.0  # when the next pass is due; None: only when woken
        self._held_back = False  # a due pass waits for the prompt window
        self._stopper_waits_until = 0.0  # stop()'s join ends then (monotonic)

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopper_waits_until = self._monotonic() + timeout_s
        self._stop_event.set()
        self._wake.set()
        if self.started():  # one given while a hold kept it from starting has nothing to join
            self.join(timeout_s)

    def started(self) -> bool:
        """Whether the thread was started (it may have ended since)."""
        return self.ident is not None

    def ended(self) -> bool:
        """Whether the thread was started and has ended: a new writer must replace it."""
        return self.started() and not self.is_alive()

    def run(self) -> None:
        woken = True
        while not self._stop_event.is_set():
            woken = self._wake.wait(self.step(woken))
            self._wake.clear()
        # The pass the prompt window held would have run by now without it: made while the stopper
        # waits for it. Not after: a purge deletes the files then, and the pass would create them
        # again; the message stays in the journal for the next writer.
        if self._held_back and self._monotonic() < self._stopper_waits_until:
            self._write_pass()

    def step(self, woken: bool = False) -> float | None:
        """One writer pass if one is due or `woken` (a message was accepted); returns the seconds
        until the next is due, None while nothing waits (the next pass is when woken)."""
        if woken:
            self._due_mono = self._monotonic()
        if self._due_mono is None:
            return None
        # Due, but held while a turn's prompt is built: the pass comes when the hold ends; the
        # journal's sync (I/O, no interpreter lock) does not wait, nor a paste only in memory.
        held = self._held_s()
        if held > 0 and woken and not self._sync_journal():
            held = 0.0
        wait_s_now = max(self._due_mono - self._monotonic(), held)
        self._held_back = wait_s_now > 0 and held > 0
        if wait_s_now > 0:
            return wait_s_now
        wait = self._write_pass()
        self._due_mono = None if wait is None else self._monotonic() + wait
        return wait

    def _sync_journal(self) -> bool:
        """Sync the journal ahead of a held pass; whether the pass may wait (False: a paste is
        only in memory, or the sync failed: the pass does it now)."""
        try:
            return self._service().sync_journal()
        except Exception:
            log.debug("honcho capture: journal not synced ahead of the pass", exc_info=True)
            return False

    def _write_pass(self) -> float | None:
        """Move what the journal holds; how long until the next try (None: nothing waits)."""
        urgent = False
        try:
            service = self._service()
            service.write_pending(self._settings())
            waiting, urgent, self._broken = service.backlog(), service.refusing_for_a_lock(), False
        except Exception:  # a bug here must not end the thread that keeps captured messages moving
            if not self._broken:  # once, not on every retry
                log.exception("honcho capture: writer pass failed; retrying")
            waiting, self._broken = 1, True
        self._failures = self._failures + 1 if waiting else 0
        if not waiting:
            return None
        # A full journal refuses every message until a pass gets the lock, and nothing announces
        # that the lock was let go: ask again after the shortest wait (each try itself waits up to
        # capture_wait_ms for the lock). A full or unusable outbox frees up over seconds
        # (deliveries, the reopen cooldown), and a try costs a transaction there: the growing timer.
        return self.SHORTEST_S if urgent else wait_s(self.RETRY_WAIT, self._failures)
