"""Registers chats in their scopes on a background thread, so a chat's first turn never waits.

Best effort: the worker also puts each session in its scope before delivering its first batch.
Failures are logged and dropped; the queue is bounded.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from ..bounded import BoundedMap
from ..errors import HonchoRequestError
from ..keyed import KeyedMany, fields
from ..settings.config import Settings
from ..settings.spec import GATEWAY_FIELDS
from .gateway import HonchoGateway

log = logging.getLogger(__name__)

# Registrations known done, one a chat in a project: a user's chat list holds hundreds at most;
# forgetting one costs one idempotent request.
MAX_REMEMBERED = 1_000
MAX_GATEWAYS = 4  # destinations with an open client; more means settings changed: start over


class ScopeRegistrar(threading.Thread):
    honcho_hub_worker = True  # stopped with the other plugin threads by pre_update/uninstall

    def __init__(self, gateway_factory: Callable[[Settings], HonchoGateway], capacity: int = 64,
                 remember: int = MAX_REMEMBERED) -> None:
        super().__init__(name="honcho-hub-scopes", daemon=True)
        self._queue: queue.Queue = queue.Queue(maxsize=capacity)
        self._done: BoundedMap[tuple[str, str, str], bool] = BoundedMap(remember)
        # Only this thread uses them, so none is mid-request when the bound closes them all.
        self._gateways: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            fields(*GATEWAY_FIELDS), gateway_factory, MAX_GATEWAYS)

    def submit(self, settings: Settings, session_id: str, scope_id: str) -> bool:
        """Queue a registration; False when it was done already or the queue is full. Never
        blocks."""
        if (settings.destination(), session_id, scope_id) in self._done:
            return False
        try:
            self._queue.put_nowait((settings, session_id, scope_id))
            return True
        except queue.Full:
            return False

    def run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            self.register(*item)
        self._gateways.reset()

    def register(self, settings: Settings, session_id: str, scope_id: str) -> bool:
        """Do one registration now (the thread's body; tests call it directly)."""
        gateway = self._gateways.get(settings)
        try:
            gateway.ensure_session_in_scope(session_id, scope_id)
        except HonchoRequestError as exc:
            log.warning("honcho: chat not registered in its scope (%s); delivery will retry",
                        exc.code)
            return False
        if gateway.scope_problem is None:
            self._done.put((settings.destination(), session_id, scope_id), True)
        return True

    def drain(self, timeout_s: float) -> dict[str, int]:
        """What moved (nothing: registrations are best effort, there is nothing to wait for)."""
        return {}

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Finish queued registrations, then end; idempotent. True when the thread has ended."""
        if self.is_alive():
            try:
                self._queue.put(None, timeout=max(0.0, timeout_s))
            except queue.Full:
                return False
            self.join(timeout_s)
        return not self.is_alive()
