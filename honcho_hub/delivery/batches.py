"""Sending one leased session batch: reconcile when Honcho may hold it already, split to isolate a
bad event. Runs on a sender thread and touches no database: it returns what happened, and the
coordinator records it. How order is kept and why a batch Honcho may hold is looked up before it is
sent: docs/architecture.md ("Delivery").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import HonchoRequestError, PermanentError
from ..gateway.gateway import Message
from ..storage.outbox import LeasedEvent, NewEvent


class Gateway(Protocol):
    def send(self, messages: Sequence[Message],
             boarding: Callable[[], bool] | None = None) -> bool: ...

    def existing_event_ids(self, session_id: str, event_ids: Sequence[str]) -> set[str]: ...


class Boarding:
    """Whether a batch's messages may still leave, decided once: the sender boards right before the
    first one leaves; the coordinator withdraws the batch at a drain's deadline (then releases its
    rows)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided: str | None = None

    def board(self) -> bool:
        """The sender's question: True (the messages leave) unless the batch was withdrawn."""
        return self._decide("boarded")

    def withdraw(self) -> bool:
        """The coordinator's: True (nothing of the batch will leave) unless it has boarded."""
        return self._decide("withdrawn")

    def _decide(self, wanted: str) -> bool:
        with self._lock:
            self._decided = self._decided or wanted
            return self._decided == wanted


@dataclass
class BatchResult:
    delivered: list[str] = field(default_factory=list)
    already_there: list[str] = field(default_factory=list)  # found by reconciliation, not resent
    dead: list[tuple[str, str]] = field(default_factory=list)  # (event id, code)
    failed: list[LeasedEvent] = field(default_factory=list)  # to retry, in order
    error: HonchoRequestError | None = None
    reconcile_failed: bool = False  # `error` came from the lookup: nothing was sent
    requests: int = 0
    latency_s: float = 0.0
    withdrawn: bool = False  # withdrawn before its messages left: nothing of it to record

    @property
    def failed_ambiguous(self) -> bool:
        """Whether Honcho may hold some of `failed`: the next attempt must reconcile first."""
        return self.error is not None and (self.reconcile_failed or self.error.ambiguous)


def send_batch(gateway: Gateway, batch: Sequence[LeasedEvent],
               monotonic: Callable[[], float] = time.monotonic,
               boarding: Boarding | None = None) -> BatchResult:
    """Deliver `batch` (one session, in order) and report each event's fate, unless `boarding`
    withdraws it before its messages leave."""
    boarding = boarding or Boarding()
    result = BatchResult()
    started = monotonic()
    pending = list(batch)
    if any(e.ambiguous for e in pending):
        try:
            pending = _reconcile(gateway, pending, result)
        except HonchoRequestError as exc:
            result.error, result.failed, result.reconcile_failed = exc, pending, True
            pending = []
    segments = [pending] if pending else []
    while segments and result.error is None:
        segment = segments.pop(0)
        try:
            result.requests += 1
            if not gateway.send([as_message(e) for e in segment], boarding.board):
                result.withdrawn = True
                break
            result.delivered.extend(e.id for e in segment)
        except PermanentError as exc:
            if len(segment) == 1:
                result.dead.append((segment[0].id, exc.code))
            else:  # halve until the rejected event stands alone; the others still go, in order
                middle = len(segment) // 2
                segments[:0] = [segment[:middle], segment[middle:]]
        except HonchoRequestError as exc:
            result.error = exc
            result.failed = segment + [e for rest in segments for e in rest]
    result.latency_s = monotonic() - started
    return result


def as_message(event: NewEvent) -> Message:
    """The gateway's message for a stored event: its id (the lookup's key), where it goes and what
    it says."""
    return Message(id=event.id, session_id=event.session_id, peer_id=event.peer_id, role=event.role,
                   content=event.content, created_at=event.captured_at, scope_id=event.scope_id)


def _reconcile(gateway: Gateway, pending: list[LeasedEvent],
               result: BatchResult) -> list[LeasedEvent]:
    """Drop events Honcho already holds; raises HonchoRequestError when the lookup fails."""
    result.requests += 1
    held = gateway.existing_event_ids(pending[0].session_id, [e.id for e in pending])
    result.already_there.extend(e.id for e in pending if e.id in held)
    return [e for e in pending if e.id not in held]
