"""Chats as the outbox file records them (schema steps 5 and 7 in db.py): the Honcho sessions each
chat was captured into, and the forgotten chats — how often (the generation their next messages go
to), when, and their own sessions, never leased or queued again. Ids and times only. Functions
taking a connection run inside the caller's transaction; those taking a Database, in their own.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..names import chat_generation_of, session_id_for
from .db import READ, WRITE, Database

MAX_CHAT_SESSIONS = 10_000  # chat -> session mappings kept, and forgotten chats: oldest go first

# A condition on an `events` row aliased `e`: its session is not a forgotten one. A forgotten
# session's rows are never leased again: a send of its rows that was on the wire when the chat was
# forgotten may come back as a retry, and a dead holder's lease returns its rows to pending; the
# forget of the chat deletes them once no live lease holds any.
NOT_FORGOTTEN = """NOT EXISTS (SELECT 1 FROM forgotten_sessions f
    WHERE f.destination = e.destination AND f.session_id = e.session_id)"""


@dataclass(frozen=True)
class ForgottenChat:
    """A chat as a forget left it: its generation now, its own sessions (marked forgotten) and those
    it shares with other chats (a project's, the global one: left alone)."""

    generation: int
    sessions: tuple[str, ...]
    shared: tuple[str, ...]


# -- inside the caller's transaction ---------------------------------------------------------------

def record_session(conn: sqlite3.Connection, destination: str, chat_id: str, session_id: str,
                   project: str | None, captured_at: float) -> None:
    """Record that the chat was captured into `session_id` at `captured_at`. The project is the one
    of the latest capture. A new mapping beyond MAX_CHAT_SESSIONS drops the least recently
    captured: new mappings are rare (a chat's first message, a new strategy), so the count is taken
    only then."""
    key = (destination, chat_id, session_id)
    updated = conn.execute(
        "UPDATE chat_sessions"
        " SET project = CASE WHEN ? >= last_captured_at THEN ? ELSE project END,"
        " first_captured_at = min(first_captured_at, ?),"
        " last_captured_at = max(last_captured_at, ?)"
        " WHERE destination = ? AND chat_id = ? AND session_id = ?",
        (captured_at, project, captured_at, captured_at, *key)).rowcount
    if updated:
        return
    conn.execute("INSERT INTO chat_sessions (destination, chat_id, session_id, project,"
                 " first_captured_at, last_captured_at) VALUES (?, ?, ?, ?, ?, ?)",
                 (*key, project, captured_at, captured_at))
    conn.execute("DELETE FROM chat_sessions WHERE rowid IN (SELECT rowid FROM chat_sessions"
                 " ORDER BY last_captured_at, rowid"
                 " LIMIT max(0, (SELECT count(*) FROM chat_sessions) - ?))",
                 (MAX_CHAT_SESSIONS,))


def last_forget(conn: sqlite3.Connection, destination: str,
                chat_id: str) -> tuple[int, float] | None:
    """(its generation, when it was last forgotten) of a chat forgotten here, None for one never
    forgotten."""
    return conn.execute("SELECT generation, forgotten_at FROM forgotten_chats"
                        " WHERE destination = ? AND chat_id = ?",
                        (destination, chat_id)).fetchone()


def is_forgotten_session(conn: sqlite3.Connection, destination: str, session_id: str) -> bool:
    """Whether `session_id` is a forgotten chat's own session: nothing is queued into it again."""
    return conn.execute("SELECT 1 FROM forgotten_sessions WHERE destination = ? AND session_id = ?",
                        (destination, session_id)).fetchone() is not None


def mark_forgotten(conn: sqlite3.Connection, destination: str, chat_id: str,
                   now: float) -> ForgottenChat:
    """Move `chat_id` to its next generation and mark its own sessions forgotten — those it was
    captured into, those of an earlier forget Honcho has not confirmed, and its current
    generation's — dropping their mappings. The caller deletes their queued rows in the same
    transaction."""
    found = last_forget(conn, destination, chat_id)
    current = found[0] if found else 0
    mapped = [r[0] for r in conn.execute(
        "SELECT session_id FROM chat_sessions WHERE destination = ? AND chat_id = ?",
        (destination, chat_id))]
    unconfirmed = [r[0] for r in conn.execute(
        "SELECT session_id FROM forgotten_sessions"
        " WHERE destination = ? AND chat_id = ? AND deleted_at IS NULL",
        (destination, chat_id))]
    own = tuple(dict.fromkeys([session_id_for(chat_id, current), *unconfirmed,
                               *(s for s in mapped if chat_generation_of(chat_id, s) is not None)]))
    shared = tuple(s for s in mapped if chat_generation_of(chat_id, s) is None)
    conn.execute("INSERT INTO forgotten_chats (destination, chat_id, generation, forgotten_at)"
                 " VALUES (?, ?, ?, ?) ON CONFLICT (destination, chat_id)"
                 " DO UPDATE SET generation = excluded.generation,"
                 " forgotten_at = excluded.forgotten_at", (destination, chat_id, current + 1, now))
    for session_id in own:
        conn.execute("INSERT INTO forgotten_sessions"
                     " (destination, session_id, chat_id, forgotten_at) VALUES"
                     " (?, ?, ?, ?) ON CONFLICT (destination, session_id)"
                     " DO UPDATE SET deleted_at = NULL, forgotten_at = excluded.forgotten_at",
                     (destination, session_id, chat_id, now))
        conn.execute("DELETE FROM chat_sessions"
                     " WHERE destination = ? AND chat_id = ? AND session_id = ?",
                     (destination, chat_id, session_id))
    _bound_forgotten(conn)
    return ForgottenChat(current + 1, own, shared)


def _bound_forgotten(conn: sqlite3.Connection) -> None:
    """At most MAX_CHAT_SESSIONS forgotten chats: the oldest forgets go, with their sessions' marks
    (such a chat's next messages start over at its first session id, which Honcho creates again,
    empty)."""
    old = conn.execute("SELECT destination, chat_id FROM forgotten_chats"
                       " ORDER BY forgotten_at, rowid LIMIT"
                       " max(0, (SELECT count(*) FROM forgotten_chats) - ?)",
                       (MAX_CHAT_SESSIONS,)).fetchall()
    for destination, chat_id in old:
        conn.execute("DELETE FROM forgotten_sessions"
                     " WHERE destination = ? AND chat_id = ? AND deleted_at IS NOT NULL",
                     (destination, chat_id))
        conn.execute("DELETE FROM forgotten_chats WHERE destination = ? AND chat_id = ?",
                     (destination, chat_id))


# -- in a transaction of their own -----------------------------------------------------------------

def generation(db: Database, destination: str, chat_id: str) -> int:
    """How often `chat_id` was forgotten (0: never): its messages go to that generation's
    session."""
    with db.transaction(READ) as (conn, now):
        found = last_forget(conn, destination, chat_id)
    return found[0] if found else 0


def known_sessions(db: Database, limit: int = 100,
                   destination: str | None = None) -> list[dict]:
    """Known chat -> Honcho session mappings (of `destination` only, when given), most recently
    captured first: chat id, project, session id, first and last capture times; never content."""
    with db.transaction(READ) as (conn, now):
        rows = conn.execute(
            "SELECT chat_id, project, session_id, first_captured_at, last_captured_at"
            " FROM chat_sessions WHERE ? IS NULL OR destination = ?"
            " ORDER BY last_captured_at DESC, rowid DESC LIMIT ?",
            (destination, destination, max(0, min(int(limit), MAX_CHAT_SESSIONS))))
        return [{"chat_id": r[0], "project": r[1], "session_id": r[2], "first_captured_at": r[3],
                 "last_captured_at": r[4]} for r in rows]


def mapped_sessions(db: Database, destination: str, offset: int,
                    limit: int) -> tuple[list[str], int]:
    """(a page of the distinct Honcho sessions chats of `destination` were captured into, in id
    order from `offset`; how many there are in all)."""
    with db.transaction(READ) as (conn, now):
        total = conn.execute("SELECT count(DISTINCT session_id) FROM chat_sessions"
                             " WHERE destination = ?", (destination,)).fetchone()[0]
        rows = conn.execute("SELECT DISTINCT session_id FROM chat_sessions WHERE destination = ?"
                            " ORDER BY session_id LIMIT ? OFFSET ?",
                            (destination, max(0, int(limit)), max(0, int(offset)))).fetchall()
    return [r[0] for r in rows], int(total)


def session_deleted(db: Database, destination: str, session_id: str) -> None:
    """Record that Honcho accepted the forgotten session's deletion (or held no such session)."""
    with db.transaction(WRITE) as (conn, now):
        conn.execute("UPDATE forgotten_sessions SET deleted_at = ?"
                     " WHERE destination = ? AND session_id = ?",
                     (now, destination, session_id))
