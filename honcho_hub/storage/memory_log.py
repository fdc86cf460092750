"""The local record of what the memory tool wrote to Honcho (table `memory_writes` of the outbox
file, schema step 4): every conclusion `remember` created, every one `forget` deleted, every card
`profile` replaced and every `restore`, with what the memory inspector needs to show and undo it.
The newest MAX_RECORDS are kept; only the inspector reads their text (docs/architecture.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from ..settings.config import Settings
from . import expiries
from .db import READ, WRITE, Database

MAX_RECORDS = 1_000
# How long keeping a record waits for the outbox's write lock; the write itself is done.
KEEP_WAIT_S = 1.0


class WriteKind(str, Enum):
    REMEMBER = "remember"
    FORGET = "forget"
    PROFILE = "profile"  # the agent's card of the user replaced
    RESTORE = "restore"  # a forgotten conclusion created again by the memory inspector's undo


CARD_ID = "card"


@dataclass(frozen=True)
class MemoryWrite:
    """One write of the memory tool, as it is kept."""

    conclusion_id: str
    kind: WriteKind
    content: str | None  # redacted; None when the text could not be known or made safe
    destination: str  # API URL + workspace, never the key
    observer_id: str
    observed_id: str
    session_id: str | None
    scope_id: str | None
    # A remember's lifetime, seconds: kept beside the record (expiries.py), not in it.
    lifetime_s: float | None = None


@dataclass(frozen=True)
class KeptWrite:
    """A write as the record holds it: its place in write order and when it was kept
    (wall epoch s)."""

    seq: int
    made_at: float
    write: MemoryWrite


def keep(settings: Settings, write: MemoryWrite) -> None:
    """Add `write` to the record in the outbox file (created if absent); raises OutboxError."""
    db = Database.for_settings(settings, busy_timeout_s=KEEP_WAIT_S)
    try:
        record(db, write)
    finally:
        db.close()


def record(db: Database, write: MemoryWrite, limit: int = MAX_RECORDS) -> None:
    """Add one record and drop what is older than the newest `limit`; a remember's lifetime is kept
    in the same transaction (raises OutboxFull, keeping neither, when too many wait)."""
    with db.transaction(WRITE) as (conn, now):
        conn.execute("INSERT INTO memory_writes (conclusion_id, kind, made_at, destination,"
                     " observer_id, observed_id, session_id, scope_id, content)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (write.conclusion_id, WriteKind(write.kind).value, now, write.destination,
                      write.observer_id, write.observed_id, write.session_id, write.scope_id,
                      write.content))
        if write.lifetime_s is not None:
            expiries.add(conn, now, write.destination, write.conclusion_id, write.observer_id,
                         write.observed_id, write.lifetime_s)
        conn.execute("DELETE FROM memory_writes"
                     " WHERE seq <= (SELECT max(seq) FROM memory_writes) - ?", (limit,))


def summary(db: Database, latest: int = 3) -> dict:
    """Counts by kind and the newest `latest` writes' ids, kinds and times: never their text
    (status)."""
    with db.transaction(READ) as (conn, now):
        counts = dict(conn.execute(
            "SELECT kind, count(*) FROM memory_writes GROUP BY kind").fetchall())
        rows = conn.execute("SELECT conclusion_id, kind, made_at FROM memory_writes"
                            " ORDER BY seq DESC LIMIT ?", (max(0, int(latest)),)).fetchall()
    return {"remembered": counts.get(WriteKind.REMEMBER.value, 0),
            "forgotten": counts.get(WriteKind.FORGET.value, 0),
            "latest": [{"id": r[0], "kind": r[1], "at": r[2]} for r in rows]}


def records(db: Database, destination: str, observer_id: str, observed_id: str, limit: int,
            since: float | None = None) -> list[KeptWrite]:
    """The newest `limit` records of `destination` about these peers (kept at `since` or later,
    when given), newest first, with their text: for the memory inspector only (status reads
    `summary`)."""
    with db.transaction(READ) as (conn, now):
        rows = conn.execute("SELECT seq, made_at, conclusion_id, kind, content, destination,"
                            " observer_id, observed_id, session_id, scope_id FROM memory_writes"
                            " WHERE destination = ? AND observer_id = ? AND observed_id = ?"
                            " AND made_at >= ? ORDER BY seq DESC LIMIT ?",
                            (destination, observer_id, observed_id,
                             -math.inf if since is None else since,
                             max(0, min(int(limit), MAX_RECORDS)))).fetchall()
    # A kind a newer version keeps is left out, not an error.
    known = {kind.value for kind in WriteKind}
    return [KeptWrite(r[0], r[1],
                      MemoryWrite(r[2], WriteKind(r[3]), r[4], r[5], r[6], r[7], r[8], r[9]))
            for r in rows if r[3] in known]
