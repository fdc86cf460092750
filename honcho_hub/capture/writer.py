"""The capture writer: one thread per process that moves journal records into the outbox.

Woken after every accepted message; while records wait (a locked, full or unusable outbox) it tries again
on a short, growing timer. It holds no lock between passes, so a writer of an older module generation
and its replacement can overlap safely: passes are serialised by the journal's own write lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..settings.config import Settings
from .service import CaptureService

log = logging.getLogger(__name__)


class CaptureWriter(threading.Thread):
    """The process's writer: moves journal records into the outbox whenever woken, and retries on a timer
    while records wait (a locked, full or unusable outbox)."""

    # Written out rather than tenacity's wait strategies: capture must work where only the standard
    # library and PyYAML are installed (a failed install runs degraded).
    RETRY_S = (0.05, 0.2, 1.0, 5.0)

    def __init__(self, service: Callable[[], CaptureService], settings: Callable[[], Settings]) -> None:
        super().__init__(name="honcho-hub-capture-writer", daemon=True)
        self._service, self._settings = service, settings
        self._wake = threading.Event()
        self._stop_event = threading.Event()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop_event.set()
        self._wake.set()
        self.join(timeout_s)

    def run(self) -> None:
        failures, broken = 0, False
        while not self._stop_event.is_set():
            waiting = 0
            try:
                service = self._service()
                service.write_pending(self._settings())
                waiting, broken = service.backlog(), False
            except Exception:  # a bug here must not end the thread that keeps captured messages moving
                if not broken:  # once, not on every retry
                    log.exception("honcho capture: writer pass failed; retrying")
                waiting, broken = 1, True
            failures = failures + 1 if waiting else 0
            timeout = self.RETRY_S[min(failures, len(self.RETRY_S)) - 1] if waiting else None
            self._wake.wait(timeout)
            self._wake.clear()
