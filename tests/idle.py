"""Waiting for the background work of recall and the chats' sessions to end, for tests and
benchmarks: their `unfinished()` futures, waited for until none is left (a load may start
another)."""

from __future__ import annotations

import time
from concurrent.futures import wait
from typing import Any


def wait_idle(timeout_s: float, *parts: Any) -> bool:
    """Wait until no part (a Recaller, ChatSessions) has work queued or running; False on
    timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [future for part in parts for future in part.unfinished() if not future.done()]
        left = deadline - time.monotonic()
        if not pending or left <= 0:
            return not pending
        wait(pending, left)
