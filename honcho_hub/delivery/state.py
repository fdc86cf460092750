"""Process-local delivery state: circuits per destination and the worker's metrics, for status,
and how each finished batch changes them (the retry policy's decision, turned into what the outbox
records). The unreachable circuit is also shared with the other processes of the outbox
(storage/processes.py; how: docs/architecture.md, "Delivery"); auth and missing-SDK circuits stay
this process's own.
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import asdict, dataclass, field, replace

from ..errors import HonchoRequestError
from ..storage.outbox import Retry, Settlement
from ..storage.processes import SharedCircuit
from .batches import BatchResult
from .retry import Action, RetryPolicy, decide

log = logging.getLogger(__name__)

# Destinations remembered; the worker sends to one at a time, the rest are history.
MAX_CIRCUITS = 64


@dataclass
class Circuit:
    """Open while the destination is unreachable, refuses our key, or the SDK is missing."""

    kind: str | None = None  # unreachable, auth, sdk_missing; None when closed
    code: str | None = None
    open_until: float = 0.0
    failures: int = 0  # consecutive openings, for the backoff

    def is_open(self, now: float) -> bool:
        return self.kind is not None and now < self.open_until

    def probing(self, now: float) -> bool:
        """Open but due: the next step sends one batch to find out whether it can close."""
        return self.kind is not None and now >= self.open_until


@dataclass
class Metrics:
    sent: int = 0
    reconciled: int = 0
    # Lookups of which events Honcho holds that failed (nothing was sent).
    reconcile_failures: int = 0
    failed: int = 0
    dead: int = 0
    requests: int = 0
    last_success_at: float | None = None
    last_latency_s: float | None = None
    last_error_code: str | None = None
    last_error_at: float | None = None


@dataclass
class WorkerState:
    """Shared between the coordinator (writes) and status readers; guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    circuits: dict[str, Circuit] = field(default_factory=dict)
    metrics: Metrics = field(default_factory=Metrics)
    state: str = "stopped"  # running, idle, paused, circuit_open, error, stopped
    # paused or error: plugin_disabled, api_url_invalid, or the error code
    reason: str | None = None
    # api_url_invalid: which setting holds the URL ("HONCHO_API_URL: ..."), never its value
    detail: str | None = None
    max_circuits: int = MAX_CIRCUITS
    # The unreachable circuit's changes not yet written for the other processes: the opening (a copy
    # of the circuit), or the time of the success that closed it.
    openings: dict[str, Circuit] = field(default_factory=dict)
    closings: dict[str, float] = field(default_factory=dict)

    def circuit(self, destination: str) -> Circuit:
        with self.lock:
            return self._circuit(destination)

    def _circuit(self, destination: str) -> Circuit:
        circuit = self.circuits.get(destination)
        if circuit is None:
            self._make_room()
            circuit = self.circuits[destination] = Circuit()
        return circuit

    def _make_room(self) -> None:
        """Forget closed circuits first, then the oldest open ones (a forgotten open circuit only
        means that destination, if it ever comes back, is tried at once)."""
        for closed_first in (True, False):
            for destination in [d for d, c in self.circuits.items()
                                if not closed_first or c.kind is None]:
                if len(self.circuits) < self.max_circuits:
                    return
                del self.circuits[destination]

    def show(self, state: str, reason: str | None = None, detail: str | None = None) -> None:
        with self.lock:
            self.state, self.reason, self.detail = state, reason, detail

    def record(self, result: BatchResult, settlement: Settlement, destination: str,
               policy: RetryPolicy, now: float, rng: random.Random) -> tuple[int, int, int]:
        """How one finished batch changes the metrics and the destination's circuit, and what the
        outbox must record of it (added to `settlement`); returns how many events were delivered,
        dead, retried."""
        delivered = result.delivered + result.already_there
        settlement.delivered.extend(delivered)
        settlement.dead.extend(result.dead)
        with self.lock:
            m = self.metrics
            m.requests += result.requests
            m.sent += len(result.delivered)
            m.reconciled += len(result.already_there)
            m.reconcile_failures += int(result.reconcile_failed)
            m.dead += len(result.dead)
            if delivered or result.dead:
                m.last_success_at, m.last_latency_s = now, result.latency_s
        if result.error is not None:
            dead, retried = self._failed(result, result.error, settlement, destination, policy,
                                         now, rng)
            return len(delivered), len(result.dead) + dead, retried
        if delivered or result.dead:
            with self.lock:
                circuit = self.circuits.get(destination)
                if circuit is not None and circuit.kind is not None:
                    log.info("honcho worker: %s circuit closed", circuit.kind)
                    if circuit.kind == "unreachable":
                        self.openings.pop(destination, None)
                        self.closings[destination] = now
                    circuit.kind, circuit.code, circuit.failures = None, None, 0
        return len(delivered), len(result.dead), 0

    def _failed(self, result: BatchResult, error: HonchoRequestError, settlement: Settlement,
                destination: str, policy: RetryPolicy, now: float,
                rng: random.Random) -> tuple[int, int]:
        failed = result.failed
        circuit = self.circuit(destination)
        decision = decide(error, failed[0].attempts, now, policy, rng, circuit.failures,
                          reconcile_failures=(failed[0].reconcile_failures
                                              if result.reconcile_failed else None))
        # Dead without burning an attempt: the lookup can never succeed here.
        if decision.action is Action.DEAD and not decision.burn_attempt:
            dead = {e.id for e in failed}
        else:
            # Attempts are per event: only events that used up theirs are dead; the rest keep
            # their order.
            dead = {e.id for e in failed
                    if decision.burn_attempt and e.attempts + 1 >= policy.max_attempts}
        rest = [e.id for e in failed if e.id not in dead]
        with self.lock:
            self.metrics.failed += len(failed)
            self.metrics.dead += len(dead)
            self.metrics.last_error_code, self.metrics.last_error_at = error.code, now
            if decision.action is Action.CIRCUIT:
                circuit.kind, circuit.code, circuit.open_until = (decision.circuit, error.code,
                                                                  decision.next_attempt_at)
                circuit.failures += 1
                if decision.circuit == "unreachable":
                    self.closings.pop(destination, None)
                    self.openings[destination] = replace(circuit)
        if decision.action is Action.CIRCUIT:
            log.warning("honcho worker: %s circuit open (%s)", decision.circuit, error.code)
        if dead:
            # In capture order.
            settlement.dead.extend((e.id, decision.code) for e in failed if e.id in dead)
            log.error("honcho worker: %d events dead-lettered (%s)", len(dead), decision.code)
        if rest:
            # Events behind the auth circuit stay ready: the circuit alone says when to probe, so
            # resetting it (retry_dead, after the key was fixed) makes the next step probe at once.
            retry_at = now if decision.circuit == "auth" else decision.next_attempt_at
            settlement.retries.append(Retry(rest, retry_at, error.code, decision.burn_attempt,
                                            ambiguous=result.failed_ambiguous,
                                            reconcile_failed=decision.reconcile_failed))
        return len(dead), len(rest)

    def unshared(self, destination: str) -> tuple[SharedCircuit | None, float | None]:
        """What the other processes do not know yet of `destination`'s unreachable circuit: its
        opening, or the time of the success that closed it. Changes for other destinations are
        history (the worker sends to one destination at a time) and are dropped."""
        with self.lock:
            for kept in (self.openings, self.closings):
                for other in [d for d in kept if d != destination]:
                    del kept[other]
            opened = self.openings.get(destination)
            shared = (SharedCircuit(opened.code or "", opened.open_until, opened.failures)
                      if opened else None)
            return shared, self.closings.get(destination)

    def follow_shared(self, destination: str, shared: SharedCircuit | None) -> None:
        """Take the unreachable circuit the processes share (None: closed) once what `unshared`
        returned was written. It replaces this process's own unreachable circuit; an auth or
        missing-SDK one stays."""
        with self.lock:
            self.openings.pop(destination, None)
            self.closings.pop(destination, None)
            circuit = self._circuit(destination)
            if circuit.kind not in (None, "unreachable"):
                return
            if shared is None:
                if circuit.kind is not None:
                    log.info("honcho worker: unreachable circuit closed (Honcho answered a process"
                             " of this outbox)")
                    circuit.kind, circuit.code, circuit.failures = None, None, 0
                return
            if circuit.kind is None:
                log.warning("honcho worker: unreachable circuit open (%s), opened by another"
                            " process of this outbox", shared.code)
            circuit.kind, circuit.code = "unreachable", shared.code
            circuit.open_until, circuit.failures = shared.open_until, shared.failures

    def reset_auth_circuits(self) -> int:
        """Close auth circuits so the next step probes at once (after the key was fixed)."""
        with self.lock:
            opened = [c for c in self.circuits.values() if c.kind == "auth"]
            for c in opened:
                c.open_until = 0.0
            return len(opened)

    def snapshot(self) -> dict:
        """A copy for status: no content, no key, no path."""
        with self.lock:
            return {"state": self.state, "reason": self.reason, "detail": self.detail,
                    "metrics": asdict(self.metrics),
                    "circuits": {d: asdict(c) for d, c in self.circuits.items()
                                 if c.kind is not None}}
