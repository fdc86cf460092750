"""The durable outbox: captured events wait here, in capture order, until Honcho has them.

Storage only: which event to retry when is the worker's decision. Every operation is one short
transaction on a connection guarded by a lock; several processes may share the file (WAL, and
BEGIN IMMEDIATE for every write). No operation does network I/O.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Sequence, TypeVar

from . import memory_log
from .memory_log import MemoryWrite
from .records import (EnqueueResult, EventState, LeasedEvent, NewEvent, Retry, Settlement,  # noqa: F401
                             group_by_code)
from ..errors import OutboxBusy, OutboxError
from .db import connect, read_transaction, reclaim_space, translate, write_transaction
from ..settings.config import Settings

T = TypeVar("T")
_LIVE = "('pending', 'leased')"
_COLUMNS = ("id, destination, workspace_id, session_id, peer_id, role, content, captured_at, scope_id")
MAX_IDS_PER_STATEMENT = 500  # well under SQLite's variable limit

# How many of the oldest pending rows the lease looks at before walking session heads instead.
NEAR_FRONT_ROWS = 32

# The oldest ready session head among the oldest pending rows: found here whenever the queue's front is
# ready (the usual case), in time that does not grow with the backlog or the number of sessions.
_READY_HEAD_NEAR_FRONT = f"""SELECT destination, session_id FROM (
    SELECT seq, destination, session_id, next_attempt_at FROM events WHERE state = 'pending'
    ORDER BY seq LIMIT {NEAR_FRONT_ROWS}) e
WHERE e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?) AND NOT EXISTS (SELECT 1 FROM events p
    WHERE p.destination = e.destination AND p.session_id = e.session_id AND p.state IN {_LIVE} AND p.seq < e.seq)
ORDER BY e.seq LIMIT 1"""

# Otherwise (the front is blocked: heads in flight or backing off with their backlogs behind them) the
# head (first live row) of every session, one index seek each: the next session of the same
# destination, else the first session of the next destination. Then the oldest head that is ready.
_READY_HEAD = f"""WITH RECURSIVE heads(seq) AS (
    SELECT (SELECT seq FROM events WHERE state IN {_LIVE} ORDER BY destination, session_id, seq LIMIT 1)
    UNION ALL
    SELECT coalesce(
        (SELECT n.seq FROM events n WHERE n.state IN {_LIVE} AND n.destination = h.destination
         AND n.session_id > h.session_id ORDER BY n.destination, n.session_id, n.seq LIMIT 1),
        (SELECT n.seq FROM events n WHERE n.state IN {_LIVE} AND n.destination > h.destination
         ORDER BY n.destination, n.session_id, n.seq LIMIT 1))
    FROM heads JOIN events h ON h.seq = heads.seq
)
SELECT e.destination, e.session_id FROM heads JOIN events e ON e.seq = heads.seq
WHERE e.state = 'pending' AND e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?)
ORDER BY e.seq LIMIT 1"""


class Outbox:
    """Operations on the outbox file at `path`; safe to share between threads of one process."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 0.25,
                 max_rows: int = 10_000, dead_retention_s: float = 30 * 86_400.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._conn = connect(path, synchronous, busy_timeout_s)
        self._lock = threading.Lock()
        self._busy_timeout_s = busy_timeout_s
        self._max_rows = max_rows
        self._dead_retention_s = dead_retention_s
        self._clock = clock
        self.closed = False

    @classmethod
    def for_settings(cls, settings: Settings, *, busy_timeout_s: float | None = None,
                     synchronous: str | None = None, clock: Callable[[], float] = time.time) -> "Outbox":
        """The outbox `settings` name, bounded and kept as they say: the one way to open it from settings.

        `busy_timeout_s` defaults to capture's wait (`capture_wait_ms`): callers off the turn's path may
        wait longer. `synchronous` defaults to the configured durability; the worker relaxes it (see
        there)."""
        return cls(settings.outbox_path, synchronous=synchronous or settings.outbox_synchronous,
                   busy_timeout_s=settings.capture_wait_ms / 1000 if busy_timeout_s is None else busy_timeout_s,
                   max_rows=settings.max_queued_rows, dead_retention_s=settings.dead_retention_days * 86_400,
                   clock=clock)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._conn.close()

    def enqueue(self, events: Sequence[NewEvent]) -> EnqueueResult:
        """Store one message's events (ignoring ids already stored); all refused when there is no room."""
        if len(events) == 1 and not events[0].ambiguous and self._insert_if_far_from_bound(events[0]):
            return EnqueueResult(1, 0, 0)
        return self.enqueue_batches([events])[0]

    def _insert_if_far_from_bound(self, e: NewEvent) -> bool:
        """The common case in one autocommit statement: a new id, with room below the row bound.

        False means "not inserted here" (a duplicate id, or a full queue); the transactional path then
        decides precisely, pruning terminal rows to make room. Counting the rows costs a few
        microseconds (SQLite walks the smallest index); saving BEGIN/COMMIT round trips keeps capture
        close to a bare insert.
        """
        now = self._clock()
        with self._locked():
            try:
                return self._conn.execute(
                    f"INSERT OR IGNORE INTO events ({_COLUMNS}, next_attempt_at, updated_at)"
                    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM events) < ?",
                    (e.id, e.destination, e.workspace_id, e.session_id, e.peer_id, e.role, e.content,
                     e.captured_at, e.scope_id, now, now, self._max_rows)).rowcount == 1
            except Exception as exc:
                raise translate(exc) from exc

    def enqueue_batches(self, batches: Sequence[Sequence[NewEvent]]) -> list[EnqueueResult]:
        """Store several messages in order in one transaction, stopping at the first that does not fit.

        Returns one result per stored or refused batch; batches after a refused one are not attempted.
        """
        now = self._clock()
        results = []
        with self._tx() as conn:
            for events in batches:
                if not self._has_room(conn, len(events), now):
                    results.append(EnqueueResult(0, 0, len(events)))
                    break
                inserted = 0
                for e in events:
                    inserted += conn.execute(
                        f"INSERT OR IGNORE INTO events ({_COLUMNS}, next_attempt_at, updated_at, ambiguous)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (e.id, e.destination, e.workspace_id, e.session_id, e.peer_id, e.role, e.content,
                         e.captured_at, e.scope_id, now, now, int(e.ambiguous))).rowcount
                results.append(EnqueueResult(inserted, len(events) - inserted, 0))
        return results

    def lease(self, owner: str, batch_size: int, lease_s: float, destination: str | None = None) -> list[LeasedEvent]:
        """Lease the oldest ready batch of one session whose head nobody holds; [] when none is ready."""
        batches = self.lease_batches(owner, 1, batch_size, lease_s, destination)
        return batches[0] if batches else []

    def lease_batches(self, owner: str, count: int, batch_size: int, lease_s: float,
                      destination: str | None = None) -> list[list[LeasedEvent]]:
        """Up to `count` batches of different sessions, oldest head first, in one transaction."""
        return self.settle_and_lease(Settlement(), owner, count, batch_size, lease_s, destination)

    def settle(self, settlement: Settlement) -> int:
        """Record the fate of sent events in one transaction; returns how many rows changed."""
        return self._write(lambda conn, now: self._settle(conn, settlement, now))

    def settle_and_lease(self, settlement: Settlement, owner: str, count: int, batch_size: int, lease_s: float,
                         destination: str | None = None, renew: Sequence[str] = ()) -> list[list[LeasedEvent]]:
        """In one transaction (one fsync): record finished sends (retries and dead letters only of rows
        `owner` still holds), extend `owner`'s leases of the `renew` ids still on the wire, recover
        expired leases, and lease up to `count` new batches."""
        def work(conn, now: float) -> list[list[LeasedEvent]]:
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
        return self._write(work)

    def next_batch(self, batch_size: int, destination: str | None = None) -> list[LeasedEvent]:
        """The batch a lease would take now, without taking it (reads only, from one snapshot)."""
        return self._read(lambda conn, now: self._find_batch(conn, batch_size, destination, now))

    def ack(self, ids: Iterable[str]) -> int:
        """Mark events delivered (also when their lease had expired meanwhile: Honcho has them)."""
        return self.settle(Settlement(delivered=list(ids)))

    def retry_at(self, ids: Iterable[str], next_attempt_at: float, error_code: str, burn_attempt: bool) -> int:
        """Release leased events for a later attempt, counting the attempt only when asked."""
        return self.settle(Settlement(retries=[Retry(list(ids), next_attempt_at, error_code, burn_attempt)]))

    def dead_letter(self, ids: Iterable[str], error_code: str) -> int:
        """Park events that can never be delivered as they are."""
        return self.settle(Settlement(dead=[(i, error_code) for i in ids]))

    def recover_expired(self) -> int:
        """Return leases whose holder died (or stalled past expiry) to pending."""
        with self._tx() as conn:
            return self._recover(conn, self._clock())

    def requeue_dead(self, limit: int) -> int:
        """Give at most `limit` dead letters (oldest first) a fresh set of attempts. Rows Honcho may
        already hold stay marked so: they are reconciled before they are sent."""
        now = self._clock()
        with self._tx() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM events WHERE state = 'dead' ORDER BY seq LIMIT ?", (max(0, int(limit)),))]
            return self._set(conn, "state = 'pending', attempts = 0, reconcile_failures = 0, next_attempt_at = ?,"
                             " error_code = NULL, updated_at = ?", (now, now), ids, "state = 'dead'")

    def adopt_unsent(self, old_destination: str, destination: str) -> int:
        """Rows captured for `old_destination` and never sent (the URL could not be used then) go to
        `destination`; returns how many. Only pending rows that were never attempted move."""
        return self._write(lambda conn, now: conn.execute(
            "UPDATE events SET destination = ?, updated_at = ? WHERE destination = ? AND state = 'pending'"
            " AND attempts = 0", (destination, now, old_destination)).rowcount)

    def prune(self, delivered_retention_s: float) -> int:
        """Delete delivered rows older than their retention and dead rows older than theirs; returns how
        many. Then, best effort, give their pages back and empty the WAL of their old copies, so that a
        pruned message is gone from the disk too, not only from the table."""
        now = self._clock()
        with self._tx() as conn:
            removed = self._prune_terminal(conn, now - delivered_retention_s, now - self._dead_retention_s, None)
        with self._locked():
            try:
                idle = self._conn.execute(f"SELECT 1 FROM events WHERE state IN {_LIVE} LIMIT 1").fetchone() is None
            except Exception as exc:
                raise translate(exc) from exc
            reclaim_space(self._conn, queue_idle=idle, deleted=removed > 0)
        return removed

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """Oldest dead letters: id, session, error code, attempts; never their content."""
        rows = self._read(lambda conn, now: conn.execute(
            "SELECT id, session_id, error_code, attempts, updated_at FROM events WHERE state = 'dead'"
            " ORDER BY seq LIMIT ?", (max(0, int(limit)),)).fetchall())
        return [{"id": r[0], "session_id": r[1], "error_code": r[2], "attempts": r[3], "dead_since": r[4]}
                for r in rows]

    def contents(self, limit: int = 100) -> list[str]:
        """Queued texts, oldest first: for the demo and tests only, never for status or logs."""
        return self._read(lambda conn, now: [
            r[0] for r in conn.execute("SELECT content FROM events ORDER BY seq LIMIT ?", (limit,))])

    def stats(self) -> dict:
        """Counts by state, dead letters by error code, oldest pending capture time and next attempt time:
        no content, no path. All from one snapshot, so the figures agree with each other."""
        def read(conn, now):
            counts = dict(conn.execute("SELECT state, count(*) FROM events GROUP BY state").fetchall())
            oldest, next_at = conn.execute(
                "SELECT min(captured_at), min(next_attempt_at) FROM events WHERE state = 'pending'").fetchone()
            dead_by_code = dict(conn.execute(
                "SELECT error_code, count(*) FROM events WHERE state = 'dead' GROUP BY error_code").fetchall())
            return counts, oldest, next_at, dead_by_code
        counts, oldest, next_at, dead_by_code = self._read(read)
        return {"counts": {s.value: counts.get(s.value, 0) for s in EventState}, "dead_by_code": dead_by_code,
                "oldest_pending_captured_at": oldest, "next_attempt_at": next_at}

    def record_memory_write(self, write: MemoryWrite) -> None:
        """Keep one record of the memory tool's writes; only the newest memory_log.MAX_RECORDS stay."""
        self._write(lambda conn, now: memory_log.insert(conn, write, now))

    def memory_writes(self, latest: int = 3) -> dict:
        """Counts of the kept memory-tool writes and the newest ids, kinds and times; never their text."""
        return self._read(lambda conn, now: memory_log.summary(conn, latest))

    # -- internals -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self):
        """The outbox lock plus one BEGIN IMMEDIATE transaction."""
        with self._locked(), write_transaction(self._conn) as conn:
            yield conn

    @contextmanager
    def _locked(self):
        # Threads of this process queue here; they wait no longer than SQLite would for another process.
        if not self._lock.acquire(timeout=self._busy_timeout_s):
            raise OutboxBusy("outbox is in use by another thread")
        try:
            self._check_open()
            yield
        finally:
            self._lock.release()

    def _check_open(self) -> None:
        if self.closed:
            raise OutboxError("outbox is closed")

    def _has_room(self, conn, needed: int, now: float) -> bool:
        excess = conn.execute("SELECT count(*) FROM events").fetchone()[0] + needed - self._max_rows
        if excess > 0:
            excess -= self._prune_terminal(conn, now, now - self._dead_retention_s, excess)
        return excess <= 0

    def _prune_terminal(self, conn, delivered_before: float, dead_before: float, limit: int | None) -> int:
        removed = 0
        for state, before in (("delivered", delivered_before), ("dead", dead_before)):
            remaining = -1 if limit is None else limit - removed
            if remaining == 0:
                break
            removed += conn.execute(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE state = ? AND updated_at <= ?"
                " ORDER BY updated_at LIMIT ?)", (state, before, remaining)).rowcount
        return removed

    def _read(self, work: Callable[..., T]) -> T:
        """Run `work(conn, now)` in one read transaction (one snapshot) and return its result."""
        now = self._clock()
        with self._locked():
            try:
                with read_transaction(self._conn) as conn:
                    return work(conn, now)
            except Exception as exc:
                raise translate(exc) from exc

    def _write(self, work: Callable[..., T]) -> T:
        """Run `work(conn, now)` in one write transaction and return its result."""
        now = self._clock()
        with self._tx() as conn:
            return work(conn, now)

    def _settle(self, conn, settlement: Settlement, now: float, owner: str | None = None) -> int:
        held = f"state IN {_LIVE}" if owner is None else "state = 'leased' AND lease_owner = ?"
        fence = () if owner is None else (owner,)
        changed = self._set(conn, "state = 'delivered', error_code = NULL, lease_owner = NULL,"
                            " lease_expires_at = NULL, updated_at = ?", (now,), settlement.delivered,
                            f"state IN {_LIVE}")
        for code, ids in group_by_code(settlement.dead).items():
            changed += self._set(conn, "state = 'dead', error_code = ?, lease_owner = NULL, lease_expires_at = NULL,"
                                 " updated_at = ?", (code, now), ids, held, fence)
        for retry in settlement.retries:
            changed += self._set(conn, "state = 'pending', attempts = attempts + ?, next_attempt_at = ?,"
                                 " error_code = ?, ambiguous = ?, reconcile_failures = CASE WHEN ? THEN"
                                 " reconcile_failures + ? ELSE 0 END, lease_owner = NULL, lease_expires_at = NULL,"
                                 " updated_at = ?",
                                 (int(retry.burn_attempt), retry.next_attempt_at, retry.code, int(retry.ambiguous),
                                  int(retry.ambiguous), int(retry.reconcile_failed), now), retry.ids, held, fence)
        return changed

    def _renew(self, conn, owner: str, ids: Sequence[str], expires_at: float, now: float) -> int:
        return self._set(conn, "lease_expires_at = ?, updated_at = ?", (expires_at, now), list(ids),
                         "state = 'leased' AND lease_owner = ?", (owner,))

    def _lease_one(self, conn, owner: str, batch_size: int, lease_s: float, destination: str | None,
                   now: float) -> list[LeasedEvent]:
        batch = self._find_batch(conn, batch_size, destination, now)
        self._set(conn, "state = 'leased', lease_owner = ?, lease_expires_at = ?, updated_at = ?",
                  (owner, now + lease_s, now), [e.id for e in batch], "state = 'pending'")
        return batch

    def _find_batch(self, conn, batch_size: int, destination: str | None, now: float) -> list[LeasedEvent]:
        """The oldest ready session head and the ready rows behind it, in order.

        First among the oldest pending rows; failing that, by walking the heads of the sessions with
        live rows, one index seek per session (a skip scan of `events_live_by_session`), so a session
        whose head is in flight or backing off costs one seek however long its backlog is. A head found
        near the front is the oldest ready one: every head further back was captured later."""
        ready = (now, destination, destination)
        head = (conn.execute(_READY_HEAD_NEAR_FRONT, ready).fetchone()
                or conn.execute(_READY_HEAD, ready).fetchone())
        if head is None:
            return []
        rows = conn.execute(
            f"SELECT {_COLUMNS}, seq, attempts, error_code, ambiguous, reconcile_failures, state, next_attempt_at"
            f" FROM events WHERE destination = ? AND session_id = ? AND state IN {_LIVE} ORDER BY seq LIMIT ?",
            (*head, batch_size)).fetchall()
        batch = []
        for row in rows:
            if row[14] != "pending" or row[15] > now:
                break  # keep order: stop at the first row that is not ready
            batch.append(LeasedEvent(*row[:9], ambiguous=bool(row[12]), seq=row[9], attempts=row[10],
                                     error_code=row[11], reconcile_failures=row[13]))
        return batch

    def _recover(self, conn, now: float) -> int:
        # The holder died or stalled after its request may have reached Honcho: reconcile before resending.
        return conn.execute(
            "UPDATE events SET state = 'pending', ambiguous = 1, lease_owner = NULL, lease_expires_at = NULL,"
            " updated_at = ? WHERE state = 'leased' AND lease_expires_at <= ?", (now, now)).rowcount

    def _set(self, conn, assignments: str, params: tuple, ids: list[str], guard: str, guard_params: tuple = ()) -> int:
        changed = 0
        for start in range(0, len(ids), MAX_IDS_PER_STATEMENT):
            chunk = ids[start:start + MAX_IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            changed += conn.execute(f"UPDATE events SET {assignments} WHERE id IN ({marks}) AND {guard}",
                                    (*params, *chunk, *guard_params)).rowcount
        return changed

