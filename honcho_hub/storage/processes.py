"""The processes that drain one outbox, as the outbox file records them (tables of schema step 6):
a heartbeat row per delivery worker, and the unreachable-server circuit all of them share.

Heartbeats. Each worker writes its own row — pid, host, state, the circuit it holds, its counters, its
last success and error — on its own thread, at most every BEAT_EVERY_S: one UPDATE of one row (an INSERT
the first time), never per message, and waiting at most BEAT_WAIT_S for the write lock, so a locked outbox
costs a skipped beat, never a stalled delivery. A row says how long its worker means to go between beats
(`beat_every_s`, from its poll interval); status shows a row whose beat is older than STALE_BEATS of those
as stale (the process was killed or hangs). A worker that stops cleanly deletes its row; rows whose beat is
older than EXPIRE_S are no longer shown and are deleted by the next prune of any process; at most
MAX_PROCESSES rows are kept (the oldest beats go first). No index: a scan of a few dozen rows costs less.

The shared circuit. When Honcho does not answer one process, it will not answer the others on the same host
either: they wait for the same open-until (each process probes with one batch once it has passed) instead
of each finding out with requests of its own. The later open-until and the higher failure count win, so
the backoff grows as one. A success anywhere closes it — one newer than its opening (a process's success
from before the opening says nothing about the outage). Auth circuits are not shared: a process holding a
stale key must not pause the processes whose key works.

Rows hold ids, times, states, error codes and counts: never a key, message content or a path.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from dataclasses import dataclass, field
from typing import Any

BEAT_EVERY_S = 5.0  # at most one beat per worker this often
BEAT_WAIT_S = 0.25  # the longest a beat (or a circuit write) waits for the write lock: capture's default wait
STALE_BEATS = 3  # a row whose beat is older than this many of its intervals shows as stale
EXPIRE_S = 3_600.0  # rows whose beat is older are hidden, and deleted by the next prune
MAX_PROCESSES = 32  # heartbeat rows kept
MAX_SHARED_CIRCUITS = 64  # one per destination; the longest unchanged go first
MAX_HOST_CHARS = 64

# Column order of the heartbeat table as `listed` returns it (the schema's own order).
COLUMNS = ("owner", "pid", "host", "started_at", "beat_at", "beat_every_s", "state", "reason", "circuit_kind",
           "circuit_code", "circuit_open_until", "sent", "reconciled", "failed", "dead", "last_success_at",
           "last_error_code", "last_error_at")

# What a beat rewrites (everything but who the worker is and when it started).
_BEAT_FIELDS = ("beat_every_s", "state", "reason", "circuit_kind", "circuit_code", "circuit_open_until", "sent",
                "reconciled", "failed", "dead", "last_success_at", "last_error_code", "last_error_at")


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


# -- heartbeats (inside the caller's transaction) -----------------------------------------------------

def beat(conn: sqlite3.Connection, beat: Beat, now: float) -> None:
    """Update `beat`'s row; the first beat (or one after its row expired) inserts it, keeping at most
    MAX_PROCESSES rows."""
    values = tuple(getattr(beat, name) for name in _BEAT_FIELDS)
    assignments = ", ".join(f"{name} = ?" for name in _BEAT_FIELDS)
    if conn.execute(f"UPDATE worker_processes SET beat_at = ?, {assignments} WHERE owner = ?",
                    (now, *values, beat.owner)).rowcount:
        return
    conn.execute(f"INSERT INTO worker_processes (owner, pid, host, started_at, beat_at, {', '.join(_BEAT_FIELDS)})"
                 f" VALUES (?, ?, ?, ?, ?, {', '.join('?' * len(_BEAT_FIELDS))})",
                 (beat.owner, beat.pid, beat.host[:MAX_HOST_CHARS], now, now, *values))
    conn.execute("DELETE FROM worker_processes WHERE owner IN (SELECT owner FROM worker_processes WHERE owner != ?"
                 " ORDER BY beat_at LIMIT max(0, (SELECT count(*) FROM worker_processes) - ?))",
                 (beat.owner, MAX_PROCESSES))


def forget(conn: sqlite3.Connection, owner: str) -> None:
    """Delete a worker's row (it stopped cleanly)."""
    conn.execute("DELETE FROM worker_processes WHERE owner = ?", (owner,))


def expire(conn: sqlite3.Connection, now: float) -> None:
    """Delete heartbeat rows whose beat is older than EXPIRE_S, and shared circuits nobody has touched for as
    long (their destination is no longer used: a process sending there again finds out anew)."""
    conn.execute("DELETE FROM worker_processes WHERE beat_at < ?", (now - EXPIRE_S,))
    conn.execute("DELETE FROM shared_circuits WHERE max(open_until, opened_at) < ?", (now - EXPIRE_S,))


def listed(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every heartbeat row, newest beat first (expired ones included: see `expired`)."""
    rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM worker_processes ORDER BY beat_at DESC LIMIT ?",
                        (MAX_PROCESSES,))
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def stale_after_s(row: dict[str, Any]) -> float:
    """How old a row's beat may be before its process shows as stale."""
    return STALE_BEATS * row["beat_every_s"]


def is_stale(row: dict[str, Any], now: float) -> bool:
    return now - row["beat_at"] > stale_after_s(row)


def expired(row: dict[str, Any], now: float) -> bool:
    return now - row["beat_at"] > EXPIRE_S


# -- the shared unreachable circuit (inside the caller's transaction) ---------------------------------

def shared_circuit(conn: sqlite3.Connection, destination: str) -> SharedCircuit | None:
    row = conn.execute("SELECT code, open_until, failures, opened_at FROM shared_circuits WHERE destination = ?",
                       (destination,)).fetchone()
    return SharedCircuit(*row) if row is not None else None


def open_shared(conn: sqlite3.Connection, destination: str, circuit: SharedCircuit, now: float) -> None:
    """Open (or extend) `destination`'s shared circuit: the later open-until and the higher failure count
    win, so a process's shorter wait never shortens the others'."""
    conn.execute("INSERT INTO shared_circuits (destination, code, open_until, failures, opened_at)"
                 " VALUES (?, ?, ?, ?, ?) ON CONFLICT (destination) DO UPDATE SET code = excluded.code,"
                 " open_until = max(open_until, excluded.open_until), failures = max(failures, excluded.failures),"
                 " opened_at = excluded.opened_at",
                 (destination, circuit.code, circuit.open_until, circuit.failures, now))
    conn.execute("DELETE FROM shared_circuits WHERE destination IN (SELECT destination FROM shared_circuits"
                 " WHERE destination != ? ORDER BY opened_at LIMIT max(0, (SELECT count(*) FROM shared_circuits) - ?))",
                 (destination, MAX_SHARED_CIRCUITS))


def close_shared(conn: sqlite3.Connection, destination: str, opened_until: float) -> bool:
    """Close `destination`'s shared circuit if it was last opened at or before `opened_until` (the time of a
    success, or of the opening a success came after); a later opening stands. Returns whether it closed."""
    return conn.execute("DELETE FROM shared_circuits WHERE destination = ? AND opened_at <= ?",
                        (destination, opened_until)).rowcount > 0
