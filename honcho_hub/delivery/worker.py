"""The delivery worker: one coordinator thread per process, with a bounded pool of sender threads.
The coordinator alone leases and acks; senders only talk HTTP. All logic is in `step()`, which
tests call with an injected clock; the thread only repeats it. Drains, lease renewal, settlements
and what the processes of an outbox share: docs/architecture.md ("Delivery").
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import tenacity

from .. import heap
from ..errors import HonchoRequestError, OutboxBusy, OutboxError, OutboxUnavailable
from ..gateway.gateway import API_URL_INVALID, HonchoGateway
from ..keyed import Keyed, fields
from ..settings.config import Settings
from ..settings.spec import GATEWAY_FIELDS
from ..storage import processes
from ..storage.outbox import LeasedEvent, Outbox, Settlement
from ..storage.processes import BEAT_EVERY_S, Beat
from . import expiry
from .batches import BatchResult, Boarding, send_batch
from .retry import RetryPolicy
from .state import WorkerState

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 600.0
# Per sender: a step returns now and then, so stop() and settings changes apply.
BATCHES_PER_STEP = 25
RENEWALS_PER_LEASE = 3  # leases on the wire are renewed this many times per lease_s
# Waits between settlement attempts while another writer holds the outbox: short, growing, jittered.
SETTLE_WAIT = tenacity.wait_exponential(multiplier=0.05, max=2.0) + tenacity.wait_random(0, 0.05)


_MOVED = ("delivered", "dead", "retried")


def _add(totals: dict, report: StepReport) -> None:
    for name in _MOVED:
        totals[name] += getattr(report, name)


@dataclass
class StepReport:
    leased: int = 0
    delivered: int = 0
    dead: int = 0
    retried: int = 0
    state: str = "idle"
    # Why nothing is delivered: plugin_disabled, api_url_invalid, an error code.
    reason: str | None = None
    detail: str | None = None  # which setting is at fault (its name, never its value)


class DeliveryWorker(threading.Thread):
    """Drains the outbox of the current settings to their destination."""

    # How lifecycle finds us among threads, whatever module generation we are.
    honcho_hub_worker = True

    def __init__(self, settings: Callable[[], Settings], *,
                 enabled: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None,
                 gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 busy_timeout_s: float = 5.0, settle_sleep: Callable[[float], Any] | None = None,
                 on_delivered: Callable[[str, str], None] | None = None,
                 on_step: Callable[[StepReport], None] | None = None,
                 held_s: Callable[[], float] = lambda: 0.0,
                 give_back_memory: Callable[[], object] = heap.give_back_freed_memory) -> None:
        """`on_delivered(destination, session_id)` is called on this worker's thread once per batch
        of a session that Honcho took or was found to hold already: it must be quick, and what it
        raises is logged at debug and otherwise ignored. `on_step(report)` is called on the thread
        after each of its steps (not a drain's from another thread); what it raises is logged.
        `held_s()`: how long the thread's next step waits still (prompt_window.PromptWindow); a
        drain's inline steps do not wait. `give_back_memory()` runs after each prune (heap.py)."""
        super().__init__(name="honcho-hub-delivery", daemon=True)
        self._settings, self._enabled, self._held_s = settings, enabled, held_s
        self._on_delivered, self._on_step = on_delivered, on_step
        self._give_back_memory = give_back_memory
        self._clock, self._monotonic = clock, monotonic
        self._rng = rng or random.Random()
        self._gateway_factory = gateway_factory or _default_gateway
        self.owner = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.state = WorkerState()
        self._wake, self._stop_event, self._stepped = (threading.Event(), threading.Event(),
                                                       threading.Condition())
        # The worker may wait for the write lock longer than capture: it is not on the turn's path.
        self._busy_timeout_s = busy_timeout_s
        self._settle_sleep = settle_sleep or self._stop_event.wait  # a stop cuts a wait short
        self._began = self._finished = 0  # steps of the thread, for drain() from other threads
        self._totals = dict.fromkeys(_MOVED, 0)
        self._last_report = StepReport()
        # Built on first use and rebuilt when the settings they are built from change (keyed.py).
        # The outbox's commits need not be fsynced: captured rows were made durable by capture's own
        # commit, and a lost delivered/leased mark after a power cut only means a resend
        # (at-least-once), never a lost message. Capture keeps the configured durability.
        self._outbox: Keyed[Settings, Outbox] = Keyed(
            fields("outbox_path", "max_queued_rows", "dead_retention_days"),
            lambda s: Outbox.for_settings(s, synchronous="NORMAL",
                                          busy_timeout_s=self._busy_timeout_s,
                                          clock=self._clock), _close_quietly)
        self._gateways: Keyed[Settings, HonchoGateway] = Keyed(
            fields(*GATEWAY_FIELDS, "sdk_timeout_s"),
            lambda s: self._gateway_factory(s), _close_quietly)
        self._pool: Keyed[Settings, ThreadPoolExecutor] = Keyed(
            fields("concurrency"),
            lambda s: ThreadPoolExecutor(max_workers=s.concurrency,
                                         thread_name_prefix="honcho-hub-sender"),
            self._shut_down_pool)
        self._next_prune_mono = 0.0
        self._next_sweep_mono = 0.0  # the first step sweeps expired memories
        self._adopted_for: str | None = None
        # How long the last batch took, to judge what a deadline allows.
        self._batch_s: float | None = None
        self._abandoned: list[Future] = []  # sends left on the wire at a drain's deadline
        self._failure: str | None = None  # the code of the failing steps, logged once per change
        # Heartbeats (docs/architecture.md, "Delivery"): when the next is due (monotonic), the
        # interval this worker promises (from the poll interval), the destination whose circuit it
        # reports, whether a row exists.
        self._next_beat_mono = -math.inf
        self._beat_every_s = BEAT_EVERY_S
        self._beat_destination: str | None = None
        self._beating = False

    # -- thread surface --------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stop_event.is_set() and _process_running():
            held = self._held_s()
            if held > 0:  # a turn's prompt is being built: step once the model is called
                self._wake.wait(held)
                self._wake.clear()
                continue
            with self._stepped:
                self._began += 1
            try:
                report = self.step()
            except Exception as exc:  # the loop boundary: log, back off one poll, keep going
                # The interpreter refuses new thread-pool work as it exits.
                if not _process_running():
                    log.info("honcho worker: the process is exiting; leased events go out again"
                             " after their lease")
                    break
                report = self._failed(exc)
            else:
                self._recovered()
            with self._stepped:
                self._finished, self._last_report = self._began, report
                _add(self._totals, report)
                self._stepped.notify_all()
            self._after_step(report)
            if report.leased == 0 or report.state != "running":
                self._wake.wait(self._poll_s())
            self._wake.clear()
        self._close()

    def wake(self) -> None:
        """Ask for a step now (called after enqueue)."""
        self._wake.set()

    def drain(self, timeout_s: float) -> dict:
        """Deliver until nothing is ready or `timeout_s` passed; returns what moved. Never blocks
        longer."""
        deadline = self._monotonic() + max(0.0, timeout_s)
        if self.is_alive():
            return self._drain_via_thread(deadline)
        totals = dict.fromkeys(_MOVED, 0)
        # Judged by this drain's batches: an earlier slow one must not stall it.
        self._batch_s = None
        while self._monotonic() < deadline:
            report = self.step(deadline)
            _add(totals, report)
            if report.leased == 0:
                break
        return totals

    @property
    def stopping(self) -> bool:
        """Whether stop() was called."""
        return self._stop_event.is_set()

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop and join within `timeout_s`; idempotent. True when the thread has ended."""
        self._stop_event.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(max(0.0, timeout_s))
        if not self.is_alive():
            self._close()
        return not self.is_alive()

    # -- one step --------------------------------------------------------------------------------

    def step(self, deadline: float = math.inf) -> StepReport:
        """Keep up to `concurrency` session batches in flight until nothing is ready (or the step's
        budget is spent); each finished batch is recorded together with leasing its replacement, in
        one transaction, while the other batches are still on the wire.

        With a `deadline` (monotonic), a batch is leased only while the time left exceeds the last
        batch's duration, and the step returns at the deadline: batches whose messages have not left
        are released, those on the wire left leased (`_withdraw`)."""
        settings = self._settings()
        self._beat_every_s = max(BEAT_EVERY_S, settings.poll_interval_s)
        paused = pause_reason(settings, self._enabled)
        if paused is not None:
            return self._report(StepReport(state="paused", reason=paused[0], detail=paused[1]))
        report = StepReport(state="idle")
        outbox = self._outbox.get(settings)
        destination = self._beat_destination = settings.destination()
        # Captured while the URL was unusable: theirs from now on.
        if destination != self._adopted_for:
            outbox.adopt_unsent(settings.unusable_url_destination(), destination)
            self._adopted_for = destination
        self._share_circuit(outbox, destination, settings.circuit_max_s)
        if self.state.circuit(destination).is_open(self._clock()):
            report.state = "circuit_open"
            return self._report(report)
        self._maybe_prune(outbox, settings)
        gateway, pool = self._gateways.get(settings), self._pool.get(settings)
        self._maybe_sweep(outbox, settings, gateway, deadline)
        budget = settings.concurrency * BATCHES_PER_STEP
        in_flight: dict[Future, list[LeasedEvent]] = {}
        # Whether each batch's messages have left (see _withdraw).
        boardings: dict[Future, Boarding] = {}
        settlement = Settlement()
        renew_every = settings.lease_s / RENEWALS_PER_LEASE
        renew_at = self._monotonic() + renew_every
        while True:
            wanted = self._wanted(settings, destination, len(in_flight), budget, deadline)
            renew: list[str] = []
            if in_flight and self._monotonic() >= renew_at:
                renew = [e.id for batch in in_flight.values() for e in batch]
                renew_at = self._monotonic() + renew_every
            try:
                batches = self._settle_and_lease(outbox, settlement, settings, destination, wanted,
                                                 renew, deadline)
            except OutboxError:
                if not (self._stop_event.is_set() or self._past(deadline)):
                    raise
                log.warning("honcho worker: %s while the outbox was locked; unrecorded results and"
                            " %d batches on the wire go out again after their lease, once Honcho"
                            " was asked what it holds",
                            "stopped" if self._stop_event.is_set() else "drain time up",
                            len(in_flight))
                break
            budget -= len(batches)
            for batch in batches:
                report.leased += len(batch)
                boarding = Boarding()
                future = pool.submit(send_batch, gateway, batch, self._monotonic, boarding)
                in_flight[future], boardings[future] = batch, boarding
            if not in_flight:
                break
            if self._past(deadline):
                self._withdraw(outbox, in_flight, boardings)
                break
            if report.state != "running":
                report.state = "running"
                # What a beat written while the batches are on the wire says.
                self.state.show("running")
            done = self._wait(in_flight, min(renew_at, deadline))
            settlement = Settlement()
            for future in done:
                batch = in_flight.pop(future)
                self._record(settlement, settings, destination, batch, future.result(), report)
            if self.state.unshared(destination) != (None, None):
                # the others learn at once, not at our next step
                self._share_circuit(outbox, destination, settings.circuit_max_s)
        return self._report(report)

    def _wait(self, in_flight: dict[Future, list[LeasedEvent]], until: float) -> set[Future]:
        """The batches that finished first, or none at `until` (monotonic); a wait that lasts longer
        than a beat interval beats, so a slow request does not make this process look dead."""
        while True:
            beat_at = self._monotonic() + BEAT_EVERY_S
            done, _ = wait(in_flight, timeout=max(0.0, min(until, beat_at) - self._monotonic()),
                           return_when=FIRST_COMPLETED)
            if done or self._monotonic() >= until:
                return done
            if self._monotonic() >= beat_at:
                self._beat_if_due()

    def _settle_and_lease(self, outbox: Outbox, settlement: Settlement, settings: Settings,
                          destination: str, wanted: int, renew: Sequence[str],
                          deadline: float) -> list[list[LeasedEvent]]:
        """One settle-renew-lease transaction, retried while the outbox is locked or unwritable,
        until it is recorded or a stop is requested or the deadline passed (then the last
        OutboxError is raised)."""
        def sleep(seconds: float) -> None:
            # Never past the deadline.
            self._settle_sleep(min(seconds, max(0.0, deadline - self._monotonic())))

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type((OutboxBusy, OutboxUnavailable)),
            wait=SETTLE_WAIT,
            stop=lambda attempt: self._stop_event.is_set() or self._past(deadline),
            sleep=sleep, before_sleep=_log_settle_retry, reraise=True)
        return retrying(outbox.settle_and_lease, settlement, self.owner, wanted,
                        settings.batch_size, settings.lease_s, destination, renew)

    def _wanted(self, settings: Settings, destination: str, in_flight: int, budget: int,
                deadline: float) -> int:
        """How many new batches to lease: none while stopping, switched off or with the circuit
        open, nor when the time left before a deadline is shorter than the last batch took; one to
        probe. Asked before every lease, so switching the plugin off stops a long step too."""
        circuit = self.state.circuit(destination)
        now = self._clock()
        if self._stop_event.is_set() or budget <= 0 or circuit.is_open(now) or not self._enabled():
            return 0
        if deadline - self._monotonic() <= (self._batch_s or 0.0):
            return 0
        limit = 1 if circuit.probing(now) else settings.concurrency
        return max(0, min(budget, limit - in_flight))

    def _past(self, deadline: float) -> bool:
        return self._monotonic() >= deadline

    def _withdraw(self, outbox: Outbox, in_flight: dict[Future, list[LeasedEvent]],
                  boardings: dict[Future, Boarding]) -> None:
        """At a drain's deadline: the batches whose messages have not left are withdrawn (their
        sends add nothing now) and their rows released, pending again at once; the batches on the
        wire are left to their lease (Honcho may be storing them: they go out again after it,
        once Honcho was asked what it holds). No result of either is recorded, and no send is
        waited for."""
        withdrawn = [f for f in in_flight if boardings[f].withdraw()]
        unsent = [e.id for f in withdrawn for e in in_flight[f]]
        self._abandoned = [f for f in self._abandoned if not f.done()] + list(in_flight)
        try:
            if unsent:
                outbox.release(self.owner, unsent)
        except OutboxError as exc:
            log.info("honcho worker: %d unsent events not released (%s); they go out after their"
                     " lease", len(unsent), exc.code)
        on_wire = len(in_flight) - len(withdrawn)
        if on_wire:
            log.info("honcho worker: drain time up with %d batches on the wire; they go out again"
                     " after their lease, once Honcho was asked what it holds", on_wire)

    def _record(self, settlement: Settlement, settings: Settings, destination: str,
                batch: list[LeasedEvent], result: BatchResult, report: StepReport) -> None:
        if result.requests:
            self._batch_s = result.latency_s
        delivered, dead, retried = self.state.record(result, settlement, destination,
                                                     RetryPolicy.from_settings(settings),
                                                     self._clock(), self._rng)
        report.delivered, report.dead, report.retried = (report.delivered + delivered,
                                                         report.dead + dead,
                                                         report.retried + retried)
        if self._on_delivered is not None and (result.delivered or result.already_there):
            try:
                self._on_delivered(destination, batch[0].session_id)
            except Exception as exc:  # the callback's trouble is its own: delivery goes on
                log.debug("honcho worker: the on_delivered callback failed (%s)",
                          type(exc).__name__)

    # -- what the processes of this outbox share --------------------------------------------------

    def _share_circuit(self, outbox: Outbox, destination: str, max_s: float) -> None:
        """Write what opened or closed `destination`'s unreachable circuit here, then take in the
        one every process of the outbox shares (open at most `max_s` from now: see processes); a
        success here newer than its opening closes it for all. A locked or unusable outbox leaves
        both for the next time (this process keeps its own circuit meanwhile)."""
        opening, closed_at = self.state.unshared(destination)
        try:
            if closed_at is not None:
                processes.close_shared(outbox.db, destination, closed_at)
            if opening is not None:
                processes.open_shared(outbox.db, destination, opening)
            shared = processes.follow_shared(outbox.db, destination, max_s)
            success_at = self.state.snapshot()["metrics"]["last_success_at"]
            if shared is not None and success_at is not None and success_at > shared.opened_at:
                # Honcho answered this process after the opening (a batch that was on the wire
                # then).
                if processes.close_shared(outbox.db, destination, shared.opened_at):
                    shared = None
        except OutboxError as exc:
            log.debug("honcho worker: the shared circuit was not read (%s); trying again at the"
                      " next step", exc.code)
            return
        self.state.follow_shared(destination, shared)

    def _beat_if_due(self) -> None:
        """Write this worker's heartbeat, at most every BEAT_EVERY_S, into the outbox it has open
        (none is opened for it); a locked outbox skips the beat rather than stall delivery."""
        now = self._monotonic()
        outbox = self._outbox.peek()
        if now < self._next_beat_mono or outbox is None or outbox.closed:
            return
        self._next_beat_mono = now + BEAT_EVERY_S
        snapshot = self.state.snapshot()
        metrics, circuit = (snapshot["metrics"],
                            snapshot["circuits"].get(self._beat_destination or ""))
        beat = Beat(self.owner, self._beat_every_s, snapshot["state"], snapshot["reason"],
                    circuit["kind"] if circuit else None, circuit["code"] if circuit else None,
                    circuit["open_until"] if circuit else None, sent=metrics["sent"],
                    reconciled=metrics["reconciled"], failed=metrics["failed"],
                    dead=metrics["dead"], last_success_at=metrics["last_success_at"],
                    last_error_code=metrics["last_error_code"],
                    last_error_at=metrics["last_error_at"])
        try:
            processes.beat(outbox.db, beat)
            self._beating = True
        except OutboxError as exc:
            log.debug("honcho worker: heartbeat skipped (%s)", exc.code)

    def _forget_beat(self) -> None:
        """Delete this worker's heartbeat row at a clean stop; left behind, it goes stale and
        expires."""
        outbox = self._outbox.peek()
        if not self._beating or outbox is None or outbox.closed:
            return
        self._beating = False
        try:
            processes.forget(outbox.db, self.owner)
        except OutboxError as exc:
            log.debug("honcho worker: heartbeat row left to expire (%s)", exc.code)

    # -- helpers ---------------------------------------------------------------------------------

    def _report(self, report: StepReport) -> StepReport:
        self.state.show(report.state, report.reason, report.detail)
        self._beat_if_due()
        return report

    def _failed(self, exc: Exception) -> StepReport:
        """A failed step of the thread: one log line when the failure changes (its code, or for a
        bug the exception type and where it was raised; never its message, which may hold a
        path)."""
        if isinstance(exc, (OutboxError, HonchoRequestError)):
            code, where = exc.code, ""
        else:
            code, where = type(exc).__name__, f" at {_raised_at(exc)}"
        if code != self._failure:
            log.error("honcho worker: delivery stopped (%s%s); trying again every poll", code,
                      where)
            self._failure = code
        return self._report(StepReport(state="error", reason=code))

    def _after_step(self, report: StepReport) -> None:
        if self._on_step is None:
            return
        try:
            self._on_step(report)
        except Exception:  # the loop boundary: what runs after a step never stops delivery
            log.exception("honcho worker: the step's follower failed")

    def _recovered(self) -> None:
        if self._failure is not None:
            log.info("honcho worker: delivering again (after %s)", self._failure)
            self._failure = None

    def _shut_down_pool(self, pool: ThreadPoolExecutor) -> None:
        """Let the sender threads go once their sends end; sends abandoned at a drain's deadline
        finish on their own: waiting would undo the deadline (the gateway closes its client only
        once they are done)."""
        pool.shutdown(wait=not any(not f.done() for f in self._abandoned), cancel_futures=True)
        self._abandoned = []

    def _maybe_prune(self, outbox: Outbox, settings: Settings) -> None:
        if self._monotonic() >= self._next_prune_mono:
            self._next_prune_mono = self._monotonic() + PRUNE_EVERY_S
            outbox.prune(settings.delivered_retention_h * 3600)
            processes.expire(outbox.db)  # and what dead processes left
            self._give_back_memory()  # what this pass and the last ten minutes freed

    def _maybe_sweep(self, outbox: Outbox, settings: Settings, gateway: HonchoGateway,
                     deadline: float) -> None:
        """Delete the memories whose lifetime ended, every expiry_sweep_s (delivery/expiry.py),
        within the step's `deadline` (a drain's); an outbox that cannot be read now waits for the
        next sweep."""
        now = self._monotonic()
        if now < self._next_sweep_mono:
            return
        self._next_sweep_mono = now + settings.expiry_sweep_s
        try:
            expiry.sweep(outbox.db, gateway, settings, self.owner, budget_s=deadline - now,
                         monotonic=self._monotonic)
        except OutboxError as exc:
            log.info("honcho expiry: sweep skipped (%s); trying again in %.0f s", exc.code,
                     settings.expiry_sweep_s)

    def _poll_s(self) -> float:
        try:
            return self._settings().poll_interval_s
        except Exception:
            return 5.0

    def _drain_via_thread(self, deadline: float) -> dict:
        """Wake the thread and wait until a step that began after now found nothing to lease."""
        with self._stepped:
            start = dict(self._totals)
            target = self._began + 1  # a step already running may predate the drain
            self.wake()
            while not (self._finished >= target and self._last_report.leased == 0):
                remaining = deadline - self._monotonic()
                if remaining <= 0 or not self.is_alive():
                    break
                self._stepped.wait(remaining)
            return {name: self._totals[name] - start[name] for name in _MOVED}

    def _close(self) -> None:
        self.state.show("stopped")
        self._forget_beat()
        for resource in (self._pool, self._gateways, self._outbox):
            resource.reset()


def pause_reason(settings: Settings, enabled: Callable[[], bool]) -> tuple[str, str | None] | None:
    """Why nothing may be sent now, and which setting is at fault: the plugin is switched off, or
    the API URL the user configured cannot be used (the key must go nowhere else). Captured events
    wait meanwhile."""
    if not enabled():
        return "plugin_disabled", None
    problem = settings.api_url_problem
    return (API_URL_INVALID, problem) if problem else None


def _process_running() -> bool:
    """False once the interpreter is shutting down (its main thread has ended)."""
    return threading.main_thread().is_alive()


def _raised_at(exc: BaseException) -> str:
    """file:line of the innermost frame that raised `exc` (a module name and a number: no data)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
            if tb is not None else "?")


def _log_settle_retry(attempt: tenacity.RetryCallState) -> None:
    if attempt.attempt_number == 1:  # once per settlement: the busy spell may last a while
        error = attempt.outcome.exception() if attempt.outcome is not None else None
        log.warning("honcho worker: outbox %s; keeping the results in memory and retrying",
                    error.code if isinstance(error, OutboxError) else "unavailable")


def _close_quietly(resource: Outbox | HonchoGateway) -> None:
    try:
        resource.close()
    except (OutboxError, OSError):
        pass  # best-effort cleanup: the replaced or stopped resource is not used again


def _default_gateway(settings: Settings) -> HonchoGateway:
    # Each batch's peers join its session with their roles' flags; the global human is not every
    # chat's.
    return HonchoGateway.for_settings(settings, with_human=False)
