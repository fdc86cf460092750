"""The delivery worker: one coordinator thread per process, with a bounded pool of sender threads.

The coordinator alone leases and acks; senders only talk HTTP (no transaction or lock is held across
a request). All logic is in `step()`, which tests call directly with an injected clock; the thread
only repeats it, waiting on a wake event (set by enqueue) or the poll timer in between.

While batches are on the wire the coordinator renews their leases every third of `lease_s`, so no
other worker takes them over. A settlement that meets a locked outbox is kept in memory and retried
until it is recorded or a stop is requested; rows it leaves leased are recovered after their lease as
events Honcho may hold, and reconciled before anything is sent again.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import tenacity

from .config import Settings
from .delivery import BatchResult, send_batch
from .honcho_gateway import HonchoGateway
from .outbox import LeasedEvent, Outbox, Retry, Settlement
from .outbox_db import OutboxBusy, OutboxError, OutboxUnavailable
from .policy import Action, RetryPolicy, decide
from .worker_state import WorkerState

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 600.0
BATCHES_PER_STEP = 25  # per sender: a step returns now and then, so stop() and settings changes apply
RENEWALS_PER_LEASE = 3  # leases on the wire are renewed this many times per lease_s
# Waits between settlement attempts while another writer holds the outbox: short, growing, jittered.
SETTLE_WAIT = tenacity.wait_exponential(multiplier=0.05, max=2.0) + tenacity.wait_random(0, 0.05)


_MOVED = ("delivered", "dead", "retried")


def _add(totals: dict, report: "StepReport") -> None:
    for name in _MOVED:
        totals[name] += getattr(report, name)


@dataclass
class StepReport:
    leased: int = 0
    delivered: int = 0
    dead: int = 0
    retried: int = 0
    handoff_flushed: int = 0
    state: str = "idle"


class DeliveryWorker(threading.Thread):
    """Drains the outbox of the current settings to their destination."""

    honcho_hub_worker = True  # how lifecycle finds us among threads, whatever module generation we are

    def __init__(self, settings: Callable[[], Settings], *, enabled: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 handoff_flush: Callable[[Settings], int] | None = None, busy_timeout_s: float = 5.0,
                 settle_sleep: Callable[[float], Any] | None = None) -> None:
        super().__init__(name="honcho-hub-delivery", daemon=True)
        self._settings, self._enabled = settings, enabled
        self._clock, self._monotonic = clock, monotonic
        self._rng = rng or random.Random()
        self._gateway_factory = gateway_factory or _default_gateway
        self._handoff_flush = handoff_flush or (lambda s: 0)
        self.owner = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.state = WorkerState()
        self._wake, self._stop_event, self._stepped = threading.Event(), threading.Event(), threading.Condition()
        # The worker may wait for the write lock longer than capture: it is not on the turn's path.
        self._busy_timeout_s = busy_timeout_s
        self._settle_sleep = settle_sleep or self._stop_event.wait  # a stop cuts a wait short
        self._began = self._finished = 0  # steps of the thread, for drain() from other threads
        self._totals = dict.fromkeys(_MOVED, 0)
        self._last_report = StepReport()
        self._outbox: Outbox | None = None
        self._outbox_key: tuple | None = None
        self._gateway: HonchoGateway | None = None
        self._gateway_key: tuple | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._next_prune_mono = 0.0

    # -- thread surface ------------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stop_event.is_set() and _process_running():
            with self._stepped:
                self._began += 1
            try:
                report = self.step()
            except Exception:  # the loop boundary: log, back off one poll, keep going
                if not _process_running():  # the interpreter refuses new thread-pool work as it exits
                    log.info("honcho worker: the process is exiting; leased events go out again after their lease")
                    break
                log.exception("honcho worker: step failed")
                report = StepReport(state="error")
            with self._stepped:
                self._finished, self._last_report = self._began, report
                _add(self._totals, report)
                self._stepped.notify_all()
            if report.leased == 0 or report.state != "running":
                self._wake.wait(self._poll_s())
            self._wake.clear()
        self._close()

    def wake(self) -> None:
        """Ask for a step now (called after enqueue)."""
        self._wake.set()

    def drain(self, timeout_s: float) -> dict:
        """Deliver until nothing is ready or `timeout_s` passed; returns what moved. Never blocks longer."""
        deadline = self._monotonic() + max(0.0, timeout_s)
        if self.is_alive():
            return self._drain_via_thread(deadline)
        totals = dict.fromkeys(_MOVED, 0)
        while self._monotonic() < deadline:
            report = self.step()
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

    # -- one step ------------------------------------------------------------------------------------

    def step(self) -> StepReport:
        """Keep up to `concurrency` session batches in flight until nothing is ready (or the step's
        budget is spent); each finished batch is recorded together with leasing its replacement, in
        one transaction, while the other batches are still on the wire."""
        settings = self._settings()
        if not self._enabled():
            return self._report(StepReport(state="paused"))
        report = StepReport(handoff_flushed=self._handoff_flush(settings), state="idle")
        outbox = self._open_outbox(settings)
        destination = settings.destination()
        if self.state.circuit(destination).is_open(self._clock()):
            report.state = "circuit_open"
            return self._report(report)
        self._maybe_prune(outbox, settings)
        gateway, pool = self._open_gateway(settings), self._sender_pool(settings.concurrency)
        budget = settings.concurrency * BATCHES_PER_STEP
        in_flight: dict[Future, list[LeasedEvent]] = {}
        settlement = Settlement()
        renew_every = settings.lease_s / RENEWALS_PER_LEASE
        renew_at = self._monotonic() + renew_every
        while True:
            wanted = self._wanted(settings, destination, len(in_flight), budget)
            renew: list[str] = []
            if in_flight and self._monotonic() >= renew_at:
                renew = [e.id for batch in in_flight.values() for e in batch]
                renew_at = self._monotonic() + renew_every
            try:
                batches = self._settle_and_lease(outbox, settlement, settings, destination, wanted, renew)
            except OutboxError:
                if not self._stop_event.is_set():
                    raise
                log.warning("honcho worker: stopped while the outbox was locked; unrecorded results and %d"
                            " batches on the wire go out again after their lease, once Honcho was asked what"
                            " it holds", len(in_flight))
                break
            budget -= len(batches)
            for batch in batches:
                report.leased += len(batch)
                in_flight[pool.submit(send_batch, gateway, batch, self._monotonic)] = batch
            if not in_flight:
                break
            report.state = "running"
            done, _ = wait(in_flight, timeout=max(0.0, renew_at - self._monotonic()), return_when=FIRST_COMPLETED)
            settlement = Settlement()
            for future in done:
                in_flight.pop(future)
                self._record(settlement, settings, destination, future.result(), report)
        return self._report(report)

    def _settle_and_lease(self, outbox: Outbox, settlement: Settlement, settings: Settings, destination: str,
                          wanted: int, renew: Sequence[str]) -> list[list[LeasedEvent]]:
        """One settle-renew-lease transaction, retried while the outbox is locked or unwritable, until it
        is recorded or a stop is requested (then the last OutboxError is raised)."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type((OutboxBusy, OutboxUnavailable)), wait=SETTLE_WAIT,
            stop=lambda attempt: self._stop_event.is_set(), sleep=self._settle_sleep,
            before_sleep=_log_settle_retry, reraise=True)
        return retrying(outbox.settle_and_lease, settlement, self.owner, wanted, settings.batch_size,
                        settings.lease_s, destination, renew)

    def _wanted(self, settings: Settings, destination: str, in_flight: int, budget: int) -> int:
        """How many new batches to lease: none while stopping, switched off or with the circuit open;
        one to probe. Asked before every lease, so switching the plugin off stops a long step too."""
        circuit = self.state.circuit(destination)
        now = self._clock()
        if self._stop_event.is_set() or budget <= 0 or circuit.is_open(now) or not self._enabled():
            return 0
        limit = 1 if circuit.probing(now) else settings.concurrency
        return max(0, min(budget, limit - in_flight))

    def _record(self, settlement: Settlement, settings: Settings, destination: str, result: BatchResult,
                report: StepReport) -> None:
        now = self._clock()
        delivered = result.delivered + result.already_there
        settlement.delivered.extend(delivered)
        settlement.dead.extend(result.dead)
        with self.state.lock:
            m = self.state.metrics
            m.requests += result.requests
            m.sent += len(result.delivered)
            m.reconciled += len(result.already_there)
            m.reconcile_failures += int(result.reconcile_failed)
            m.dead += len(result.dead)
            if delivered or result.dead:
                m.last_success_at, m.last_latency_s = now, result.latency_s
        report.delivered += len(delivered)
        report.dead += len(result.dead)
        if result.error is not None:
            self._retry(settlement, settings, destination, result, report)
        elif delivered or result.dead:
            self._close_circuit(destination)

    def _retry(self, settlement: Settlement, settings: Settings, destination: str, result: BatchResult,
               report: StepReport) -> None:
        now, policy = self._clock(), RetryPolicy.from_settings(settings)
        failed, error = result.failed, result.error
        circuit = self.state.circuit(destination)
        decision = decide(error, failed[0].attempts, now, policy, self._rng, circuit.failures,
                          reconcile_failures=failed[0].reconcile_failures if result.reconcile_failed else None)
        if decision.action is Action.DEAD and not decision.burn_attempt:  # the lookup can never succeed here
            dead = {e.id for e in failed}
        else:  # attempts are per event: only events that used up theirs are dead; the rest keep their order
            dead = {e.id for e in failed if decision.burn_attempt and e.attempts + 1 >= policy.max_attempts}
        rest = [e.id for e in failed if e.id not in dead]
        with self.state.lock:
            self.state.metrics.failed += len(failed)
            self.state.metrics.dead += len(dead)
            self.state.metrics.last_error_code, self.state.metrics.last_error_at = error.code, now
            if decision.action is Action.CIRCUIT:
                circuit.kind, circuit.code, circuit.open_until = decision.circuit, error.code, decision.next_attempt_at
                circuit.failures += 1
        if decision.action is Action.CIRCUIT:
            log.warning("honcho worker: %s circuit open (%s)", decision.circuit, error.code)
        if dead:
            settlement.dead.extend((e.id, decision.code) for e in failed if e.id in dead)  # in capture order
            report.dead += len(dead)
            log.error("honcho worker: %d events dead-lettered (%s)", len(dead), decision.code)
        if rest:
            # Events behind the auth circuit stay ready: the circuit alone says when to probe, so resetting
            # it (retry_dead, after the key was fixed) makes the next step probe at once.
            retry_at = now if decision.circuit == "auth" else decision.next_attempt_at
            settlement.retries.append(Retry(rest, retry_at, error.code, decision.burn_attempt,
                                            ambiguous=result.failed_ambiguous,
                                            reconcile_failed=decision.reconcile_failed))
            report.retried += len(rest)

    # -- helpers -------------------------------------------------------------------------------------

    def _close_circuit(self, destination: str) -> None:
        with self.state.lock:
            circuit = self.state.circuits.get(destination)
            if circuit is not None and circuit.kind is not None:
                log.info("honcho worker: %s circuit closed", circuit.kind)
                circuit.kind, circuit.code, circuit.failures = None, None, 0

    def _report(self, report: StepReport) -> StepReport:
        with self.state.lock:
            self.state.state = report.state
        return report

    def _open_outbox(self, settings: Settings) -> Outbox:
        key = (settings.outbox_path, settings.outbox_synchronous, settings.max_queued_rows)
        if self._outbox is None or key != self._outbox_key:
            if self._outbox is not None:
                self._outbox.close()
            # Its commits need not be fsynced: captured rows were made durable by capture's own commit,
            # and a lost delivered/leased mark after a power cut only means a resend (at-least-once),
            # never a lost message. Capture keeps the configured durability.
            self._outbox = Outbox(settings.outbox_path, synchronous="NORMAL",
                                  busy_timeout_s=self._busy_timeout_s, max_rows=settings.max_queued_rows,
                                  dead_retention_s=settings.dead_retention_days * 86_400, clock=self._clock)
            self._outbox_key = key
        return self._outbox

    def _open_gateway(self, settings: Settings) -> HonchoGateway:
        key = (settings.api_url, settings.workspace_id, settings.sdk_timeout_s, settings.user_peer_id,
               settings.agent_peer_id)
        if self._gateway is None or key != self._gateway_key:
            if self._gateway is not None:
                self._gateway.close()
            self._gateway, self._gateway_key = self._gateway_factory(settings), key
        return self._gateway

    def _sender_pool(self, size: int) -> ThreadPoolExecutor:
        if self._pool is None or size != self._pool_size:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="honcho-hub-sender")
            self._pool_size = size
        return self._pool

    def _maybe_prune(self, outbox: Outbox, settings: Settings) -> None:
        if self._monotonic() >= self._next_prune_mono:
            self._next_prune_mono = self._monotonic() + PRUNE_EVERY_S
            outbox.prune(settings.delivered_retention_h * 3600)

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
        with self.state.lock:
            self.state.state = "stopped"
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for resource in (self._gateway, self._outbox):
            if resource is not None:
                try:
                    resource.close()
                except (OutboxError, OSError):
                    pass  # best-effort cleanup at shutdown
        self._gateway = self._outbox = None


def _process_running() -> bool:
    """False once the interpreter is shutting down (its main thread has ended)."""
    return threading.main_thread().is_alive()


def _log_settle_retry(attempt: tenacity.RetryCallState) -> None:
    if attempt.attempt_number == 1:  # once per settlement: the busy spell may last a while
        error = attempt.outcome.exception() if attempt.outcome is not None else None
        log.warning("honcho worker: outbox %s; keeping the results in memory and retrying",
                    getattr(error, "code", "unavailable"))


def _default_gateway(settings: Settings) -> HonchoGateway:
    return HonchoGateway.for_settings(settings)
