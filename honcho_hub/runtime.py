"""Process-wide state that must outlive a re-import of the plugin's modules.

Agent Zero purges `usr.plugins.*` from `sys.modules` when plugin files change and imports them anew,
so a module global would silently start over (and an in-memory hand-off would be forgotten). Plain
data that must survive — hand-off queues and counters, keyed by outbox path — lives in one module
object registered under a name outside that namespace. Objects with behaviour (services, workers)
are rebuilt by the new generation around that data; a worker thread of an older generation is found
by its marker among the live threads and asked to stop.
"""

from __future__ import annotations

import sys
import threading
import types
from collections import deque

from typing import TYPE_CHECKING, Callable

from . import lifecycle
from .capture import CaptureService
from .config import Settings

if TYPE_CHECKING:
    from .worker import DeliveryWorker

STATE_MODULE = "_honcho_hub_process_state"

_services: dict[str, tuple[tuple, CaptureService]] = {}
_services_lock = threading.Lock()
_worker: "DeliveryWorker | None" = None
_worker_lock = threading.Lock()


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


def ensure_worker(settings: Callable[[], Settings], enabled: Callable[[], bool] = lambda: True) -> "DeliveryWorker | None":
    """Start the process's delivery worker unless one of this module generation runs; cheap when it does.

    A worker left by an older generation (Agent Zero re-imported the plugin) is asked to stop, and the
    new one starts on a later call once it has gone, so there are never two. Never blocks.
    """
    global _worker
    from .worker import DeliveryWorker  # imported here: capture must work without httpx/tenacity/honcho

    current = _worker
    if current is not None and current.is_alive() and not current.stopping:
        return current
    with _worker_lock:
        for thread in lifecycle.plugin_workers():
            if type(thread) is DeliveryWorker and not thread.stopping:
                _worker = thread  # ours, started before this module's globals were reset: adopt it
                return thread
            thread.stop(0)  # older generation or stopping: signal only; the turn must not wait
        if any(t.is_alive() for t in lifecycle.plugin_workers()):
            return None
        _worker = DeliveryWorker(settings, enabled=enabled,
                                 handoff_flush=lambda s: capture_service(s).flush_handoff())
        _worker.start()
        return _worker


def wake_worker() -> None:
    """Nudge the worker after an enqueue (no-op when none runs)."""
    if _worker is not None:
        _worker.wake()


def current_worker() -> "DeliveryWorker | None":
    """The running worker of this process, if any."""
    return _worker if _worker is not None and _worker.is_alive() else None
