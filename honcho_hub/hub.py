"""The composition root: one `Hub` per module generation owns the process's services.

It builds, starts and stops them; the adapters (the bridge, the command line) get it from
`current()` and pass its parts down. See docs/architecture.md, Composition root.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .capture import kept
from .capture.service import CaptureService, journal_for
from .capture.writer import CaptureWriter
from .chats.sessions import ChatSessions
from .delivery import lifecycle
from .keyed import Keyed, KeyedMany, fields
from .ops import purge as purge_files
from .prompt_window import PromptWindow
from .runtime import in_background, join_background, process_state, warn_once
from .settings import log_level
from .settings.config import Settings
from .settings.spec import GATEWAY_FIELDS
from .storage.marker import MarkerWatch

if TYPE_CHECKING:
    from .delivery.worker import DeliveryWorker, StepReport
    from .gateway.gateway import HonchoGateway
    from .gateway.registrar import ScopeRegistrar
    from .ops.alerts import Notice
    from .ops.status import StatusParts
    from .recall.recaller import Recaller

log = logging.getLogger(__name__)

RESTART_WAIT_S = 60.0
PURGE = "purge"  # the hold's reason while the sidebar's purge keeps the plugin stopped
STOP_S = 10.0  # Hub.stop waits this long in all for its threads to end
# one per destination and timeout; settings changed that often drop the old clients
MAX_TOOL_GATEWAYS = 8
# What a capture service is built from: a change of any of these rebuilds it (the journal follows).
CAPTURE_KEY = fields("outbox_path", "outbox_synchronous", "max_queued_rows", "journal_capacity",
                     "dead_retention_days")
TOOL_GATEWAY_KEY = fields(*GATEWAY_FIELDS, "sdk_timeout_s")


# Set once this generation's delivery modules (and the SDK) are imported.
_delivery_loaded = threading.Event()
# What delivery needs beyond capture's requirements (requirements.txt), by import name.
DELIVERY_PACKAGES = ("httpx", "honcho")


def _no_settings() -> Settings:
    raise RuntimeError("the Hub has no settings source yet: call reconfigure(settings=...) first")


class Hub:
    """The process's services for this module generation (docs/architecture.md, Composition
    root)."""

    def __init__(self, settings: Callable[[], Settings] = _no_settings,
                 enabled: Callable[[], bool] = lambda: True,
                 replay_secrets: Callable[[str | None], dict] | None = None,
                 notify: Callable[[Notice], None] | None = None) -> None:
        self.settings, self.enabled, self.notify = settings, enabled, notify
        if replay_secrets is not None:
            kept.REPLAY_SECRETS.put(process_state(), replay_secrets)
        self._capture: Keyed[Settings, CaptureService] = Keyed(CAPTURE_KEY, self._build_capture)
        self._tool_gateways: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            TOOL_GATEWAY_KEY, _build_gateway, MAX_TOOL_GATEWAYS)
        self._worker: DeliveryWorker | None = None
        self._worker_lock = threading.Lock()
        self._successor: threading.Thread | None = None
        self._recaller: Recaller | None = None
        # The marker beside the outbox, followed by recall and the chats' sessions together:
        # whichever sees it move first makes the other drop what it holds.
        self._marker = MarkerWatch()
        self._chats: ChatSessions | None = None
        self._registrar: ScopeRegistrar | None = None
        self._parts_lock = threading.Lock()
        # A typed message holds the writer's and the worker's passes until the turn's model call.
        self.prompt_window = PromptWindow(on_close=self._prompt_built)

    # -- lifecycle -------------------------------------------------------------------------------

    def reconfigure(self, settings: Callable[[], Settings] | None = None,
                    enabled: Callable[[], bool] | None = None,
                    replay_secrets: Callable[[str | None], dict] | None = None,
                    notify: Callable[[Notice], None] | None = None) -> Hub:
        """Set where the global settings, the plugin's enabled state and a project's secrets (to
        replay a dead process's journal) come from, and how the host shows a notice
        (`watch_memory`). Cheap: the host calls it before each use. Services follow the new
        settings at their next use (each rebuilds what its key says changed)."""
        if settings is not None:
            self.settings = settings
        if enabled is not None:
            self.enabled = enabled
        if notify is not None:
            self.notify = notify
        if replay_secrets is not None:
            kept.REPLAY_SECRETS.put(process_state(), replay_secrets)
        return self

    def start(self) -> None:
        """Start the capture writer and (off the caller's thread the first time) the delivery
        worker."""
        self.ensure_worker()
        self.ensure_writer()

    def stop(self, timeout_s: float = STOP_S) -> bool:
        """Stop every thread this Hub started, within `timeout_s` in all, and close what it opened;
        True when every thread has ended (one whose request still hangs ends with it). The next use
        starts them again.

        In this order: the background starts under way (each would start a thread after the stop),
        the delivery worker and its senders (they report deliveries to recall), the scope registrar,
        the capture writer (its passes use the capture service), the recall pools and the chats'
        reader; then the capture service and the tool's clients. The journal and counters stay with
        the process."""
        deadline = time.monotonic() + max(0.0, timeout_s)

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        ended = join_background(left())
        successor = self._successor
        if successor is not None:
            successor.join(left())  # it would start a worker once the older ones have gone
            ended = ended and not successor.is_alive()
        with self._worker_lock:
            worker, self._worker = self._worker, None
        with self._parts_lock:
            registrar, self._registrar = self._registrar, None
            recaller, self._recaller = self._recaller, None
            chats, self._chats = self._chats, None
        for thread in (worker, registrar, _take_writer()):
            if thread is not None:
                thread.stop(left())
                ended = ended and not thread.is_alive()
        if recaller is not None:
            ended = recaller.close(left()) and ended  # a load left running ends at its deadline
        if chats is not None:
            ended = chats.close(left()) and ended  # a read of the local outbox: milliseconds
        self._capture.reset()
        self._tool_gateways.reset()
        return ended

    # -- capture ---------------------------------------------------------------------------------

    def capture(self, settings: Settings) -> CaptureService:
        """The capture service for these settings; rebuilt when its storage settings change. Every
        service of the process shares one journal, so messages waiting in it follow the outbox
        setting."""
        log_level.follow(settings)  # every captured message brings the newest settings
        return self._capture.get(settings)

    def _build_capture(self, settings: Settings) -> CaptureService:
        state = process_state()
        with state.lock:
            journal = journal_for(settings, kept.JOURNAL.of(state))
            kept.JOURNAL.put(state, journal)
        return CaptureService(settings, journal=journal, counters=kept.COUNTERS.of(state),
                              replay_secrets=_replay_secrets)

    def flush_capture(self) -> None:
        """Move what the capture journal holds into the outbox now (a drain delivers what was typed
        a moment ago, before the writer thread's pass); never raises."""
        service = self._capture.peek()
        if service is not None:
            service.write_pending()

    def ensure_writer(self) -> CaptureWriter:
        """The process's capture writer, started on first use; one of an older module generation is
        replaced (both share the journal's write lock, so their passes never overlap). While a hold
        keeps the plugin's threads stopped (a switch-off, an uninstall, an update) it is given
        unstarted: the journal keeps what a capture racing the stop accepted, and the first call
        after the hold starts it."""
        state = process_state()
        with state.lock:
            writer = kept.WRITER.of(state)
            if writer is None or type(writer) is not CaptureWriter or writer.ended():
                if writer is not None:
                    writer.stop(0)
                writer = CaptureWriter(lambda: self.capture(self.settings()),
                                       lambda: self.settings(),
                                       held_s=self.prompt_window.held_s)
                kept.WRITER.put(state, writer)
            if not writer.started() and self.may_start():
                writer.start()
            return writer

    # -- delivery --------------------------------------------------------------------------------

    def ensure_worker(self) -> DeliveryWorker | None:
        """Start the process's delivery worker unless one runs; cheap and non-blocking when it does.

        The first call imports the delivery modules (the SDK: hundreds of milliseconds) on a
        background thread, never on the caller's, which may be Agent Zero's event loop; until then
        it returns None.
        """
        current = self._worker
        if current is not None and current.is_alive() and not current.stopping:
            return current
        if not self.may_start():
            return None  # not even the background import: nothing of ours starts while held
        if not _delivery_loaded.is_set():
            in_background("worker-start", self._start_worker)
            return None
        return self._start_worker()

    def load_delivery(self) -> bool:
        """Import the delivery modules (the SDK) now, on this thread; False when the plugin's
        requirements are missing (logged once). For threads that may wait: never Agent Zero's event
        loop."""
        try:  # imported here, not at the top: capture must work without httpx and the SDK
            importlib.import_module(f"{__package__}.delivery.worker")
        except ImportError as exc:
            warn_once("worker_import",
                      "honcho: delivery is off until the plugin's requirements are installed"
                      " (%s is missing); captured messages wait in the outbox",
                      _missing_package(exc))
            return False
        _delivery_loaded.set()
        return True

    def start_worker_now(self) -> DeliveryWorker | None:
        """`ensure_worker` for a thread that may wait (the sidebar's wake, never Agent Zero's event
        loop): the delivery modules are imported on it, so a worker starts at once unless something
        holds it."""
        self.load_delivery()
        return self.ensure_worker()

    def _start_worker(self) -> DeliveryWorker | None:
        """Start the worker unless one of this module generation runs.

        A worker left by an older generation (Agent Zero re-imported the plugin) is asked to stop,
        and the new one starts once it has gone, so there are never two: on a later call, or from a
        short-lived helper thread that waits for the old one (else a lone message after a reload
        would wait for the next call, possibly the job loop a minute later). Never blocks.
        """
        if not self.load_delivery():
            return None
        from .delivery.worker import DeliveryWorker
        if not self.may_start():
            return None  # stopped for an update or an uninstall: not restarted by the next message

        current = self._worker
        if current is not None and current.is_alive() and not current.stopping:
            return current
        with self._worker_lock:
            # This generation's scope registrar is one of the plugin's threads but not a delivery
            # worker: it neither stops nor waits for the worker.
            for thread in self._other_plugin_threads():
                if type(thread) is DeliveryWorker and not thread.stopping:
                    self._worker = thread  # ours, started before this Hub was built: adopt it
                    return thread
                thread.stop(0)  # older generation or stopping: signal only; the turn must not wait
            older = self._other_plugin_threads()
            if older:
                self._start_after(older)
                return None
            # Settings are reloaded at every step, their debug setting applied.
            self._worker = DeliveryWorker(log_level.following(lambda: self.settings()),
                                          enabled=lambda: self.enabled(),
                                          on_delivered=self._delivered,
                                          on_step=self._after_step,
                                          held_s=self.prompt_window.held_s)
            self._worker.start()
            return self._worker

    def _other_plugin_threads(self) -> list[lifecycle.PluginThread]:
        return [t for t in lifecycle.plugin_workers() if t is not self._registrar]

    def _start_after(self, older: list[lifecycle.PluginThread]) -> None:
        """One helper thread (call under _worker_lock) that starts the worker once `older` have
        ended."""
        def start_when_gone() -> None:
            deadline = time.monotonic() + RESTART_WAIT_S
            for thread in older:
                thread.join(max(0.0, deadline - time.monotonic()))
            self._start_worker()  # still alive past the deadline: the job loop tries again

        if self._successor is None or not self._successor.is_alive():
            self._successor = threading.Thread(target=start_when_gone, name="honcho-hub-restart",
                                               daemon=True)
            self._successor.start()

    def _delivered(self, destination: str, session_id: str) -> None:
        """The worker delivered a session's messages: recall follows Honcho's derivation of them."""
        recaller = self._recaller
        if recaller is not None:
            recaller.note_delivered(destination, session_id)

    def _after_step(self, report: StepReport) -> None:
        """After each step of the worker's thread: the memory watch, when it is due, and, unless
        delivery is paused, recall's polls of Honcho's derivation (so status follows it between
        turns)."""
        self.watch_memory(time.monotonic())
        recaller = self._recaller
        if recaller is not None and report.state != "paused":
            recaller.follow_derivation(self.settings())

    def _prompt_built(self) -> None:
        """The turn's model call ended the prompt window: the held passes go now."""
        writer = kept.WRITER.of(process_state())
        if writer is not None:
            writer.wake()
        self.wake_worker()

    def wake_worker(self) -> None:
        """Nudge the worker after an enqueue (no-op when none runs)."""
        worker = self._worker
        if worker is not None:
            worker.wake()

    def may_start(self) -> bool:
        """Whether a thread of the plugin may start now: not while a hold keeps them stopped (a
        switch-off, an uninstall, an update: lifecycle.hold_restart). The one check of every part
        the Hub gives out; cheap (no I/O)."""
        return not lifecycle.restart_held()

    def purged(self) -> bool:
        """Whether the sidebar's purge holds the plugin in this process (see `purge`): capture
        queues nothing and the memory tool keeps no record until `resume`. Cheap (no I/O)."""
        return lifecycle.held_for(PURGE)

    def worker(self) -> DeliveryWorker | None:
        """The running worker of this process, if any."""
        worker = self._worker
        return worker if worker is not None and worker.is_alive() else None

    # -- recall, scopes, the tool ----------------------------------------------------------------

    def recaller(self) -> Recaller:
        """The Recaller (its cache starts over when Agent Zero re-imports the plugin). Its first
        call imports the SDK: call it off the event loop (see `ready_recaller`). While held
        (`may_start`) its loads start no thread: a turn gets what is cached, a prefetch is not
        started."""
        from .recall.recaller import Recaller  # imported here: capture must work without the SDK

        with self._parts_lock:
            if self._recaller is None:
                self._recaller = Recaller(marker=self._marker, may_start=self.may_start)
            return self._recaller

    def chats(self) -> ChatSessions:
        """Which Honcho session each chat names now (chats/sessions.py). Cheap and safe on the event
        loop: it needs no SDK, and its reads run on a thread of its own, not started while held
        (`may_start`: a chat is then named with the generation last known)."""
        with self._parts_lock:
            if self._chats is None:
                self._chats = ChatSessions(self._marker, may_start=self.may_start)
            return self._chats

    def ready_recaller(self, then: Callable[[Recaller], object] | None = None) -> Recaller | None:
        """The Recaller if it exists (cheap, safe on the event loop); else None, and with `then`,
        builds it on a background thread and calls `then(recaller)` there (not while held:
        `may_start`)."""
        if self._recaller is not None:
            return self._recaller
        if then is not None and self.may_start():
            def build_then() -> None:
                try:
                    made = self.recaller()
                except ImportError:
                    return  # running degraded (no SDK): no recall
                then(made)
            in_background("recall-start", build_then)
        return None

    def registrar(self) -> ScopeRegistrar | None:
        """The scope registrar thread, started on first use (or again after a stop); not started
        while an update or uninstall holds the plugin's threads stopped (then None or the stopped
        one)."""
        from .gateway.gateway import HonchoGateway
        from .gateway.registrar import ScopeRegistrar

        with self._parts_lock:
            if ((self._registrar is None or not self._registrar.is_alive())
                    and self.may_start()):
                self._registrar = ScopeRegistrar(HonchoGateway.for_settings)
                self._registrar.start()
            return self._registrar

    def tool_gateway(self, settings: Settings) -> HonchoGateway:
        """A gateway for the memory tool and the API's checks, one per destination and timeout."""
        return self._tool_gateways.get(settings)

    # -- status ----------------------------------------------------------------------------------

    def status_parts(self, settings: Settings, session_id: str | None = None,
                     scope_id: str | None = None, backfill: bool = False) -> StatusParts:
        """What this process knows for status (see ops.status.gather_parts); never raises."""
        from .ops.status import gather_parts

        service = self._capture.peek()
        recaller = self._recaller
        # The full status asks Honcho (through recall's client), every request within one
        # check_timeout_s; the light one reads nothing.
        def honcho() -> HonchoGateway:
            return self.recaller().gateway(settings)

        backfill_of = (lambda scope: honcho().scope_status(scope)) if backfill else None
        peers_of = ((lambda sid, peers: honcho().session_peer_flags(sid, peers))
                    if backfill else None)
        parts = gather_parts(settings, process_state(), session_id=session_id,
                             scope_id=scope_id,
                             outbox_problem=service.unavailable if service else None,
                             worker=self.worker(), recaller=recaller, scope_backfill=backfill_of,
                             session_peers=peers_of,
                             deadline_s=settings.check_timeout_s if backfill else None)
        parts.purged = self.purged()
        return parts

    def watch_memory(self, now: float) -> None:
        """Whether memory stopped working or works again (ops/alerts.py), at most every
        WATCH_EVERY_S of `now` (monotonic), while the plugin and its `notifications` setting are
        on (a toggle file changed by hand leaves the worker's thread running, paused): each notice
        goes to `notify`. Reads local state only (the outbox, the worker, recall's counters): call
        it off Agent Zero's event loop (the worker's thread does)."""
        from .ops import alerts
        from .ops.status import build_status

        notify, settings = self.notify, self.settings()
        watch = alerts.WATCH.of(process_state())
        if (notify is None or not settings.notifications or not self.enabled()
                or not alerts.due(watch, now)):
            return
        status = build_status(settings, self.status_parts(settings), time.time())
        for notice in alerts.observe(watch, alerts.findings(status), now):
            notify(notice)


def _build_gateway(settings: Settings) -> HonchoGateway:
    from .gateway.gateway import HonchoGateway  # imported here: capture must work without the SDK

    return HonchoGateway.for_settings(settings)


def _take_writer() -> CaptureWriter | None:
    """The process's capture writer, which its next use replaces (one of any module generation)."""
    state = process_state()
    with state.lock:
        writer = kept.WRITER.of(state)
        kept.WRITER.put(state, None)
    return writer


def _missing_package(exc: ImportError) -> str:
    """The package whose absence made the delivery modules' import fail. Not always `exc.name`: a
    thread that waited for another's failed import of the same modules gets the half-made module it
    left, and its error names that module of ours."""
    for package in DELIVERY_PACKAGES:
        try:
            importlib.import_module(package)
        except ImportError:
            return package
    return exc.name or "a module"


def _replay_secrets(project: str | None) -> dict:
    provider = kept.REPLAY_SECRETS.of(process_state())
    return dict(provider(project) or {}) if provider is not None else {}


_hub: Hub | None = None
_hub_lock = threading.Lock()


def current() -> Hub:
    """This module generation's Hub, built on first use (Agent Zero re-importing the plugin builds a
    new one around the same process state)."""
    global _hub
    hub = _hub
    if hub is None:
        with _hub_lock:
            if _hub is None:
                _hub = Hub()
            hub = _hub
    return hub


def halt(reason: str, timeout_s: float) -> dict[str, Any]:
    """Stop every thread of the plugin, of any module generation, within `timeout_s` in all, and
    keep them from starting again (uninstall for good; a switch-off until `lifecycle.release_hold`
    with the same `reason`). The delivery workers' stop report (lifecycle.stop_workers)."""
    started = time.monotonic()
    report = lifecycle.stop_workers(drain_s=0.0, stop_s=timeout_s, hold_s=math.inf, reason=reason)
    shutdown(max(0.0, timeout_s - (time.monotonic() - started)))
    return report


def purge_survey(settings: Settings) -> dict[str, Any]:
    """What the sidebar's purge would remove, and why it would refuse unforced (ops/purge.py's
    survey, this process's journal left out of the live processes)."""
    path, waiting = _own_journal()
    return purge_files.survey(settings, own_journal=path, in_journal=waiting)


def purge(settings: Settings, *, force: bool, timeout_s: float) -> dict[str, Any]:
    """The sidebar's purge, in the process that runs the plugin: refused as the command line's is
    (messages waiting, in the outbox or this process's journal, or another live process) unless
    `force`, and then nothing stops. Else the plugin's threads are halted as uninstall halts them
    and held stopped, this process's journal is closed, and the files go (ops/purge.py). Capture
    stays paused (`Hub.purged`), so nothing re-creates them, until `resume` or the plugin's
    modules load again (a restart, an update); a purge refused after the halt resumes at once."""
    before = purge_survey(settings)
    if purge_files.refuses(before, force):
        return {**before, "state": purge_files.REFUSED}
    halt(PURGE, timeout_s)
    path, waiting = _own_journal()
    if force or not waiting:
        _close_journal()
    report = purge_files.purge(settings, force=force, own_journal=path, in_journal=waiting)
    if report["state"] != purge_files.PURGED:
        resume()
    return report


def resume() -> bool:
    """End the purge's hold in this process and start the plugin's threads again unless another
    hold (a switch-off, an update, an uninstall) still stands; whether they were started."""
    lifecycle.release_hold(PURGE)
    if lifecycle.restart_held():
        return False
    hub = current()
    hub.start_worker_now()
    hub.ensure_writer()
    return True


def _own_journal() -> tuple[str, int]:
    """This process's journal file ('' when none is open) and the messages it holds that are not
    in the outbox yet."""
    state = process_state()
    with state.lock:
        journal = kept.JOURNAL.of(state)
    if journal is None or not journal.is_open:
        return "", 0
    return journal.path, len(journal)


def _close_journal() -> None:
    """Close this process's journal and forget it (its file is then removed with the others); the
    next capture after `resume` opens a new one."""
    state = process_state()
    with state.lock:
        journal = kept.JOURNAL.of(state)
        kept.JOURNAL.put(state, None)
    if journal is not None:
        with journal.writing:  # no writer pass half-way (the halt stopped the writer)
            journal.close()


def shutdown(timeout_s: float = STOP_S) -> bool:
    """Stop this generation's Hub, if one was built (uninstall, the command line's exit, tests),
    waiting at most `timeout_s`; True when every thread it started has ended."""
    hub = _hub
    return hub.stop(timeout_s) if hub is not None else True
