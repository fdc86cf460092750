"""Outbox schema, versioned by `PRAGMA user_version`, migrated forward one step per transaction."""

from __future__ import annotations

import functools
import sqlite3

# `PRAGMA application_id` of every outbox this plugin writes: ASCII "HnHb" (Honcho hub). It lets the
# plugin tell its own file from any other SQLite database at `outbox_path` by the header (offset 68)
# before writing anything.
APPLICATION_ID = 0x486E4862

# Step N (a tuple of statements, run in one transaction) brings the database from user_version N to N+1. Append steps; never edit a shipped one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE events (
            seq              INTEGER PRIMARY KEY,                -- capture order (rowid: always above every remaining row)
            id               TEXT NOT NULL UNIQUE,               -- stable id derived from the source
            destination      TEXT NOT NULL,                      -- API URL + workspace, never the key
            workspace_id     TEXT NOT NULL,
            session_id       TEXT NOT NULL,
            peer_id          TEXT NOT NULL,
            role             TEXT NOT NULL,
            content          TEXT NOT NULL,                      -- already redacted
            captured_at      REAL NOT NULL,                      -- wall epoch s; sent as created_at
            scope_id         TEXT,
            attempts         INTEGER NOT NULL DEFAULT 0,
            next_attempt_at  REAL NOT NULL,
            lease_owner      TEXT,
            lease_expires_at REAL,
            state            TEXT NOT NULL DEFAULT 'pending',
            error_code       TEXT,
            updated_at       REAL NOT NULL
        )""",
        # Live rows of one session in order: the head check and the batch read.
        """CREATE INDEX events_live_by_session ON events (destination, session_id, seq)
            WHERE state IN ('pending', 'leased')""",
        # Ready candidates in capture order.
        "CREATE INDEX events_pending_by_seq ON events (seq) WHERE state = 'pending'",
        "CREATE INDEX events_lease_expiry ON events (lease_expires_at) WHERE state = 'leased'",
        # No index for pruning terminal rows: it runs every ten minutes or when the queue is full, and a
        # scan of at most max_queued_rows then costs less than maintaining an index on every ack.
    ),
    (
        # Honcho may already hold the row (a send failed after it may have arrived, or its lease was
        # recovered from a worker that died or stalled): ask Honcho before sending it again.
        "ALTER TABLE events ADD COLUMN ambiguous INTEGER NOT NULL DEFAULT 0",
        # Consecutive permanent failures to ask Honcho which of these rows it holds.
        "ALTER TABLE events ADD COLUMN reconcile_failures INTEGER NOT NULL DEFAULT 0",
        # Rows the previous version left leased or marked with an ambiguous failure code.
        """UPDATE events SET ambiguous = 1 WHERE state = 'leased' OR error_code IN ('timeout', 'reset',
            'unexpected', 'http_408') OR error_code GLOB 'http_5[0-9][0-9]'""",
    ),
    (
        # Mark the file as ours. A new file carries the mark from its first write already (outbox_db);
        # this step marks outboxes written before the mark existed.
        f"PRAGMA application_id = {APPLICATION_ID}",
    ),
    (
        # The memory tool's own writes (memory_log): what Honcho's derivation did not write. Bounded to the
        # newest records by the insert; a memory inspector shows their text and can undo them.
        """CREATE TABLE memory_writes (
            seq           INTEGER PRIMARY KEY,   -- write order
            conclusion_id TEXT NOT NULL,         -- Honcho's id of the conclusion created or deleted
            kind          TEXT NOT NULL,         -- remember | forget
            made_at       REAL NOT NULL,         -- wall epoch s
            destination   TEXT NOT NULL,         -- API URL + workspace, never the key
            observer_id   TEXT NOT NULL,
            observed_id   TEXT NOT NULL,
            session_id    TEXT,
            scope_id      TEXT,
            content       TEXT                   -- redacted; for forget, the deleted conclusion's text
        )""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

# The versions an outbox could have before the step above marked it: such a file carries application id 0,
# and only the first step's `events` table tells it from another program's database.
UNMARKED_VERSIONS = range(1, 3)


class SchemaTooNew(Exception):
    """The file was written by a newer plugin version; it is left untouched."""


def refuse_newer(conn: sqlite3.Connection) -> int:
    """The file's schema version; raises SchemaTooNew, having written nothing, if a newer plugin wrote it."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"outbox schema {version} is newer than {SCHEMA_VERSION}")
    return version


def is_unmarked_outbox(conn: sqlite3.Connection) -> bool:
    """Whether `conn` (read-only is enough) holds an outbox this plugin wrote before it marked its files:
    application id 0, a version from before the mark, and an `events` table with the first step's columns."""
    if conn.execute("PRAGMA application_id").fetchone()[0] != 0:
        return False
    if conn.execute("PRAGMA user_version").fetchone()[0] not in UNMARKED_VERSIONS:
        return False
    columns = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info('events')")}
    return _first_step_columns() <= columns


@functools.cache
def _first_step_columns() -> frozenset[str]:
    # Read from the shipped step itself (run on a throwaway in-memory database), not from a second list.
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(MIGRATIONS[0][0])
        return frozenset(row[1] for row in conn.execute("SELECT * FROM pragma_table_info('events')"))
    finally:
        conn.close()


def migrate(conn: sqlite3.Connection) -> int:
    """Apply missing steps; returns the resulting version. Safe when several processes race."""
    version = refuse_newer(conn)
    while version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                version += 1
                conn.execute(f"PRAGMA user_version = {int(version)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return version

