"""Opening the outbox database: owner-only file, WAL, durability, migrations, error translation."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from typing import Iterator

from .outbox_schema import SchemaTooNew, migrate, refuse_newer

# Primary SQLite result codes (the low byte of extended codes).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


class OutboxError(Exception):
    """Root of outbox failures; messages never contain queued content or the file path."""

    code = "outbox_error"


class OutboxBusy(OutboxError):
    """Another connection held the write lock longer than we may wait."""

    code = "outbox_busy"


class OutboxUnavailable(OutboxError):
    """The folder or file cannot be created, opened or written (permissions, disk)."""

    code = "outbox_unavailable"


class OutboxCorrupt(OutboxError):
    """The file is not a usable outbox database (corrupt, foreign, or from a newer version)."""

    code = "outbox_corrupt"


def translate(exc: BaseException) -> OutboxError:
    """Map a sqlite3/OS error to our error kinds without looking at message text."""
    if isinstance(exc, OutboxError):
        return exc
    if isinstance(exc, SchemaTooNew):
        return OutboxCorrupt("outbox schema is newer than this plugin")
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in _BUSY_CODES:
            return OutboxBusy("outbox is locked by another connection")
        if code in _CORRUPT_CODES or not isinstance(exc, sqlite3.OperationalError):
            return OutboxCorrupt(f"outbox database unusable ({type(exc).__name__})")
        return OutboxUnavailable(f"outbox database unavailable (sqlite code {code})")
    if isinstance(exc, OSError):
        return OutboxUnavailable(f"outbox folder unavailable ({type(exc).__name__})")
    return OutboxError(type(exc).__name__)


def connect(path: str, synchronous: str, busy_timeout_s: float) -> sqlite3.Connection:
    """Create (owner-only) or open the outbox at `path`, in WAL mode, migrated to the current schema."""
    if not os.path.isabs(path):
        raise OutboxUnavailable("outbox path must be absolute")
    if synchronous not in ("FULL", "NORMAL"):
        raise ValueError("synchronous must be FULL or NORMAL")
    conn = None
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        refuse_newer(conn)  # before WAL mode: switching it would rewrite a newer plugin's file
        if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise OutboxUnavailable("outbox cannot use WAL mode here")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA cache_size=-16000")  # 16 MB: a full outbox of 10,000 rows stays in memory
        migrate(conn)
        return conn
    except BaseException as exc:
        if conn is not None:
            conn.close()
        raise translate(exc) from exc


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One short BEGIN IMMEDIATE transaction; errors come out as OutboxError kinds."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise translate(exc) from exc
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction may already be gone; the original error matters
        if isinstance(exc, (sqlite3.Error, OSError)):
            raise translate(exc) from exc
        raise
