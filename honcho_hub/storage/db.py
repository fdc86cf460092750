"""The outbox file: its schema steps, its admission when opened (whose file it is, owner-only, WAL,
durability), and the one transaction helper through which every table of it is read and written.
Every process of the install shares this one SQLite file; this module owns the file, the modules
beside it own their tables' rows (docs/architecture.md, "Storage").
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

import tenacity

from ..errors import OutboxBusy, OutboxCorrupt, OutboxError, OutboxForeign, OutboxUnavailable
from ..settings.config import Settings
from .journal import FOLDER as JOURNAL_FOLDER

# -- the file's schema -----------------------------------------------------------------------------

# `PRAGMA application_id` of every outbox this plugin writes: ASCII "HnHb" (Honcho hub). It lets the
# plugin tell its own file from any other SQLite database at `outbox_path` by the header (offset 68)
# before writing anything.
APPLICATION_ID = 0x486E4862

# Step N (a tuple of statements, run in one transaction) brings the database from user_version N to
# N+1. Append steps; never edit a shipped one: files written by every earlier version must still
# open. (Where a statement's line is too long for the source, it goes on in an adjacent literal, so
# the statement's text stays byte for byte the one shipped.)
def _refresh_head(row: str) -> str:
    """A trigger's statements that make `session_heads` hold the head (first live row) of the
    session of `row` (NEW or OLD), or nothing for it when it has no live row left."""
    return f"""
            DELETE FROM session_heads
                WHERE destination = {row}.destination AND session_id = {row}.session_id;
            INSERT INTO session_heads
                SELECT destination, session_id, seq, state, next_attempt_at FROM events
                WHERE destination = {row}.destination AND session_id = {row}.session_id
                AND state IN ('pending', 'leased') ORDER BY seq LIMIT 1;
        """


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE events (
            seq              INTEGER PRIMARY KEY,                -- capture order (rowid: always"""
        """ above every remaining row)
            id               TEXT NOT NULL UNIQUE,               -- stable id derived from the"""
        """ source
            destination      TEXT NOT NULL,                      -- API URL + workspace, never"""
        """ the key
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
        # No index for pruning terminal rows: it runs every ten minutes or when the queue is full,
        # and a scan of at most max_queued_rows then costs less than maintaining an index on every
        # ack.
    ),
    (
        # Honcho may already hold the row (a send failed after it may have arrived, or its lease was
        # recovered from a worker that died or stalled): ask Honcho before sending it again.
        "ALTER TABLE events ADD COLUMN ambiguous INTEGER NOT NULL DEFAULT 0",
        # Consecutive permanent failures to ask Honcho which of these rows it holds.
        "ALTER TABLE events ADD COLUMN reconcile_failures INTEGER NOT NULL DEFAULT 0",
        # Rows the previous version left leased or marked with an ambiguous failure code.
        """UPDATE events SET ambiguous = 1"""
        """ WHERE state = 'leased' OR error_code IN ('timeout', 'reset',
            'unexpected', 'http_408') OR error_code GLOB 'http_5[0-9][0-9]'""",
    ),
    (
        # Mark the file as ours. A new file carries the mark from its first write already (see
        # _open); this step marks outboxes written before the mark existed.
        f"PRAGMA application_id = {APPLICATION_ID}",
    ),
    (
        # The memory tool's own writes (memory_log): what Honcho's derivation did not write.
        # Bounded to the newest records by the insert; a memory inspector shows their text and can
        # undo them.
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
            content       TEXT                   -- redacted; for forget, the deleted"""
        """ conclusion's text
        )""",
    ),
    (
        # Known chat -> Honcho session mappings (chats.py; the `sessions` command), recorded with
        # each captured message's events from this step on: a chat has several under a changed
        # strategy or a project attached after its first message. Bounded to the MAX_CHAT_SESSIONS
        # most recently captured.
        """CREATE TABLE chat_sessions (
            destination       TEXT NOT NULL,     -- API URL + workspace, never the key
            chat_id           TEXT NOT NULL,     -- Agent Zero's chat (context) id
            session_id        TEXT NOT NULL,
            project           TEXT,              -- the chat's project at its latest capture, if any
            first_captured_at REAL NOT NULL,     -- wall epoch s
            last_captured_at  REAL NOT NULL,
            PRIMARY KEY (destination, chat_id, session_id)
        )""",
        "CREATE INDEX chat_sessions_by_last ON chat_sessions (last_captured_at)",
    ),
    (
        # The processes that drain this outbox (storage/processes.py): one heartbeat row per
        # delivery worker, rewritten at most every few seconds, deleted at a clean stop, expired
        # after an hour; at most processes.MAX_PROCESSES rows.
        """CREATE TABLE worker_processes (
            owner              TEXT PRIMARY KEY,  -- the worker's lease owner (pid and a random"""
        """ part)
            pid                INTEGER NOT NULL,
            host               TEXT NOT NULL,
            started_at         REAL NOT NULL,     -- wall epoch s of its first beat
            beat_at            REAL NOT NULL,     -- of its latest beat
            beat_every_s       REAL NOT NULL,     -- the longest it means to go between beats
            state              TEXT NOT NULL,     -- running, idle, paused, circuit_open, error
            reason             TEXT,              -- why paused or failing: a setting's name or"""
        """ an error code
            circuit_kind       TEXT,              -- the circuit it holds: unreachable, auth,"""
        """ sdk_missing
            circuit_code       TEXT,
            circuit_open_until REAL,
            sent               INTEGER NOT NULL,  -- counters since the worker started
            reconciled         INTEGER NOT NULL,
            failed             INTEGER NOT NULL,
            dead               INTEGER NOT NULL,
            last_success_at    REAL,
            last_error_code    TEXT,
            last_error_at      REAL
        )""",
        # The unreachable-server circuit every process of this outbox honours, one row per
        # destination while it is open; a success deletes it.
        """CREATE TABLE shared_circuits (
            destination TEXT PRIMARY KEY,  -- API URL + workspace, never the key
            code        TEXT NOT NULL,     -- unreachable, connect_timeout, timeout, reset
            open_until  REAL NOT NULL,     -- wall epoch s
            failures    INTEGER NOT NULL,  -- consecutive openings, for the backoff
            opened_at   REAL NOT NULL      -- when it was opened or last extended
        )""",
    ),
    (
        # Chats the user asked to forget (chats/forget.py): the chat's later messages go to a
        # session of the next generation (names.session_id_for), and messages captured up to
        # `forgotten_at` (still in a capture journal then) are not queued. At most MAX_CHAT_SESSIONS
        # rows, the oldest forgets go first.
        """CREATE TABLE forgotten_chats (
            destination  TEXT NOT NULL,        -- API URL + workspace, never the key
            chat_id      TEXT NOT NULL,
            generation   INTEGER NOT NULL,     -- how often it was forgotten
            forgotten_at REAL NOT NULL,        -- wall epoch s of the latest forget
            PRIMARY KEY (destination, chat_id)
        )""",
        # The forgotten chats' own sessions: no row of theirs is leased again, none is queued again,
        # and `deleted_at` says when Honcho accepted the session's deletion (or held none).
        """CREATE TABLE forgotten_sessions (
            destination  TEXT NOT NULL,
            session_id   TEXT NOT NULL,
            chat_id      TEXT NOT NULL,
            forgotten_at REAL NOT NULL,
            deleted_at   REAL,
            PRIMARY KEY (destination, session_id)
        )""",
    ),
    (
        # The lifetimes of conclusions the memory tool remembered for a while (expiries.py): Honcho
        # keeps no metadata on a conclusion, so this is the only record of when one ends. The
        # delivery worker deletes the expired ones (delivery/expiry.py), claiming each for one
        # process at a time. Pending rows are bounded by expiries.MAX_PENDING, settled ones by
        # expiries.MAX_SETTLED.
        """CREATE TABLE memory_expiries (
            destination     TEXT NOT NULL,     -- API URL + workspace, never the key
            conclusion_id   TEXT NOT NULL,
            observer_id     TEXT NOT NULL,
            observed_id     TEXT NOT NULL,
            expires_at      REAL NOT NULL,     -- wall epoch s
            state           TEXT NOT NULL,     -- pending, deleted, failed
            attempts        INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,     -- the expiry, then later after a failed delete
            claimed_by      TEXT,              -- the worker deleting it now (its lease owner)
            claimed_until   REAL,
            error_code      TEXT,
            updated_at      REAL NOT NULL,
            PRIMARY KEY (destination, conclusion_id)
        )""",
        """CREATE INDEX memory_expiries_due ON memory_expiries (destination, next_attempt_at)
            WHERE state = 'pending'""",
    ),
    (
        # Each session's head (its first live row) with what decides whether it is ready, kept by
        # the triggers below on every change of a row's liveness, readiness or session, whoever
        # writes it: the lease finds the oldest ready head through the ready-time index, so
        # sessions whose heads back off (an outage across many chats) cost it nothing.
        """CREATE TABLE session_heads (
            destination     TEXT NOT NULL,
            session_id      TEXT NOT NULL,
            seq             INTEGER NOT NULL,  -- the head row's
            state           TEXT NOT NULL,     -- the head row's: pending or leased
            next_attempt_at REAL NOT NULL,     -- the head row's
            PRIMARY KEY (destination, session_id)
        )""",
        # The oldest pending heads first, then (when those back off) the ready ones by ready time.
        "CREATE INDEX session_heads_pending_by_seq ON session_heads (seq) WHERE state = 'pending'",
        """CREATE INDEX session_heads_ready ON session_heads (next_attempt_at)
            WHERE state = 'pending'""",
        """INSERT INTO session_heads
            SELECT destination, session_id, seq, state, next_attempt_at FROM events e
            WHERE state IN ('pending', 'leased') AND NOT EXISTS (SELECT 1 FROM events p
                WHERE p.destination = e.destination AND p.session_id = e.session_id
                AND p.state IN ('pending', 'leased') AND p.seq < e.seq)""",
        """CREATE TRIGGER session_heads_on_insert AFTER INSERT ON events
            WHEN NEW.state IN ('pending', 'leased') BEGIN""" + _refresh_head("NEW") + "END",
        """CREATE TRIGGER session_heads_on_delete AFTER DELETE ON events
            WHEN OLD.state IN ('pending', 'leased') BEGIN""" + _refresh_head("OLD") + "END",
        # A row moving to another session (adopt_unsent moves rows to a new destination) changes
        # the heads of both.
        """CREATE TRIGGER session_heads_on_update
            AFTER UPDATE OF state, next_attempt_at, destination, session_id ON events
            WHEN OLD.state IN ('pending', 'leased') OR NEW.state IN ('pending', 'leased') BEGIN"""
        + _refresh_head("OLD") + _refresh_head("NEW") + "END",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


# The versions an outbox could have before the step above marked it: such a file carries application
# id 0, and only the first step's `events` table tells it from another program's database.
UNMARKED_VERSIONS = range(1, 3)


def _refuse_newer(conn: sqlite3.Connection) -> int:
    """The file's schema version; raises, having written nothing, if a newer plugin wrote it."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise OutboxCorrupt("outbox schema is newer than this plugin")
    return version


def _is_unmarked_outbox(conn: sqlite3.Connection) -> bool:
    """Whether `conn` (read-only is enough) holds an outbox this plugin wrote before it marked its
    files: application id 0, a version from before the mark, and an `events` table with the first
    step's columns."""
    if conn.execute("PRAGMA application_id").fetchone()[0] != 0:
        return False
    if conn.execute("PRAGMA user_version").fetchone()[0] not in UNMARKED_VERSIONS:
        return False
    columns = {row[1] for row in conn.execute("SELECT * FROM pragma_table_info('events')")}
    return _first_step_columns() <= columns


@functools.cache
def _first_step_columns() -> frozenset[str]:
    # Read from the shipped step itself (run on a throwaway in-memory database), not from a second
    # list.
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(MIGRATIONS[0][0])
        return frozenset(row[1] for row in conn.execute(
            "SELECT * FROM pragma_table_info('events')"))
    finally:
        conn.close()


# -- errors ----------------------------------------------------------------------------------------

# Primary SQLite result codes (the low byte of extended codes).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


@contextmanager
def _translated() -> Iterator[None]:
    """sqlite3 and OS errors raised inside come out as OutboxError kinds, judged by their codes,
    never by message text (which may hold the path). Opening the file and every transaction go
    through here."""
    try:
        yield
    except sqlite3.Error as exc:
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in _BUSY_CODES:
            raise OutboxBusy("outbox is locked by another connection") from exc
        if code in _CORRUPT_CODES or not isinstance(exc, sqlite3.OperationalError):
            raise OutboxCorrupt(f"outbox database unusable ({type(exc).__name__})") from exc
        raise OutboxUnavailable(f"outbox database unavailable (sqlite code {code})") from exc
    except OSError as exc:
        raise OutboxUnavailable(f"outbox folder unavailable ({type(exc).__name__})") from exc


# -- opening the file ------------------------------------------------------------------------------

# The files SQLite keeps beside the database; SQLite opens them by name.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")

# What else the plugin keeps beside the outbox (the capture journal's folder; recall's cache marker
# is named after the outbox file): a folder holding only these and the outbox's own files is the
# plugin's.
PLUGIN_FOLDER_ENTRIES = frozenset({JOURNAL_FOLDER})

# A WAL checkpoint that resets the log truncates it to this size. SQLite checkpoints on its own once
# the log holds about 1,000 pages (≈ 4 MB), so normal operation stays within it without shrinking
# and regrowing the file; a burst (large pastes while a reader held back the checkpoint) shrinks
# back to it.
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024


def _open(path: str, synchronous: str, busy_timeout_s: float) -> sqlite3.Connection:
    """Create (owner-only) or open the outbox at `path`, in WAL mode; the caller migrates it.

    An existing file is judged by its header before anything writes to it: anything but an outbox of
    this plugin (or an empty file) is refused untouched. Raises OutboxError kinds."""
    if not os.path.isabs(path):
        raise OutboxUnavailable("outbox path must be absolute")
    if synchronous not in ("FULL", "NORMAL"):
        raise ValueError("synchronous must be FULL or NORMAL")
    conn = None
    try:
        with _translated():
            folder = os.path.dirname(path)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            _refuse_links(path)
            _create_if_absent(path)
            judged = _lstat_regular(path)
            new = _admit(path, judged, busy_timeout_s)
            _make_private(path, folder)
            conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            _refuse_swapped(path, judged)
            # Deleted rows are overwritten, not left readable in free pages.
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
            if new:
                # The first write, still in rollback mode so it lands in the main file: free pages
                # can be given back (only settable before the first table), and the mark says the
                # file is ours even if this process dies before its first migration. Two
                # transactions (SQLite ignores the vacuum mode inside one): `_admit` knows the file
                # between them.
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            # Again on this connection: a newer plugin's version may be only in the WAL.
            _refuse_newer(conn)
            if _switch_to_wal(conn, busy_timeout_s).lower() != "wal":
                raise OutboxUnavailable("outbox cannot use WAL mode here")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            # 16 MB: a full outbox of 10,000 rows stays in memory.
            conn.execute("PRAGMA cache_size=-16000")
            return conn
    except BaseException:
        if conn is not None:
            conn.close()
        raise


# Retries of the switch to WAL, within the busy timeout: short, as the lock another opener holds to
# write a new file's stamp or its first schema step is.
WAL_SWITCH_WAIT = tenacity.wait_exponential(multiplier=0.005, max=0.1)


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    """The journal mode after asking for WAL, tried again within the busy timeout.

    Switching a new file reads it, then takes its write lock; SQLite refuses that at once while
    another connection writes the file (waiting inside a read could deadlock), busy timeout or not.
    Two openers of a new outbox meet there: two processes, or one's capture writer and worker."""
    retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(_is_busy), wait=WAL_SWITCH_WAIT,
                                 stop=tenacity.stop_after_delay(busy_timeout_s), sleep=_pause,
                                 reraise=True)
    return str(retrying(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]))


def _is_busy(exc: BaseException) -> bool:
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    return isinstance(exc, sqlite3.OperationalError) and code in _BUSY_CODES


def _pause(seconds: float) -> None:
    threading.Event().wait(seconds)


# Why no descriptor of our own ever reads the database file: closing any descriptor of a file drops
# every POSIX lock this process holds on it, and SQLite's locks are POSIX locks. Another connection
# of this process (the worker's, capture's) would lose its locks, and other processes could then
# write under it. SQLite's own connections share their descriptors and defer such closes, so the
# header is read through one of them; the names are checked with lstat, which opens nothing.

def _refuse_links(path: str) -> None:
    """A symbolic link at the outbox or at a name SQLite opens beside it would send our writes
    elsewhere."""
    for name in (path, *(path + suffix for suffix in COMPANION_SUFFIXES)):
        try:
            _lstat_regular(name)
        except FileNotFoundError:
            continue


def _lstat_regular(name: str) -> os.stat_result:
    st = os.lstat(name)
    if stat.S_ISLNK(st.st_mode):
        raise OutboxUnavailable("outbox file or its journal is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise OutboxUnavailable("outbox file or its journal is not a regular file")
    return st


def _create_if_absent(path: str) -> None:
    """An empty owner-only file; O_EXCL neither follows a link nor opens a file that already exists,
    so the descriptor closed here is one nobody else can hold locks through."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600))
    except FileExistsError:
        # There already, or created by another process meanwhile: judged next like any other file.
        pass


def _admit(path: str, judged: os.stat_result, busy_timeout_s: float) -> bool:
    """Whether the file is new (empty, or begun by a connection of ours); raises, having written
    nothing, unless it is an outbox of this plugin.

    SQLite reads the header on a connection that cannot write: the magic (else "not a database"),
    the application id (offset 68) and the user version (offset 60). Files from before the mark
    carry id 0; our `events` table then tells them apart. Without WAL frames the main file holds
    everything, and `immutable` reads it without creating -wal or -shm files beside someone else's
    database. With frames, a read-only connection reads them too: a plugin from before the mark that
    was killed before any checkpoint left its first migration there, and the main file at user
    version 0."""
    wal_has_frames = _wal_size(path) > 0
    if judged.st_size == 0:
        if wal_has_frames:
            raise OutboxForeign("outbox file is empty but its WAL is not; left untouched")
        return True
    uri = ("file:" + urllib.parse.quote(path)
           + ("?mode=ro" if wal_has_frames else "?mode=ro&immutable=1"))
    look = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None,
                           check_same_thread=False)
    try:
        if look.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            _refuse_newer(look)
            return False
        if _is_unmarked_outbox(look):
            return False
        if _begun_by_us(look):
            return True
    finally:
        look.close()
    raise OutboxForeign("outbox file is another program's database; left untouched")


def _begun_by_us(look: sqlite3.Connection) -> bool:
    """Whether the file is a new outbox between its first two writes (see `_open`): incremental
    vacuum, yet no stamp, no version and nothing stored. SQLite commits the vacuum mode on its own
    (it ignores it inside a transaction), so another thread or process opening the outbox at that
    moment sees this, and a kill at that moment leaves it for good. It holds no data of anyone's: it
    is stamped as new."""
    return (look.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
            and look.execute("PRAGMA user_version").fetchone()[0] == 0
            and look.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)


def _wal_size(path: str) -> int:
    try:
        return os.lstat(path + "-wal").st_size
    except FileNotFoundError:
        return 0


def _make_private(path: str, folder: str) -> None:
    """Owner-only modes for an admitted outbox: the file, its companions, and the folder when it is
    ours.

    Only what this user owns. The folder only when it holds nothing but the outbox, its companion
    files (names starting with the outbox's name) and PLUGIN_FOLDER_ENTRIES, and is not sticky: a
    folder that holds anything else (a home folder, a shared one, /tmp) was not made for the outbox
    and keeps its mode. Files are changed by name (see above: no descriptor of ours on them) after
    lstat found a regular file; were it swapped for a link meanwhile, the worst is another file of
    ours turned owner-only. Best effort: a file system without modes must not make the outbox
    unusable."""
    for name in (path, *(path + suffix for suffix in COMPANION_SUFFIXES)):
        try:
            st = os.lstat(name)
            if stat.S_ISREG(st.st_mode) and _needs_private(st):
                os.chmod(name, 0o600)
        except OSError:
            # Absent (SQLite creates it with the database's mode), or a volume without modes.
            continue
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        name = os.path.basename(path)
        st = os.fstat(folder_fd)
        ours = all(entry == name or entry.startswith((name + "-", name + "."))
                   or entry in PLUGIN_FOLDER_ENTRIES
                   for entry in os.listdir(folder_fd))
        if ours and not st.st_mode & stat.S_ISVTX and _needs_private(st):
            os.fchmod(folder_fd, 0o700)
    except OSError:
        pass
    finally:
        os.close(folder_fd)


def _needs_private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and bool(stat.S_IMODE(st.st_mode) & 0o077)


def _refuse_swapped(path: str, judged: os.stat_result) -> None:
    """SQLite opens the database by name (Python cannot ask it for O_NOFOLLOW): make sure the name
    still leads to the regular file that was judged, not to a link put there meanwhile."""
    now = _lstat_regular(path)
    if (now.st_dev, now.st_ino) != (judged.st_dev, judged.st_ino):
        raise OutboxUnavailable("outbox file changed while it was opened")


T = TypeVar("T")


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)

# How long a reader off the turn's path (status, the inspector, a chat's generation) waits for the
# locks.
EXISTING_WAIT_S = 5.0


def with_existing(settings: Settings, work: Callable[[Database], T], missing: T) -> T:
    """`work(db)` on a short-lived connection to the file `settings` name, or `missing` when nothing
    was captured yet: reading never creates the file. Raises OutboxError."""
    return when_existing(settings, Database.for_settings, work, missing)


def when_existing(settings: Settings, open_file: Callable[..., C], work: Callable[[C], T],
                  missing: T) -> T:
    """`work` on what `open_file(settings, busy_timeout_s=...)` opens on the file (closed after), or
    `missing` when the file does not exist: the one way a reader keeps from creating it."""
    if not os.path.exists(settings.outbox_path):
        return missing
    opened = open_file(settings, busy_timeout_s=EXISTING_WAIT_S)
    try:
        return work(opened)
    finally:
        opened.close()


# -- the one transaction helper --------------------------------------------------------------------

# How `Database.transaction` begins and ends each kind of transaction.
READ, WRITE, AUTOCOMMIT = "read", "write", "autocommit"


class Database:
    """The outbox file at `path`, opened and migrated; safe to share between threads of one process.

    Each read or write of any table is one short transaction (`transaction`); threads of this
    process queue for the connection, processes for SQLite's write lock, neither longer than
    `busy_timeout_s`."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 0.25,
                 clock: Callable[[], float] = time.time) -> None:
        self._conn = _open(path, synchronous, busy_timeout_s)
        self._lock = threading.Lock()
        self._busy_timeout_s = busy_timeout_s
        self._clock = clock
        self.closed = False
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    @classmethod
    def for_settings(cls, settings: Settings, *, busy_timeout_s: float | None = None,
                     synchronous: str | None = None,
                     clock: Callable[[], float] = time.time) -> Database:
        """The file `settings` name, kept as they say. `busy_timeout_s` defaults to capture's wait
        (`capture_wait_ms`), `synchronous` to the configured durability."""
        return cls(settings.outbox_path, synchronous=synchronous or settings.outbox_synchronous,
                   busy_timeout_s=(settings.capture_wait_ms / 1000 if busy_timeout_s is None
                                   else busy_timeout_s),
                   clock=clock)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._conn.close()

    @contextmanager
    def transaction(self, kind: str,
                    wait_s: float | None = None) -> Iterator[tuple[sqlite3.Connection, float]]:
        """The only way to the connection of the open file: yields it and the time the transaction
        began (one reading of the clock: every row it touches carries the same time).

        `WRITE`: BEGIN IMMEDIATE (the write lock up front, so two writers never deadlock), COMMIT,
        and ROLLBACK when anything raises. `READ`: several reads from one snapshot, ended by
        ROLLBACK (nothing was written). `AUTOCOMMIT`: statements SQLite refuses inside a transaction
        (VACUUM, checkpoints). sqlite3 and OS errors come out as OutboxError kinds (`_translated`).

        `wait_s`, when shorter than the file's busy timeout, bounds this transaction's wait for the
        locks instead (for writes that are better skipped than waited for)."""
        wait = self._busy_timeout_s if wait_s is None else min(wait_s, self._busy_timeout_s)
        # Threads of this process queue here; they wait no longer than SQLite would for another
        # process.
        if not self._lock.acquire(timeout=wait):
            raise OutboxBusy("outbox is in use by another thread")
        try:
            if self.closed:
                raise OutboxError("outbox is closed")
            now = self._clock()
            with _translated(), self._waiting(wait):
                if kind == AUTOCOMMIT:
                    yield self._conn, now
                    return
                self._conn.execute("BEGIN IMMEDIATE" if kind == WRITE else "BEGIN")
                try:
                    yield self._conn, now
                    if kind == WRITE:
                        self._conn.execute("COMMIT")
                finally:
                    # A read, or a write that raised (COMMIT itself included).
                    if self._conn.in_transaction:
                        try:
                            self._conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass  # the transaction may already be gone; the original error matters
        finally:
            self._lock.release()

    @contextmanager
    def _waiting(self, wait_s: float) -> Iterator[None]:
        """SQLite's busy timeout set to `wait_s` for the statements inside, then back to the file's
        own."""
        if wait_s == self._busy_timeout_s:
            yield
            return
        self._conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            yield
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")

    def _migrate(self) -> None:
        """Apply the missing MIGRATIONS steps, one transaction each. Safe when several processes
        race: the version is read again under the write lock."""
        with _translated():
            version = _refuse_newer(self._conn)
        while version < SCHEMA_VERSION:
            with self.transaction(WRITE) as (conn, now):
                version = _refuse_newer(conn)
                if version < SCHEMA_VERSION:
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
                    version += 1
                    conn.execute(f"PRAGMA user_version = {int(version)}")


# -- giving deleted rows' space back ---------------------------------------------------------------

def reclaim_space(conn: sqlite3.Connection, queue_idle: bool, deleted: bool) -> None:
    """Give the pages of deleted rows back to the file system and empty the WAL of their old copies;
    give the connection's cached pages back to memory.

    Best effort, never raises: each step is bounded by the busy timeout, and a step that meets a
    lock or a full disk is tried again at a later prune. A file created before auto_vacuum was set
    needs one full VACUUM to switch it on; it takes the write lock for as long as it copies the
    database (and as much free space), so it runs only while no row waits for delivery."""
    reclaimed = False
    try:
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0:
            if queue_idle:
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("VACUUM")
                reclaimed = True
        elif conn.execute("PRAGMA freelist_count").fetchone()[0]:
            # executescript steps the pragma to completion; execute() would free one page only.
            conn.executescript("PRAGMA incremental_vacuum")
            reclaimed = True
    except sqlite3.Error:
        pass
    if deleted or reclaimed:
        try:
            # Busy readers: tried again later.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass
    try:
        # The prune before it scanned the whole table: its pages would stay in this connection's
        # cache (up to cache_size) though nothing reads them until the next prune.
        conn.execute("PRAGMA shrink_memory")
    except sqlite3.Error:
        pass
