"""Process-wide state that must outlive a re-import of the plugin's modules.

Agent Zero purges `usr.plugins.*` from `sys.modules` when plugin files change and imports them anew,
so a module global would silently start over (and an in-memory hand-off would be forgotten). Plain
data that must survive — hand-off queues and counters, keyed by outbox path — lives in one module
object registered under a name outside that namespace. Objects with behaviour (services, workers)
are rebuilt by the new generation around that data.
"""

from __future__ import annotations

import sys
import threading
import types
from collections import deque

from .capture import CaptureService
from .config import Settings

STATE_MODULE = "_honcho_hub_process_state"

_services: dict[str, tuple[tuple, CaptureService]] = {}
_services_lock = threading.Lock()


def process_state() -> types.ModuleType:
    """The registry shared by every module generation of this process."""
    state = sys.modules.get(STATE_MODULE)
    if state is None:
        state = types.ModuleType(STATE_MODULE, "Honcho Memory Hub process state")
        state.lock = threading.RLock()
        state.handoffs = {}  # outbox path -> deque of event lists
        state.counters = {}  # outbox path -> {outcome: count}
        state = sys.modules.setdefault(STATE_MODULE, state)
    return state


def capture_service(settings: Settings) -> CaptureService:
    """The capture service for the configured outbox; rebuilt when its storage settings change."""
    key = (settings.outbox_path, settings.outbox_synchronous, settings.max_queued_rows,
           settings.capture_wait_ms, settings.handoff_capacity, settings.dead_retention_days)
    with _services_lock:
        known = _services.get(settings.outbox_path)
        if known is not None and known[0] == key:
            return known[1]
        state = process_state()
        with state.lock:
            handoff = state.handoffs.setdefault(settings.outbox_path, deque())
            counters = state.counters.setdefault(settings.outbox_path, {})
        if known is not None:
            known[1].close()
        service = CaptureService(settings, handoff=handoff, counters=counters)
        _services[settings.outbox_path] = (key, service)
        return service


def close_services() -> None:
    """Close every capture service of this generation (hand-offs and counters stay)."""
    with _services_lock:
        for _, service in _services.values():
            service.close()
        _services.clear()
