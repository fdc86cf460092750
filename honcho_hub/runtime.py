"""Process-wide state that must outlive a re-import of the plugin's modules.

Agent Zero purges `usr.plugins.*` from `sys.modules` when plugin files change and imports them anew,
so a module global would silently start over. What must survive — the capture journal (its file lock
and the messages not yet in the outbox), counters, the capture writer — lives in one module object
registered under a name outside that namespace. Services are rebuilt by the new generation around it;
a worker thread of an older generation is found by its marker among the live threads and asked to stop.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import time
import types
from typing import TYPE_CHECKING, Any, Callable

from .delivery import lifecycle
from .settings import log_level
from .capture.service import CaptureService, Counters, journal_for
from .capture.writer import CaptureWriter
from .settings.config import Settings

log = logging.getLogger(__name__)
if TYPE_CHECKING:
    from .ops.status import StatusParts
    from .delivery.worker import DeliveryWorker

STATE_MODULE = "_honcho_hub_process_state"

_service: CaptureService | None = None
_service_key: tuple | None = None
_services_lock = threading.Lock()
_worker: "DeliveryWorker | None" = None
_worker_lock = threading.Lock()


def process_state() -> types.ModuleType:
    """The registry shared by every module generation of this process."""
    state = sys.modules.get(STATE_MODULE)
    if state is None:
        state = types.ModuleType(STATE_MODULE, "Honcho Memory Hub process state")
        state.lock = threading.RLock()
        state = sys.modules.setdefault(STATE_MODULE, state)
    with state.lock:  # a state made by an older generation may lack what a newer one keeps
        for name, make in (("api_checks", dict), ("capture_counters", Counters), ("journal", lambda: None),
                           ("writer", lambda: None), ("replay_secrets", lambda: None), ("warned", set)):
            if not hasattr(state, name):
                setattr(state, name, make())
    return state


def record_api_check(destination: str, ok: bool, code: str | None, auth: bool, now: float) -> None:
    """Remember what an endpoint check learned about the API, for status in this process."""
    state = process_state()
    with state.lock:
        known = state.api_checks.setdefault(destination, {"ok_at": None, "failed_at": None, "code": None,
                                                          "auth": False})
        if ok:
            known["ok_at"] = now
        else:
            known.update(failed_at=now, code=code, auth=auth)


def capture_service(settings: Settings) -> CaptureService:
    """The process's capture service; rebuilt when its storage settings change. Every service of the
    process shares one journal, so messages waiting in it follow the outbox setting wherever it points."""
    global _service, _service_key
    log_level.follow(settings)  # every captured message brings the newest settings
    key = (settings.outbox_path, settings.outbox_synchronous, settings.max_queued_rows,
           settings.handoff_capacity, settings.dead_retention_days)
    with _services_lock:
        if _service is not None and _service_key == key:
            return _service
        state = process_state()
        with state.lock:
            state.journal = journal_for(settings, state.journal)
        old, _service_key = _service, key
        _service = CaptureService(settings, journal=state.journal, counters=state.capture_counters,
                                  replay_secrets=_replay_secrets)
    if old is not None:
        old.close()  # waits for a writer pass of the old service to end; no new one can start on it
    return _service


def flush_capture() -> None:
    """Move what this process's capture journal holds into the outbox now (a drain delivers what was
    typed a moment ago, before the writer thread's pass); never raises."""
    service = _service
    if service is not None:
        service.write_pending()


def set_replay_secrets(provider: Callable[[str | None], dict]) -> None:
    """How to find a project's secrets when a dead process's journal is replayed (set by the host)."""
    process_state().replay_secrets = provider


def _replay_secrets(project: str | None) -> dict:
    provider = process_state().replay_secrets
    return dict(provider(project) or {}) if provider is not None else {}


def ensure_writer(settings: Callable[[], Settings]) -> CaptureWriter:
    """The process's capture writer, started on first use; one of an older module generation is replaced
    (both share the journal's write lock, so their passes never overlap)."""
    state = process_state()
    with state.lock:
        writer = state.writer
        if writer is not None and writer.is_alive() and type(writer) is CaptureWriter:
            return writer
        if writer is not None:
            writer.stop(0)
        writer = state.writer = CaptureWriter(lambda: capture_service(settings()), settings)
        writer.start()
        return writer


def warn_once(key: str, message: str, *args: Any) -> None:
    """Log a condition once per process (a missing dependency would otherwise log on every message)."""
    state = process_state()
    with state.lock:
        if key in state.warned:
            return
        state.warned.add(key)
    log.warning(message, *args)


_delivery_loaded = threading.Event()  # the worker's modules (and the SDK) are imported
_starters: dict[Any, threading.Thread] = {}
_starters_lock = threading.Lock()


def in_background(name: str, work: Callable[[], Any], single: bool = True) -> None:
    """Run `work` on a short-lived thread — when `single`, only if none of that name runs — logging
    errors. For what must not run on the caller's thread (Agent Zero's event loop): first imports,
    first requests."""
    def run() -> None:
        try:
            work()
        except Exception:
            log.exception("honcho: background start %s failed", name)

    thread = threading.Thread(target=run, name=f"honcho-hub-{name}", daemon=True)
    with _starters_lock:
        for key in [key for key, known in _starters.items() if not known.is_alive()]:
            del _starters[key]  # finished ones: the registry stays as small as what runs
        key = name if single else (name, id(thread))
        if single and key in _starters:
            return
        _starters[key] = thread
        thread.start()


def join_background(timeout_s: float) -> bool:
    """Wait for the background starts running now (tests, shutdown); False if one is still running."""
    deadline = time.monotonic() + timeout_s
    with _starters_lock:
        running = list(_starters.values())
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in running)


def ensure_worker(settings: Callable[[], Settings], enabled: Callable[[], bool] = lambda: True) -> "DeliveryWorker | None":
    """Start the process's delivery worker unless one runs; cheap and non-blocking when it does.

    The first call imports the delivery modules (the SDK: hundreds of milliseconds) on a background
    thread, never on the caller's, which may be Agent Zero's event loop; until then it returns None.
    """
    current = _worker
    if current is not None and current.is_alive() and not current.stopping:
        return current
    if not _delivery_loaded.is_set():
        in_background("worker-start", lambda: _ensure_worker(settings, enabled))
        return None
    return _ensure_worker(settings, enabled)


def load_delivery() -> bool:
    """Import the delivery modules (the SDK) now, on this thread; False when the plugin's requirements
    are missing (logged once). For threads that may wait: never Agent Zero's event loop."""
    try:  # imported here, not at the top: capture must work without httpx, tenacity and the SDK
        importlib.import_module(f"{__package__}.delivery.worker")
    except ImportError as exc:
        warn_once("worker_import", "honcho: delivery is off until the plugin's requirements are installed"
                  " (%s is missing); captured messages wait in the outbox", exc.name or "a module")
        return False
    _delivery_loaded.set()
    return True


def _ensure_worker(settings: Callable[[], Settings], enabled: Callable[[], bool]) -> "DeliveryWorker | None":
    """Start the process's delivery worker unless one of this module generation runs.

    A worker left by an older generation (Agent Zero re-imported the plugin) is asked to stop, and the
    new one starts once it has gone, so there are never two: on a later call, or from a short-lived
    helper thread that waits for the old one (else a lone message after a reload would wait for the
    next call, possibly the job loop a minute later). Never blocks.
    """
    global _worker
    if not load_delivery():
        return None
    from .delivery.worker import DeliveryWorker
    if lifecycle.restart_held():
        return None  # stopped for an update or an uninstall: not restarted by the next message

    current = _worker
    if current is not None and current.is_alive() and not current.stopping:
        return current
    with _worker_lock:
        # This generation's scope registrar is one of the plugin's threads but not a delivery worker:
        # it neither stops nor waits for the worker.
        for thread in _other_plugin_threads():
            if type(thread) is DeliveryWorker and not thread.stopping:
                _worker = thread  # ours, started before this module's globals were reset: adopt it
                return thread
            thread.stop(0)  # older generation or stopping: signal only; the turn must not wait
        older = _other_plugin_threads()
        if older:
            _start_after(older, settings, enabled)
            return None
        _worker = DeliveryWorker(log_level.following(settings), enabled=enabled)  # reloaded at every step
        _worker.start()
        return _worker


def _other_plugin_threads() -> list[threading.Thread]:
    return [t for t in lifecycle.plugin_workers() if t is not _registrar]


RESTART_WAIT_S = 60.0
_successor: threading.Thread | None = None


def _start_after(older: list[threading.Thread], settings: Callable[[], Settings], enabled: Callable[[], bool]) -> None:
    """One helper thread (call under _worker_lock) that starts the worker once `older` have ended."""
    global _successor

    def start_when_gone() -> None:
        deadline = time.monotonic() + RESTART_WAIT_S
        for thread in older:
            thread.join(max(0.0, deadline - time.monotonic()))
        _ensure_worker(settings, enabled)  # still alive past the deadline: the job loop tries again

    if _successor is None or not _successor.is_alive():
        _successor = threading.Thread(target=start_when_gone, name="honcho-hub-restart", daemon=True)
        _successor.start()


def wake_worker() -> None:
    """Nudge the worker after an enqueue (no-op when none runs)."""
    if _worker is not None:
        _worker.wake()


def current_worker() -> "DeliveryWorker | None":
    """The running worker of this process, if any."""
    return _worker if _worker is not None and _worker.is_alive() else None


_recaller = None
_registrar = None
_parts_lock = threading.Lock()


def recaller():
    """The process's Recaller (its cache starts over when Agent Zero re-imports the plugin). Its first
    call imports the SDK: call it off the event loop (see `ready_recaller`)."""
    global _recaller
    from .recall.recaller import Recaller  # imported here: capture must work without the SDK

    with _parts_lock:
        if _recaller is None:
            _recaller = Recaller()
        return _recaller


def ready_recaller(then: Callable[[Any], Any] | None = None):
    """The Recaller if it exists (cheap, safe on the event loop); else None, and with `then`, builds it on
    a background thread and calls `then(recaller)` there."""
    if _recaller is not None:
        return _recaller
    if then is not None:
        def build_then() -> None:
            try:
                made = recaller()
            except ImportError:
                return  # running degraded (no SDK): no recall
            then(made)
        in_background("recall-start", build_then)
    return None


def registrar():
    """The process's scope registrar thread, started on first use (or again after a stop); not started
    while an update or uninstall holds the plugin's threads stopped (then None or the stopped one)."""
    global _registrar
    from .gateway.gateway import HonchoGateway
    from .gateway.registrar import ScopeRegistrar

    with _parts_lock:
        if (_registrar is None or not _registrar.is_alive()) and not lifecycle.restart_held():
            _registrar = ScopeRegistrar(HonchoGateway.for_settings)
            _registrar.start()
        return _registrar


def shutdown() -> None:
    """Close this generation's capture service (the journal and counters stay with the process), recall
    cache and tool clients."""
    global _recaller, _service, _service_key
    with _services_lock:
        old, _service, _service_key = _service, None, None
    if old is not None:
        old.close()
    with _parts_lock:
        if _recaller is not None:
            _recaller.close()
            _recaller = None
        for gateway in _tool_gateways.values():
            gateway.close()
        _tool_gateways.clear()


def status_parts(settings: Settings, session_id: str | None = None, scope_id: str | None = None,
                 backfill: bool = False) -> "StatusParts":
    """Gather status from this process: capture, outbox counters, worker, recall; never raises."""
    from .errors import OutboxError
    from .ops.status import StatusParts

    state = process_state()
    with state.lock:
        api_check = dict(state.api_checks.get(settings.destination(), {}))
        waiting = len(state.journal) if state.journal is not None else 0
    service = _service
    parts = StatusParts(session_id=session_id, scope_id=scope_id, handoff=waiting, api_check=api_check,
                        capture_counters=state.capture_counters.snapshot(),
                        outbox_problem=service.unavailable if service else None)
    try:
        stats, parts.memory_writes = with_existing_outbox(settings, lambda box: (box.stats(), box.memory_writes()),
                                                          (None, {}))
    except OutboxError as exc:
        parts.outbox_problem = parts.outbox_problem or exc.code
        stats = None
    if stats is not None:
        parts.queue_counts, parts.dead_by_code = stats["counts"], stats["dead_by_code"]
        parts.oldest_pending_captured_at = stats["oldest_pending_captured_at"]
        parts.next_attempt_at = stats["next_attempt_at"]
    worker = current_worker()
    if worker is not None:
        parts.worker = worker.state.snapshot()
    if _recaller is not None:
        parts.cache_entries, parts.scope_problem = _recaller.cache_entries(), _recaller.scope_problem
        parts.cache_counters = _recaller.cache_counters()
    if backfill and scope_id:
        parts.scope_backfill, problem = _scope_backfill(settings, scope_id)
        parts.scope_problem = parts.scope_problem or problem
    return parts


def with_existing_outbox(settings: Settings, work: Callable, missing: Any) -> Any:
    """`work(outbox)` on a short-lived connection, or `missing` when nothing was captured yet: reading
    status or dead letters never creates an outbox. Raises OutboxError."""
    import os

    from .storage.outbox import Outbox

    if not os.path.exists(settings.outbox_path):
        return missing
    box = Outbox(settings.outbox_path, busy_timeout_s=5.0, max_rows=settings.max_queued_rows,
                 dead_retention_s=settings.dead_retention_days * 86_400)
    try:
        return work(box)
    finally:
        box.close()


def _scope_backfill(settings: Settings, scope_id: str) -> tuple[dict[str, str], str | None]:
    from .errors import DeliveryError

    try:
        return recaller().gateway(settings).scope_status(scope_id), None
    except DeliveryError as exc:
        return {}, f"scope status unavailable: {exc.code}"


_tool_gateways: dict[tuple, object] = {}


def tool_gateway(settings: Settings):
    """A gateway for the memory tool and the API's checks, one per destination and timeout."""
    from .gateway.gateway import HonchoGateway

    key = (settings.api_url, settings.workspace_id, settings.sdk_timeout_s, settings.user_peer_id,
           settings.agent_peer_id)
    with _parts_lock:
        gateway = _tool_gateways.get(key)
        if gateway is None:
            if len(_tool_gateways) >= 8:  # settings changed often: drop the old clients
                for old in _tool_gateways.values():
                    old.close()
                _tool_gateways.clear()
            gateway = _tool_gateways[key] = HonchoGateway.for_settings(settings)
        return gateway
