"""Capture: redact, split and queue one message; no network, bounded waits, never raises.

The adapters hand over plain facts (chat id, role, the host's message id, the text). If the outbox
cannot take the event within the wait budget (another process holds the write lock, the folder is
unavailable), it goes to a small in-memory hand-off that is persisted first, before anything newer,
so per-session order survives. Every outcome is counted for status.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Mapping

from .chunking import clean_text, split_message
from .config import Settings
from .outbox import NewEvent, Outbox
from .outbox_db import OutboxError
from .redact import RedactionError, redact

log = logging.getLogger(__name__)

REOPEN_AFTER_S = 30.0
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


class Role(str, Enum):
    USER = "user"
    AGENT = "agent"


class Outcome(str, Enum):
    QUEUED = "queued"
    DUPLICATE = "duplicate"
    HANDED_OFF = "handed_off"
    SKIPPED_EMPTY = "skipped_empty"
    REFUSED_FULL = "refused_full"
    REFUSED_HANDOFF_FULL = "refused_handoff_full"
    REDACTION_FAILED = "redaction_failed"
    INVALID = "invalid"


@dataclass(frozen=True)
class CaptureRequest:
    """What an adapter knows about one message, in plain values."""

    chat_id: str
    role: Role
    source_id: str  # the host's history message id; '' when the host gave none
    text: Any
    scope_id: str | None = None


def session_id_for(chat_id: str) -> str:
    """Honcho session of an Agent Zero chat: `chat-<id>`, within Honcho's id alphabet and length."""
    return ("chat-" + _UNSAFE_ID.sub("_", str(chat_id)))[:512]


def event_id(chat_id: str, role: str, source_id: str, part: int) -> str:
    """Stable id of one event: the same source always gives the same id."""
    raw = "\x1f".join((str(chat_id), role, source_id, str(part)))
    return "ev_" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]


class CaptureService:
    """Queues captured messages into one outbox file; one per outbox path and process."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 handoff: deque | None = None, counters: dict | None = None) -> None:
        self._settings = settings
        self._clock, self._monotonic = clock, monotonic
        self.handoff: deque = handoff if handoff is not None else deque()
        self.counters: dict = counters if counters is not None else {}
        self._outbox: Outbox | None = None
        self._reopen_at = 0.0
        self.unavailable: str | None = None  # error code while the outbox cannot be used
        self._order = threading.Lock()

    def capture(self, request: CaptureRequest, settings: Settings, secrets: Mapping[str, str] | None = None) -> Outcome:
        """Redact, split and queue one message; returns what happened. Never raises."""
        try:
            events = self._events(request, settings, secrets)
        except RedactionError:
            log.warning("honcho capture: redaction failed; message not queued")
            return self._count(Outcome.REDACTION_FAILED)
        except (TypeError, ValueError):
            return self._count(Outcome.INVALID)
        if not events:
            return self._count(Outcome.SKIPPED_EMPTY)
        return self._count(self._store(events))

    def flush_handoff(self) -> int:
        """Persist hand-off entries in order; returns how many events were stored."""
        if not self._order.acquire(timeout=self._settings.capture_wait_ms / 1000):
            return 0
        try:
            return self._flush_locked()
        finally:
            self._order.release()

    def close(self) -> None:
        """Close the outbox connection (the hand-off stays for whoever reopens)."""
        if self._outbox is not None:
            self._outbox.close()
            self._outbox = None

    # -- internals -------------------------------------------------------------------------------

    def _events(self, request: CaptureRequest, settings: Settings, secrets) -> list[NewEvent]:
        if not isinstance(request.text, str):
            raise TypeError("content is not text")
        text = redact(clean_text(request.text), secrets)
        if not text.strip():
            return []
        role = Role(request.role).value
        source = request.source_id or uuid.uuid4().hex  # no host id: nothing to deduplicate against
        peer = settings.user_peer_id if role == Role.USER.value else settings.agent_peer_id
        now = self._clock()
        return [NewEvent(id=event_id(request.chat_id, role, source, i), destination=settings.destination(),
                         workspace_id=settings.workspace_id, session_id=session_id_for(request.chat_id),
                         peer_id=peer, role=role, content=part, captured_at=now, scope_id=request.scope_id)
                for i, part in enumerate(split_message(text))]

    def _store(self, events: list[NewEvent]) -> Outcome:
        if not self._order.acquire(timeout=self._settings.capture_wait_ms / 1000):
            return self._to_handoff(events)  # another thread of ours is waiting on the database
        try:
            if self.handoff:  # older messages wait there: this one queues behind them
                outcome = self._to_handoff(events)
                self._flush_locked()
                return Outcome.QUEUED if outcome is Outcome.HANDED_OFF and not self.handoff else outcome
            result = self._open().enqueue(events)
        except OutboxError as exc:
            self._note_unavailable(exc)
            return self._to_handoff(events)
        finally:
            self._order.release()
        if result.refused:
            log.warning("honcho capture: outbox full (%d rows); message refused", self._settings.max_queued_rows)
            return Outcome.REFUSED_FULL
        return Outcome.QUEUED if result.inserted else Outcome.DUPLICATE

    def _flush_locked(self) -> int:
        """Persist the whole hand-off in one transaction, oldest first; returns events stored."""
        if not self.handoff:
            return 0
        pending = list(self.handoff)
        try:
            results = self._open().enqueue_batches(pending)
        except OutboxError as exc:
            self._note_unavailable(exc)
            return 0
        for result in results:
            if result.refused:
                break  # still full: keep it in memory rather than drop it
            self.handoff.popleft()
        return sum(r.inserted for r in results)

    def _to_handoff(self, events: list[NewEvent]) -> Outcome:
        if len(self.handoff) >= self._settings.handoff_capacity:
            log.warning("honcho capture: outbox busy and hand-off full; message refused")
            return Outcome.REFUSED_HANDOFF_FULL
        self.handoff.append(events)
        return Outcome.HANDED_OFF

    def _open(self) -> Outbox:
        if self._outbox is not None:
            return self._outbox
        if self._monotonic() < self._reopen_at:
            cooling = OutboxError("outbox unusable; reopening later")
            cooling.code = self.unavailable or "outbox_unavailable"
            raise cooling
        s = self._settings
        try:
            self._outbox = Outbox(s.outbox_path, synchronous=s.outbox_synchronous,
                                  busy_timeout_s=s.capture_wait_ms / 1000, max_rows=s.max_queued_rows,
                                  dead_retention_s=s.dead_retention_days * 86_400, clock=self._clock)
        except OutboxError as exc:
            if exc.code != "outbox_busy":  # busy is momentary (another process migrating, say): no cooldown
                self._reopen_at = self._monotonic() + REOPEN_AFTER_S
            raise
        self.unavailable = None
        return self._outbox

    def _note_unavailable(self, exc: OutboxError) -> None:
        code = getattr(exc, "code", "outbox_error")
        if code != "outbox_busy":
            if self.unavailable != code:
                log.error("honcho capture: outbox unusable (%s); messages wait in memory", code)
            self.unavailable = code
            if self._outbox is not None:
                self._outbox.close()
                self._outbox = None
                self._reopen_at = self._monotonic() + REOPEN_AFTER_S

    def _count(self, outcome: Outcome) -> Outcome:
        self.counters[outcome.value] = self.counters.get(outcome.value, 0) + 1
        return outcome
