"""The records the outbox stores and returns: plain values, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class EventState(str, Enum):
    PENDING = "pending"
    LEASED = "leased"
    DELIVERED = "delivered"
    DEAD = "dead"


@dataclass(slots=True)
class NewEvent:
    """One redacted message to deliver; `id` is stable for the same source."""

    id: str
    destination: str
    workspace_id: str
    session_id: str
    peer_id: str
    role: str
    content: str
    captured_at: float
    scope_id: str | None = None
    ambiguous: bool = False  # Honcho may hold it already: reconcile before sending


@dataclass(slots=True)
class LeasedEvent(NewEvent):
    seq: int = 0
    attempts: int = 0
    error_code: str | None = None  # why the previous attempt failed, if one did
    reconcile_failures: int = 0  # consecutive permanent failures to reconcile it


@dataclass(frozen=True)
class Retry:
    ids: list[str]
    next_attempt_at: float
    code: str
    burn_attempt: bool
    ambiguous: bool = False  # Honcho may hold them: the next attempt reconciles first
    reconcile_failed: bool = False  # asking Honcho failed permanently once more (counts toward the limit)


@dataclass
class Settlement:
    """The fate of one round of sends, recorded together.

    Delivered ids are recorded whoever holds their lease now (Honcho has them); retries and dead letters
    only while the settling owner still holds the lease, so a worker that lost its lease cannot release
    rows another worker is sending.
    """

    delivered: list[str] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)  # (event id, error code)
    retries: list[Retry] = field(default_factory=list)


def group_by_code(dead: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for event_id, code in dead:
        grouped.setdefault(code, []).append(event_id)
    return grouped


@dataclass(frozen=True)
class EnqueueResult:
    inserted: int
    duplicates: int
    refused: int
