"""The events queue (table `events` of the outbox file): captured events wait here, in capture
order, until Honcho has them. `Outbox` enqueues, leases, settles, releases, prunes and requeues
them, each operation one short transaction. Storage only: which event to retry when is the worker's
decision, and no operation does network I/O (docs/architecture.md, "Storage": row states, heads).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..names import session_id_for
from ..settings.config import Settings
from . import chats
from .db import AUTOCOMMIT, READ, WRITE, Database, reclaim_space, when_existing

# -- records ---------------------------------------------------------------------------------------

class EventState(str, Enum):
    """The `state` column (docs/architecture.md draws how a row moves between them)."""

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
    # The Agent Zero chat and project it was captured in: recorded in `chat_sessions` (not on the
    # row, and never read back on a leased event).
    chat_id: str | None = None
    project: str | None = None


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
    # Asking Honcho failed permanently once more (counts toward the limit).
    reconcile_failed: bool = False


@dataclass
class Settlement:
    """The fate of one round of sends, recorded together.

    Delivered ids are recorded whoever holds their lease now (Honcho has them); retries and dead
    letters only while the settling owner still holds the lease, so a worker that lost its lease
    cannot release rows another worker is sending.
    """

    delivered: list[str] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)  # (event id, error code)
    retries: list[Retry] = field(default_factory=list)


@dataclass(frozen=True)
class EnqueueResult:
    inserted: int
    duplicates: int  # also the events of a forgotten chat captured before its forget (not queued)
    refused: int


@dataclass(frozen=True)
class ForgetRows:
    """A chat's forget as the outbox did it: its own sessions (marked: never leased or queued
    again), those it shares with other chats (a project's, the global one: left alone), the rows
    deleted and those still leased by a live worker (deleted once their sends ended: see
    `drop_forgotten_rows`)."""

    generation: int
    sessions: tuple[str, ...]
    shared: tuple[str, ...]
    deleted: int
    leased: int


# -- the outbox ------------------------------------------------------------------------------------

_LIVE = "('pending', 'leased')"
_COLUMNS = ("id, destination, workspace_id, session_id, peer_id, role, content, captured_at,"
            " scope_id")
MAX_IDS_PER_STATEMENT = 500  # well under SQLite's variable limit
RELEASE_WAIT_S = 0.25  # the longest `release` waits for the write lock: a drain's time is up


class Outbox:
    """The events queue of the outbox file at `path`, its one concept: enqueue, lease, settle,
    release, prune, requeue and read the events (and drop a forgotten chat's); safe to share between
    threads.

    Each operation is one short transaction of the file (`db`, a db.Database, opened here and
    closed by `close`, through which the file's other tables are reached); threads of this process
    queue for the connection, processes for SQLite's write lock, neither longer than
    `busy_timeout_s`."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 0.25,
                 max_rows: int = 10_000, dead_retention_s: float = 30 * 86_400.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = Database(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s,
                           clock=clock)
        self._max_rows = max_rows
        self._dead_retention_s = dead_retention_s

    @classmethod
    def for_settings(cls, settings: Settings, *, busy_timeout_s: float | None = None,
                     synchronous: str | None = None,
                     clock: Callable[[], float] = time.time) -> Outbox:
        """The outbox `settings` name, bounded and kept as they say: the one way to open it from
        settings.

        `busy_timeout_s` defaults to capture's wait (`capture_wait_ms`): callers off the turn's
        path may wait longer. `synchronous` defaults to the configured durability; the worker
        relaxes it (see there)."""
        return cls(settings.outbox_path, synchronous=synchronous or settings.outbox_synchronous,
                   busy_timeout_s=(settings.capture_wait_ms / 1000 if busy_timeout_s is None
                                   else busy_timeout_s),
                   max_rows=settings.max_queued_rows,
                   dead_retention_s=settings.dead_retention_days * 86_400,
                   clock=clock)

    @property
    def closed(self) -> bool:
        return self.db.closed

    def close(self) -> None:
        """Close the file; idempotent."""
        self.db.close()

    # -- capture -----------------------------------------------------------------------------------

    def enqueue_batches(self, batches: Sequence[Sequence[NewEvent]], *,
                        asked_again: Collection[str] = ()) -> list[EnqueueResult]:
        """Store several messages' events in order in one transaction (ignoring ids already
        stored), stopping at the first message that does not fit even after pruning terminal rows.
        `asked_again`: forgotten chats whose messages from before the forget a person asked to
        queue again (backfill's `--include-forgotten`): they go to the chat's current generation
        like later ones.

        Returns one result per stored or refused batch; batches after a refused one are not
        attempted.
        """
        results = []
        with self.db.transaction(WRITE) as (conn, now):
            for events in batches:
                events = _after_forget(conn, events, asked_again)
                if not events:  # a forgotten chat's message from before its forget
                    results.append(EnqueueResult(0, 1, 0))
                    continue
                if not self._has_room(conn, len(events), now):
                    results.append(EnqueueResult(0, 0, len(events)))
                    break
                inserted = 0
                for e in events:
                    inserted += conn.execute(
                        f"INSERT OR IGNORE INTO events ({_COLUMNS}, next_attempt_at, updated_at,"
                        " ambiguous) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (e.id, e.destination, e.workspace_id, e.session_id, e.peer_id, e.role,
                         e.content, e.captured_at, e.scope_id, now, now,
                         int(e.ambiguous))).rowcount
                chat_id = events[0].chat_id
                if inserted and chat_id is not None:
                    chats.record_session(conn, events[0].destination, chat_id,
                                         events[0].session_id, events[0].project,
                                         max(e.captured_at for e in events))
                results.append(EnqueueResult(inserted, len(events) - inserted, 0))
        return results

    # -- delivery ----------------------------------------------------------------------------------

    def settle_and_lease(self, settlement: Settlement, owner: str, count: int, batch_size: int,
                         lease_s: float, destination: str | None = None,
                         renew: Sequence[str] = ()) -> list[list[LeasedEvent]]:
        """The worker's one transaction (one fsync): record finished sends (retries and dead
        letters only of rows `owner` still holds), extend `owner`'s leases of the `renew` ids still
        on the wire, return expired leases to pending (marked ambiguous), and lease up to `count`
        batches of different sessions (each the oldest ready session head and the ready rows behind
        it), oldest head first."""
        with self.db.transaction(WRITE) as (conn, now):
            self._settle(conn, settlement, now, owner)
            self._renew(conn, owner, renew, now + lease_s, now)
            self._recover(conn, now)
            batches: list[list[LeasedEvent]] = []
            while len(batches) < count:
                batch = self._lease_one(conn, owner, batch_size, lease_s, destination, now)
                if not batch:
                    break
                batches.append(batch)
            return batches

    def release(self, owner: str, ids: Sequence[str]) -> int:
        """Return `owner`'s leased rows among `ids`, whose send was withdrawn before anything of
        them left, to pending at once: no attempt counted, their marks (ambiguous, last error)
        kept; returns how many. It waits for the lock only briefly (a drain's time is up): rows it
        cannot release go out after their lease."""
        with self.db.transaction(WRITE, RELEASE_WAIT_S) as (conn, now):
            return self._set(conn, "state = 'pending', lease_owner = NULL,"
                             " lease_expires_at = NULL, updated_at = ?",
                             (now,), list(ids), "state = 'leased' AND lease_owner = ?", (owner,))

    def adopt_unsent(self, old_destination: str, destination: str) -> int:
        """Rows captured for `old_destination` and never sent (the URL could not be used then) go to
        `destination`; returns how many. Only pending rows that were never attempted move."""
        with self.db.transaction(WRITE) as (conn, now):
            return conn.execute(
                "UPDATE events SET destination = ?, updated_at = ?"
                " WHERE destination = ? AND state = 'pending'"
                " AND attempts = 0", (destination, now, old_destination)).rowcount

    def prune(self, delivered_retention_s: float) -> int:
        """Delete delivered rows older than their retention and dead rows older than theirs;
        returns how many. Then, best effort, give their pages back and empty the WAL of their old
        copies, so that a pruned message is gone from the disk too, not only from the table."""
        with self.db.transaction(WRITE) as (conn, now):
            removed = self._prune_terminal(conn, now - delivered_retention_s,
                                           now - self._dead_retention_s, None)
        self.reclaim_space(deleted=removed > 0)
        return removed

    def reclaim_space(self, deleted: bool = True) -> None:
        """Best effort, after rows were deleted: give their pages back and empty the WAL of their
        old copies (secure_delete has zeroed them in the database), so their text is gone from the
        disk too."""
        with self.db.transaction(AUTOCOMMIT) as (conn, now):
            idle = conn.execute(
                f"SELECT 1 FROM events WHERE state IN {_LIVE} LIMIT 1").fetchone() is None
            reclaim_space(conn, queue_idle=idle, deleted=deleted)

    # -- operations --------------------------------------------------------------------------------

    def requeue_dead(self, limit: int) -> int:
        """Give at most `limit` dead letters (oldest first) a fresh set of attempts. Rows Honcho may
        already hold stay marked so: they are reconciled before they are sent."""
        with self.db.transaction(WRITE) as (conn, now):
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM events WHERE state = 'dead' ORDER BY seq LIMIT ?",
                (max(0, int(limit)),))]
            return self._set(conn, "state = 'pending', attempts = 0, reconcile_failures = 0,"
                             " next_attempt_at = ?, error_code = NULL, updated_at = ?",
                             (now, now), ids, "state = 'dead'")

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """Oldest dead letters: id, session, error code, attempts; never their content."""
        with self.db.transaction(READ) as (conn, now):
            rows = conn.execute(
                "SELECT id, session_id, error_code, attempts, updated_at FROM events"
                " WHERE state = 'dead' ORDER BY seq LIMIT ?", (max(0, int(limit)),)).fetchall()
        return [{"id": r[0], "session_id": r[1], "error_code": r[2], "attempts": r[3],
                 "dead_since": r[4]} for r in rows]

    def contents(self, limit: int = 100) -> list[str]:
        """Queued texts, oldest first: for the demo's own temporary outbox, never for status or
        logs."""
        with self.db.transaction(READ) as (conn, now):
            return [r[0] for r in conn.execute(
                "SELECT content FROM events ORDER BY seq LIMIT ?", (limit,))]

    def stats(self) -> dict:
        """Counts by state, dead letters by error code, oldest pending capture time and next attempt
        time: no content, no path. All from one snapshot, so the figures agree with each other."""
        with self.db.transaction(READ) as (conn, now):
            counts = dict(conn.execute(
                "SELECT state, count(*) FROM events GROUP BY state").fetchall())
            oldest, next_at = conn.execute(
                "SELECT min(captured_at), min(next_attempt_at) FROM events"
                " WHERE state = 'pending'").fetchone()
            dead_by_code = dict(conn.execute(
                "SELECT error_code, count(*) FROM events WHERE state = 'dead'"
                " GROUP BY error_code").fetchall())
        return {"counts": {s.value: counts.get(s.value, 0) for s in EventState},
                "dead_by_code": dead_by_code, "oldest_pending_captured_at": oldest,
                "next_attempt_at": next_at}

    # -- forgetting a chat (chats/forget.py runs the whole forget) ---------------------------------

    def begin_forget(self, destination: str, chat_id: str) -> ForgetRows:
        """Forget `chat_id` here, in one transaction: its next messages go to the next generation's
        session; its own sessions (those it was captured into, those of an earlier forget Honcho has
        not confirmed, and its current generation's) are marked, so no row of theirs is leased or
        queued again; their rows are deleted but those a worker holds leased, and the chat's
        mappings go."""
        with self.db.transaction(WRITE) as (conn, now):
            forgotten = chats.mark_forgotten(conn, destination, chat_id, now)
            deleted, leased = _drop_rows(conn, destination, list(forgotten.sessions), now)
            return ForgetRows(forgotten.generation, forgotten.sessions, forgotten.shared, deleted,
                              leased)

    def drop_forgotten_rows(self, destination: str, sessions: Sequence[str]) -> tuple[int, int]:
        """Delete the rows of these (forgotten) sessions that no live lease holds: (deleted, still
        leased). A lease whose time ran out counts as ended: its holder died or stalled."""
        with self.db.transaction(WRITE) as (conn, now):
            return _drop_rows(conn, destination, list(sessions), now)

    # -- the SQL behind the operations (inside the caller's transaction) ---------------------------

    def _has_room(self, conn: sqlite3.Connection, needed: int, now: float) -> bool:
        excess = (conn.execute("SELECT count(*) FROM events").fetchone()[0] + needed
                  - self._max_rows)
        if excess > 0:
            excess -= self._prune_terminal(conn, now, now - self._dead_retention_s, excess)
        return excess <= 0

    def _prune_terminal(self, conn: sqlite3.Connection, delivered_before: float,
                        dead_before: float, limit: int | None) -> int:
        removed = 0
        for state, before in (("delivered", delivered_before), ("dead", dead_before)):
            remaining = -1 if limit is None else limit - removed
            if remaining == 0:
                break
            removed += conn.execute(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events"
                " WHERE state = ? AND updated_at <= ?"
                " ORDER BY updated_at LIMIT ?)", (state, before, remaining)).rowcount
        return removed

    def _settle(self, conn: sqlite3.Connection, settlement: Settlement, now: float,
                owner: str) -> int:
        # See Settlement: only `owner`'s rows.
        held, fence = "state = 'leased' AND lease_owner = ?", (owner,)
        changed = self._set(conn, "state = 'delivered', error_code = NULL, lease_owner = NULL,"
                            " lease_expires_at = NULL, updated_at = ?", (now,),
                            settlement.delivered, f"state IN {_LIVE}")
        dead_by_code: dict[str, list[str]] = {}
        for event_id, code in settlement.dead:
            dead_by_code.setdefault(code, []).append(event_id)
        for code, ids in dead_by_code.items():
            changed += self._set(conn, "state = 'dead', error_code = ?, lease_owner = NULL,"
                                 " lease_expires_at = NULL, updated_at = ?", (code, now), ids,
                                 held, fence)
        for retry in settlement.retries:
            changed += self._set(conn, "state = 'pending', attempts = attempts + ?,"
                                 " next_attempt_at = ?, error_code = ?, ambiguous = ?,"
                                 " reconcile_failures = CASE WHEN ? THEN"
                                 " reconcile_failures + ? ELSE 0 END, lease_owner = NULL,"
                                 " lease_expires_at = NULL, updated_at = ?",
                                 (int(retry.burn_attempt), retry.next_attempt_at, retry.code,
                                  int(retry.ambiguous), int(retry.ambiguous),
                                  int(retry.reconcile_failed), now), retry.ids, held, fence)
        return changed

    def _renew(self, conn: sqlite3.Connection, owner: str, ids: Sequence[str], expires_at: float,
               now: float) -> int:
        return self._set(conn, "lease_expires_at = ?, updated_at = ?", (expires_at, now),
                         list(ids), "state = 'leased' AND lease_owner = ?", (owner,))

    def _lease_one(self, conn: sqlite3.Connection, owner: str, batch_size: int, lease_s: float,
                   destination: str | None, now: float) -> list[LeasedEvent]:
        batch = self._find_batch(conn, batch_size, destination, now)
        self._set(conn, "state = 'leased', lease_owner = ?, lease_expires_at = ?, updated_at = ?",
                  (owner, now + lease_s, now), [e.id for e in batch], "state = 'pending'")
        return batch

    def _find_batch(self, conn: sqlite3.Connection, batch_size: int, destination: str | None,
                    now: float) -> list[LeasedEvent]:
        """The oldest ready session head and the ready rows behind it, in order.

        First among the oldest pending session heads (`session_heads`); failing that, among the
        heads that are ready, by their ready time. A session whose head is in flight costs nothing
        however long its backlog is, nor do sessions whose heads back off beyond the first few."""
        ready = (now, destination, destination)
        head = (conn.execute(_READY_HEAD_NEAR_FRONT, ready).fetchone()
                or conn.execute(_READY_HEAD, ready).fetchone())
        if head is None:
            return []
        rows = conn.execute(
            f"SELECT {_COLUMNS}, seq, attempts, error_code, ambiguous, reconcile_failures, state,"
            " next_attempt_at"
            " FROM events WHERE destination = ? AND session_id = ?"
            f" AND state IN {_LIVE} ORDER BY seq LIMIT ?",
            (*head, batch_size)).fetchall()
        batch = []
        for (event_id, row_destination, workspace_id, session_id, peer_id, role, content,
             captured_at, scope_id, seq, attempts, error_code, ambiguous, reconcile_failures,
             state, next_attempt_at) in rows:
            if state != "pending" or next_attempt_at > now:
                break  # keep order: stop at the first row that is not ready
            batch.append(LeasedEvent(event_id, row_destination, workspace_id, session_id, peer_id,
                                     role, content, captured_at, scope_id,
                                     ambiguous=bool(ambiguous), seq=seq, attempts=attempts,
                                     error_code=error_code,
                                     reconcile_failures=reconcile_failures))
        return batch

    def _recover(self, conn: sqlite3.Connection, now: float) -> int:
        # The holder died or stalled after its request may have reached Honcho: reconcile before
        # resending.
        return conn.execute(
            "UPDATE events SET state = 'pending', ambiguous = 1, lease_owner = NULL,"
            " lease_expires_at = NULL, updated_at = ?"
            " WHERE state = 'leased' AND lease_expires_at <= ?", (now, now)).rowcount

    def _set(self, conn: sqlite3.Connection, assignments: str, params: tuple, ids: list[str],
             guard: str, guard_params: tuple = ()) -> int:
        changed = 0
        for start in range(0, len(ids), MAX_IDS_PER_STATEMENT):
            chunk = ids[start:start + MAX_IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            changed += conn.execute(
                f"UPDATE events SET {assignments} WHERE id IN ({marks}) AND {guard}",
                (*params, *chunk, *guard_params)).rowcount
        return changed


def with_existing_outbox(settings: Settings, work: Callable, missing: Any) -> Any:
    """`work(outbox)` on a short-lived connection, or `missing` when nothing was captured yet:
    reading status or dead letters never creates an outbox (db.with_existing, for the queue). Raises
    OutboxError."""
    return when_existing(settings, Outbox.for_settings, work, missing)


def _after_forget(conn: sqlite3.Connection, events: Sequence[NewEvent],
                  asked_again: Collection[str] = ()) -> Sequence[NewEvent]:
    """One message's events as they may be queued after a forget (inside the enqueue's
    transaction): none when its chat was forgotten after it was captured (it waited in a capture
    journal meanwhile), unless the chat is in `asked_again`, or when its session is a forgotten one;
    moved to the chat's current generation when capture named the chat's first session (capture
    does not know generations: it must not read the outbox on the turn's path)."""
    if not events:
        return events
    first = events[0]
    if first.chat_id is not None:
        forgotten = chats.last_forget(conn, first.destination, first.chat_id)
        if forgotten is not None:
            generation, forgotten_at = forgotten
            if (max(e.captured_at for e in events) <= forgotten_at
                    and first.chat_id not in asked_again):
                return []
            if first.session_id == session_id_for(first.chat_id, 0):
                renamed = session_id_for(first.chat_id, generation)
                events = [dataclasses.replace(e, session_id=renamed) for e in events]
    if chats.is_forgotten_session(conn, events[0].destination, events[0].session_id):
        return []
    return events


def _drop_rows(conn: sqlite3.Connection, destination: str, sessions: list[str],
               now: float) -> tuple[int, int]:
    """Delete these sessions' rows but those a live lease holds: (deleted, still leased)."""
    deleted = leased = 0
    for start in range(0, len(sessions), MAX_IDS_PER_STATEMENT):
        chunk = sessions[start:start + MAX_IDS_PER_STATEMENT]
        marks = ", ".join("?" * len(chunk))
        held = "state = 'leased' AND lease_expires_at > ?"
        deleted += conn.execute(f"DELETE FROM events WHERE destination = ?"
                                f" AND session_id IN ({marks})"
                                f" AND NOT ({held})", (destination, *chunk, now)).rowcount
        leased += conn.execute(f"SELECT count(*) FROM events WHERE destination = ?"
                               f" AND session_id IN ({marks})"
                               f" AND {held}", (destination, *chunk, now)).fetchone()[0]
    return deleted, leased


# How many of the oldest pending session heads the lease looks at before the ready ones by their
# ready time.
NEAR_FRONT_HEADS = 32

# The oldest ready session head among the oldest pending heads (db.py, `session_heads`, kept by
# triggers): found here whenever the heads at the queue's front are ready (the usual case), in time
# that does not grow with the backlog or the number of sessions. One found here is the oldest ready
# head: every head further back was captured later.
_READY_HEAD_NEAR_FRONT = (f"""SELECT destination, session_id FROM (
    SELECT seq, destination, session_id, next_attempt_at FROM session_heads
        INDEXED BY session_heads_pending_by_seq
    WHERE state = 'pending' ORDER BY seq LIMIT {NEAR_FRONT_HEADS}) e
WHERE e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?) AND {chats.NOT_FORGOTTEN}
ORDER BY e.seq LIMIT 1""")

# Otherwise (the heads at the front back off: an outage across many chats) the oldest of the ready
# heads, found through the ready-time index: heads backing off or in flight are never visited,
# however many there are.
_READY_HEAD = (f"""SELECT e.destination, e.session_id FROM session_heads e
    INDEXED BY session_heads_ready
WHERE e.state = 'pending' AND e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?)"""
    f""" AND {chats.NOT_FORGOTTEN}
ORDER BY e.seq LIMIT 1""")
