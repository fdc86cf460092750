"""The lifetimes of conclusions remembered for a while (table `memory_expiries` of the outbox file,
schema step 8). Honcho keeps no metadata on a conclusion, so this table is the only record of when
one ends: a lifetime is added with the memory tool's record of the remember, claimed by one worker
at a time once it is due, settled as deleted or failed, or removed by a pin (docs/reference.md,
"Memories that expire").
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import BadInput, OutboxFull
from .db import READ, WRITE, Database

# A lifetime is a whole number of minutes, hours or days, from a minute (the shortest sweep) to a
# year.
UNITS_S = {"m": 60, "h": 3_600, "d": 86_400}
MIN_LIFETIME_S, MAX_LIFETIME_S = 60, 365 * 86_400
_LIFETIME = re.compile(r"^\s*(\d{1,6})\s*([mhd])\s*$", re.IGNORECASE)
# Rows waiting for their end: a remember beyond this keeps no lifetime and says so. Deleted and
# failed rows (status counts them) are kept up to MAX_SETTLED, the oldest settled dropped first.
MAX_PENDING, MAX_SETTLED = 10_000, 1_000


class ExpiryState(str, Enum):
    PENDING = "pending"
    DELETED = "deleted"  # Honcho deleted it, or held it no longer
    FAILED = "failed"  # Honcho refused the delete every time: it stays in Honcho


@dataclass(frozen=True)
class Due:
    """A conclusion whose lifetime ended, claimed for one worker."""

    conclusion_id: str
    observer_id: str
    observed_id: str
    attempts: int  # failed deletes so far


@dataclass
class Settlement:
    """What a sweep did with the rows it claimed: deleted ones, ones to try again after a wait (with
    the error's code), failed ones (with the code), and ones released untried."""

    deleted: list[str] = field(default_factory=list)
    retry: dict[str, tuple[float, str]] = field(default_factory=dict)  # id -> (wait s, code)
    failed: dict[str, str] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)


def lifetime_s(text: Any) -> int:
    """Seconds of a lifetime written as "90m", "12h" or "7d"; BadInput for anything else or a
    lifetime out of bounds."""
    found = _LIFETIME.match(text) if isinstance(text, str) else None
    seconds = int(found.group(1)) * UNITS_S[found.group(2).lower()] if found else 0
    if not MIN_LIFETIME_S <= seconds <= MAX_LIFETIME_S:
        raise BadInput("`expires_in` must be a whole number of minutes, hours or days, such as"
                       " 90m, 12h or 7d, from 1m to 365d.")
    return seconds


def lifetime_text(seconds: float) -> str:
    """A lifetime as `lifetime_s` reads it, in its largest whole unit ("2h" for 120 minutes)."""
    whole = int(seconds)
    unit = next(u for u in ("d", "h", "m") if whole % UNITS_S[u] == 0 or u == "m")
    return f"{whole // UNITS_S[unit]}{unit}"


def add(conn: sqlite3.Connection, now: float, destination: str, conclusion_id: str,
        observer_id: str, observed_id: str, lifetime: float) -> None:
    """Keep a new conclusion's lifetime, inside the caller's write transaction (memory_log's record
    of its remember); raises OutboxFull when MAX_PENDING lifetimes wait already."""
    waiting = conn.execute("SELECT count(*) FROM memory_expiries WHERE state = 'pending'"
                           ).fetchone()[0]
    if waiting >= MAX_PENDING:
        raise OutboxFull("too many memories wait for their end")
    ends = now + lifetime
    conn.execute("INSERT OR REPLACE INTO memory_expiries (destination, conclusion_id, observer_id,"
                 " observed_id, expires_at, state, next_attempt_at, updated_at)"
                 " VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                 (destination, conclusion_id, observer_id, observed_id, ends, ends, now))


def carry(db: Database, destination: str, from_id: str, to_id: str) -> bool:
    """Give `to_id` the pending end of `from_id` (a correction: the right conclusion ends when the
    wrong one would have); whether `from_id` had one."""
    with db.transaction(WRITE) as (conn, now):
        copied = conn.execute("INSERT OR REPLACE INTO memory_expiries (destination, conclusion_id,"
                              " observer_id, observed_id, expires_at, state, next_attempt_at,"
                              " updated_at) SELECT destination, ?, observer_id, observed_id,"
                              " expires_at, 'pending', expires_at, ? FROM memory_expiries"
                              " WHERE destination = ? AND conclusion_id = ? AND state = 'pending'",
                              (to_id, now, destination, from_id))
        return copied.rowcount > 0


def claim_due(db: Database, destination: str, owner: str, limit: int,
              claim_s: float) -> list[Due]:
    """Claim for `owner`, for `claim_s`, up to `limit` of `destination`'s pending rows that are due
    and not claimed by a live claim, the soonest due first. One write transaction: two processes
    never claim the same row."""
    with db.transaction(WRITE) as (conn, now):
        rows = conn.execute("SELECT conclusion_id, observer_id, observed_id, attempts"
                            " FROM memory_expiries WHERE destination = ? AND state = 'pending'"
                            " AND next_attempt_at <= ? AND (claimed_until IS NULL"
                            " OR claimed_until <= ?) ORDER BY next_attempt_at LIMIT ?",
                            (destination, now, now, max(0, int(limit)))).fetchall()
        conn.executemany("UPDATE memory_expiries SET claimed_by = ?, claimed_until = ?"
                         " WHERE destination = ? AND conclusion_id = ?",
                         [(owner, now + claim_s, destination, r[0]) for r in rows])
    return [Due(*r) for r in rows]


def settle(db: Database, destination: str, owner: str, done: Settlement) -> None:
    """Record what a sweep did with the rows `owner` claimed (a row no longer claimed by `owner`
    is left alone), then drop the oldest settled rows beyond MAX_SETTLED."""
    def mine(ids: Iterable[str]) -> list[tuple[str, str, str]]:
        return [(destination, cid, owner) for cid in ids]
    where = " WHERE destination = ? AND conclusion_id = ? AND claimed_by = ?"
    unclaim = "claimed_by = NULL, claimed_until = NULL"
    with db.transaction(WRITE) as (conn, now):
        conn.executemany(f"UPDATE memory_expiries SET state = 'deleted', {unclaim},"
                         " error_code = NULL, updated_at = ?" + where,
                         [(now, *key) for key in mine(done.deleted)])
        conn.executemany(f"UPDATE memory_expiries SET state = 'failed', attempts = attempts + 1,"
                         f" {unclaim}, error_code = ?, updated_at = ?" + where,
                         [(code, now, destination, cid, owner)
                          for cid, code in done.failed.items()])
        conn.executemany(f"UPDATE memory_expiries SET attempts = attempts + 1, {unclaim},"
                         " next_attempt_at = ?, error_code = ?, updated_at = ?" + where,
                         [(now + wait_s, code, now, destination, cid, owner)
                          for cid, (wait_s, code) in done.retry.items()])
        conn.executemany(f"UPDATE memory_expiries SET {unclaim}" + where, mine(done.released))
        conn.execute("DELETE FROM memory_expiries WHERE rowid IN (SELECT rowid FROM"
                     " memory_expiries WHERE state != 'pending' ORDER BY updated_at DESC"
                     " LIMIT -1 OFFSET ?)", (MAX_SETTLED,))


def pin(db: Database, destination: str, conclusion_id: str) -> str:
    """Remove a conclusion's lifetime: "pinned"; "not_expiring" when it has none (or its end was
    settled already); "deleting" when a worker is deleting it at this moment (too late)."""
    with db.transaction(WRITE) as (conn, now):
        row = conn.execute("SELECT claimed_until FROM memory_expiries WHERE destination = ?"
                           " AND conclusion_id = ? AND state = 'pending'",
                           (destination, conclusion_id)).fetchone()
        if row is None:
            return "not_expiring"
        if row[0] is not None and row[0] > now:
            return "deleting"
        conn.execute("DELETE FROM memory_expiries WHERE destination = ? AND conclusion_id = ?",
                     (destination, conclusion_id))
    return "pinned"


def ends(db: Database, destination: str, conclusion_ids: list[str]) -> dict[str, float]:
    """When each of these conclusions that has a pending lifetime ends (wall epoch s)."""
    if not conclusion_ids:
        return {}
    marks = ", ".join("?" * len(conclusion_ids))
    with db.transaction(READ) as (conn, now):
        return dict(conn.execute(f"SELECT conclusion_id, expires_at FROM memory_expiries"
                                 f" WHERE destination = ? AND state = 'pending'"
                                 f" AND conclusion_id IN ({marks})",
                                 (destination, *conclusion_ids)).fetchall())


def counts(db: Database, destination: str) -> dict[str, int]:
    """How many of `destination`'s lifetimes are pending, ended in a delete, or failed (status)."""
    with db.transaction(READ) as (conn, now):
        found = dict(conn.execute("SELECT state, count(*) FROM memory_expiries"
                                  " WHERE destination = ? GROUP BY state",
                                  (destination,)).fetchall())
    return {state.value: found.get(state.value, 0) for state in ExpiryState}
