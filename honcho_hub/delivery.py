"""Sending one leased session batch: reconcile after an ambiguous failure, split to isolate a bad event.

Runs on a sender thread and touches no database: it returns what happened, and the coordinator
records it. Order within the session is kept: once a send fails (other than a permanent rejection),
that event and every later one of the batch wait for the next attempt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from .errors import DeliveryError, PermanentError
from .outbox import LeasedEvent

# Codes of failures after which the server may already hold the events.
AMBIGUOUS_CODES = frozenset({"timeout", "reset", "unexpected", "http_408"}) | {f"http_{s}" for s in range(500, 600)}


class Gateway(Protocol):
    def send(self, events: Sequence[LeasedEvent]) -> None: ...

    def existing_event_ids(self, session_id: str, event_ids: Sequence[str]) -> set[str]: ...


@dataclass
class BatchResult:
    delivered: list[str] = field(default_factory=list)
    already_there: list[str] = field(default_factory=list)  # found by reconciliation, not resent
    dead: list[tuple[str, str]] = field(default_factory=list)  # (event id, code)
    failed: list[LeasedEvent] = field(default_factory=list)  # to retry, in order
    error: DeliveryError | None = None
    requests: int = 0
    latency_s: float = 0.0


def send_batch(gateway: Gateway, batch: Sequence[LeasedEvent], monotonic=time.monotonic) -> BatchResult:
    """Deliver `batch` (one session, in order) and report each event's fate."""
    result = BatchResult()
    started = monotonic()
    pending = list(batch)
    if any(e.error_code in AMBIGUOUS_CODES for e in pending):
        pending = _reconcile(gateway, pending, result)
    segments = [pending] if pending else []
    while segments and result.error is None:
        segment = segments.pop(0)
        try:
            result.requests += 1
            gateway.send(segment)
            result.delivered.extend(e.id for e in segment)
        except PermanentError as exc:
            if len(segment) == 1:
                result.dead.append((segment[0].id, exc.code))
            else:  # halve until the rejected event stands alone; the others still go, in order
                middle = len(segment) // 2
                segments[:0] = [segment[:middle], segment[middle:]]
        except DeliveryError as exc:
            result.error = exc
            result.failed = segment + [e for rest in segments for e in rest]
    result.latency_s = monotonic() - started
    return result


def _reconcile(gateway: Gateway, pending: list[LeasedEvent], result: BatchResult) -> list[LeasedEvent]:
    """Drop events Honcho already holds; if asking fails, send them all (at-least-once)."""
    try:
        result.requests += 1
        held = gateway.existing_event_ids(pending[0].session_id, [e.id for e in pending])
    except DeliveryError:
        return pending
    result.already_there.extend(e.id for e in pending if e.id in held)
    return [e for e in pending if e.id not in held]
