"""The processes that drain one outbox, as the outbox file records them (schema step 6 in db.py): a
heartbeat row per delivery worker, and the unreachable-server circuit all of them share. No row is
obeyed blindly: one a worker would not write is ignored and pruned. Rows hold ids, times, states,
error codes and counts, never a key, content or a path (docs/architecture.md, "Storage").
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import OutboxBusy
from .db import READ, WRITE, Database

BEAT_EVERY_S = 5.0  # at most one beat per worker this often
# The longest a beat (or a circuit write) waits for the write lock: capture's default wait.
BEAT_WAIT_S = 0.25
STALE_BEATS = 3  # a row whose beat is older than this many of its intervals shows as stale
EXPIRE_S = 3_600.0  # rows whose beat is older are hidden, and deleted by the next prune
MAX_PROCESSES = 32  # heartbeat rows kept
MAX_SHARED_CIRCUITS = 64  # one per destination; the longest unchanged go first
MAX_HOST_CHARS = 64
MAX_TEXT_CHARS = 200  # an id, state or code a row may hold
MAX_EPOCH_S = 1e11  # wall times past this (the year 5138) are no process's clock
MAX_COUNT = 2**53

# Column order of the heartbeat table as `listed` returns it (the schema's own order).
COLUMNS = ("owner", "pid", "host", "started_at", "beat_at", "beat_every_s", "state", "reason",
           "circuit_kind", "circuit_code", "circuit_open_until", "sent", "reconciled", "failed",
           "dead", "last_success_at", "last_error_code", "last_error_at")

# What a beat rewrites (everything but who the worker is and when it started).
_BEAT_FIELDS = ("beat_every_s", "state", "reason", "circuit_kind", "circuit_code",
                "circuit_open_until", "sent", "reconciled", "failed", "dead", "last_success_at",
                "last_error_code", "last_error_at")


def host_name() -> str:
    """This machine's name as rows record it (bounded)."""
    return socket.gethostname()[:MAX_HOST_CHARS]


@dataclass(frozen=True)
class Beat:
    """What one worker says of itself at a beat."""

    owner: str  # the worker's lease owner: unique per worker
    beat_every_s: float
    state: str
    reason: str | None = None
    circuit_kind: str | None = None
    circuit_code: str | None = None
    circuit_open_until: float | None = None
    sent: int = 0
    reconciled: int = 0
    failed: int = 0
    dead: int = 0
    last_success_at: float | None = None
    last_error_code: str | None = None
    last_error_at: float | None = None
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=host_name)


@dataclass(frozen=True)
class SharedCircuit:
    """The unreachable circuit of one destination, as every process of the outbox sees it."""

    code: str  # unreachable, connect_timeout, timeout, reset
    open_until: float  # wall epoch s: no process sends before, then each probes with one batch
    failures: int  # consecutive openings, for the backoff
    opened_at: float = 0.0  # when it was opened or last extended (the outbox's clock then)


# -- what a row may hold ---------------------------------------------------------------------------

def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT_CHARS


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _time(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 <= value <= MAX_EPOCH_S)


def _interval(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0 < value <= EXPIRE_S)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


# Each column's check, in COLUMNS order (NaN never reaches them: SQLite stores it as NULL).
_PROCESS_CHECKS = (_text, _count, _text, _time, _time, _interval, _text, _optional(_text),
                   _optional(_text), _optional(_text), _optional(_time), _count, _count, _count,
                   _count, _optional(_time), _optional(_text), _optional(_time))
_CIRCUIT_COLUMNS = ("code", "open_until", "failures", "opened_at")
_CIRCUIT_CHECKS = (_text, _time, _count, _time)


def _parses(checks: Sequence[Callable[[Any], bool]], row: Sequence[Any]) -> bool:
    """Whether every value of `row` is one a process of the plugin writes (the bounds also refuse
    inf)."""
    return all(check(value) for check, value in zip(checks, row, strict=True))


def _drop_unparsed(conn: sqlite3.Connection, table: str, columns: Sequence[str],
                   checks: Sequence[Callable[[Any], bool]]) -> None:
    bad = [row[0] for row in conn.execute(f"SELECT rowid, {', '.join(columns)} FROM {table}")
           if not _parses(checks, row[1:])]
    conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(rowid,) for rowid in bad])


# -- heartbeats ------------------------------------------------------------------------------------
# Writes wait at most BEAT_WAIT_S for the lock (then OutboxBusy: the caller skips them).

def beat(db: Database, beat: Beat) -> None:
    """Record a worker's heartbeat: update its row; the first beat (or one after its row expired)
    inserts it, keeping at most MAX_PROCESSES rows."""
    with db.transaction(WRITE, BEAT_WAIT_S) as (conn, now):
        _beat(conn, beat, now)


def _beat(conn: sqlite3.Connection, beat: Beat, now: float) -> None:
    values = tuple(getattr(beat, name) for name in _BEAT_FIELDS)
    assignments = ", ".join(f"{name} = ?" for name in _BEAT_FIELDS)
    if conn.execute(f"UPDATE worker_processes SET beat_at = ?, {assignments} WHERE owner = ?",
                    (now, *values, beat.owner)).rowcount:
        return
    conn.execute("INSERT INTO worker_processes (owner, pid, host, started_at, beat_at,"
                 f" {', '.join(_BEAT_FIELDS)})"
                 f" VALUES (?, ?, ?, ?, ?, {', '.join('?' * len(_BEAT_FIELDS))})",
                 (beat.owner, beat.pid, beat.host[:MAX_HOST_CHARS], now, now, *values))
    conn.execute("DELETE FROM worker_processes WHERE owner IN (SELECT owner FROM worker_processes"
                 " WHERE owner != ? ORDER BY beat_at"
                 " LIMIT max(0, (SELECT count(*) FROM worker_processes) - ?))",
                 (beat.owner, MAX_PROCESSES))


def forget(db: Database, owner: str) -> None:
    """Delete a worker's row (it stopped cleanly)."""
    with db.transaction(WRITE, BEAT_WAIT_S) as (conn, now):
        conn.execute("DELETE FROM worker_processes WHERE owner = ?", (owner,))


def expire(db: Database) -> None:
    """Delete rows that do not parse; heartbeat rows whose beat is older than EXPIRE_S, and shared
    circuits nobody has touched for as long (their destination is no longer used: a process sending
    there again finds out anew). A beat dated ahead of now is dated now: if its process beats no
    more, it expires from here."""
    with db.transaction(WRITE) as (conn, now):
        _expire(conn, now)


def _expire(conn: sqlite3.Connection, now: float) -> None:
    _drop_unparsed(conn, "worker_processes", COLUMNS, _PROCESS_CHECKS)
    _drop_unparsed(conn, "shared_circuits", _CIRCUIT_COLUMNS, _CIRCUIT_CHECKS)
    conn.execute("UPDATE worker_processes SET beat_at = ? WHERE beat_at > ?", (now, now))
    conn.execute("DELETE FROM worker_processes WHERE beat_at < ?", (now - EXPIRE_S,))
    conn.execute("DELETE FROM shared_circuits WHERE max(open_until, opened_at) < ?",
                 (now - EXPIRE_S,))


def listed(db: Database) -> list[dict[str, Any]]:
    """Every heartbeat row that parses, newest beat first (expired ones included: see `expired`);
    ids, times, states, codes and counts only."""
    with db.transaction(READ) as (conn, now):
        rows = [dict(zip(COLUMNS, row, strict=True)) for row in conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM worker_processes") if _parses(_PROCESS_CHECKS, row)]
    return sorted(rows, key=lambda row: row["beat_at"], reverse=True)[:MAX_PROCESSES]


def stale_after_s(row: dict[str, Any]) -> float:
    """How old a row's beat may be before its process shows as stale."""
    return STALE_BEATS * row["beat_every_s"]


def is_stale(row: dict[str, Any], now: float) -> bool:
    return now - row["beat_at"] > stale_after_s(row)


def expired(row: dict[str, Any], now: float) -> bool:
    return now - row["beat_at"] > EXPIRE_S


# -- the shared unreachable circuit ----------------------------------------------------------------
# Reads and writes wait at most BEAT_WAIT_S for the lock, as beats do.

def shared_circuit(db: Database, destination: str) -> SharedCircuit | None:
    """`destination`'s shared circuit as its row says (for status); None when closed or when the
    row does not parse."""
    with db.transaction(READ, BEAT_WAIT_S) as (conn, now):
        row = _circuit_row(conn, destination)
    return SharedCircuit(*row) if row is not None and _parses(_CIRCUIT_CHECKS, row) else None


def follow_shared(db: Database, destination: str, max_s: float) -> SharedCircuit | None:
    """`destination`'s shared circuit as a worker honours it: open at most `max_s` from now; None
    when closed. A row that says more (a clock running ahead) is bounded for every process, one that
    does not parse deleted; while another writer holds the outbox the bound holds here only, and a
    later reading writes it."""
    with db.transaction(READ, BEAT_WAIT_S) as (conn, now):
        found, untrusted = _bounded_shared(conn, destination, now, max_s)
    if untrusted:
        try:
            with db.transaction(WRITE, BEAT_WAIT_S) as (conn, now):
                found = _bound_shared(conn, destination, now, max_s)
        except OutboxBusy:
            pass
    return found


def _bounded_shared(conn: sqlite3.Connection, destination: str, now: float,
                   max_s: float) -> tuple[SharedCircuit | None, bool]:
    """`destination`'s shared circuit as far as a row may impose it — None when closed or when its
    row does not parse; open at most `max_s` from `now`, opened no later than `now` — and whether
    the row says more than that (then `_bound_shared` makes it say this for every process)."""
    row = _circuit_row(conn, destination)
    if row is None:
        return None, False
    if not _parses(_CIRCUIT_CHECKS, row):
        return None, True
    found = SharedCircuit(*row)
    bounded = replace(found, open_until=min(found.open_until, now + max_s),
                      opened_at=min(found.opened_at, now))
    return bounded, bounded != found


def _bound_shared(conn: sqlite3.Connection, destination: str, now: float,
                  max_s: float) -> SharedCircuit | None:
    """Inside a write: `destination`'s shared circuit as `_bounded_shared` reads it, its row
    rewritten to say so (deleted when it does not parse). A row dated a day ahead thus holds
    delivery back `max_s` from its first reading, not from every reading."""
    found, untrusted = _bounded_shared(conn, destination, now, max_s)
    if untrusted and found is None:
        conn.execute("DELETE FROM shared_circuits WHERE destination = ?", (destination,))
    elif untrusted and found is not None:
        conn.execute("UPDATE shared_circuits SET open_until = ?, opened_at = ?"
                     " WHERE destination = ?", (found.open_until, found.opened_at, destination))
    return found


def _circuit_row(conn: sqlite3.Connection, destination: str) -> tuple | None:
    return conn.execute(f"SELECT {', '.join(_CIRCUIT_COLUMNS)} FROM shared_circuits"
                        " WHERE destination = ?", (destination,)).fetchone()


def open_shared(db: Database, destination: str, circuit: SharedCircuit) -> None:
    """Open (or extend) `destination`'s shared circuit: the later open-until and the higher failure
    count win, so a process's shorter wait never shortens the others' (a row that does not parse
    counts for none)."""
    with db.transaction(WRITE, BEAT_WAIT_S) as (conn, now):
        _open_shared(conn, destination, circuit, now)


def _open_shared(conn: sqlite3.Connection, destination: str, circuit: SharedCircuit,
                 now: float) -> None:
    found = _circuit_row(conn, destination)
    if found is not None and not _parses(_CIRCUIT_CHECKS, found):
        conn.execute("DELETE FROM shared_circuits WHERE destination = ?", (destination,))
    conn.execute("INSERT INTO shared_circuits (destination, code, open_until, failures, opened_at)"
                 " VALUES (?, ?, ?, ?, ?) ON CONFLICT (destination)"
                 " DO UPDATE SET code = excluded.code,"
                 " open_until = max(open_until, excluded.open_until),"
                 " failures = max(failures, excluded.failures),"
                 " opened_at = excluded.opened_at",
                 (destination, circuit.code, circuit.open_until, circuit.failures, now))
    conn.execute("DELETE FROM shared_circuits WHERE destination IN (SELECT destination"
                 " FROM shared_circuits WHERE destination != ? ORDER BY opened_at"
                 " LIMIT max(0, (SELECT count(*) FROM shared_circuits) - ?))",
                 (destination, MAX_SHARED_CIRCUITS))


def close_shared(db: Database, destination: str, opened_until: float) -> bool:
    """Close `destination`'s shared circuit if it was last opened at or before `opened_until` (the
    time of a success, or of the opening a success came after); a later opening stands. Returns
    whether it closed."""
    with db.transaction(WRITE, BEAT_WAIT_S) as (conn, now):
        return conn.execute("DELETE FROM shared_circuits WHERE destination = ? AND opened_at <= ?",
                            (destination, opened_until)).rowcount > 0
