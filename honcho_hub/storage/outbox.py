"""The durable outbox: captured events wait here, in capture order, until Honcho has them.

Storage only: which event to retry when is the worker's decision. No operation does network I/O.

Reading order: the file's schema and its migrations; opening the file (whose file it is, owner-only,
WAL, durability); the records the outbox stores and returns; the `Outbox` class, whose operations each
run one short transaction through `Outbox._transaction`, the only way to touch the connection once the
file is open; last, the SQL behind the operations.

Row states (column `state`), and who moves a row between them:

    pending ──lease──► leased ──settle: delivered──► delivered ──prune (delivered retention)──► gone
       ▲                 │ └────settle: dead letter──► dead ──prune (dead retention)──► gone
       │                 │                              │
       └─settle: retry───┘ (also: its lease expired,    └──requeue_dead──► pending
                             or `release` of an unsent send)

A session's head is its first live (pending or leased) row: only a pending head whose next attempt is
due is leased, with the ready rows behind it, so a session's rows reach Honcho in capture order and a
failed head blocks its own session only. Several processes may share the file (WAL, BEGIN IMMEDIATE for
every write); a crashed process's leases expire and its rows go out again, marked `ambiguous` (Honcho
may hold them: the worker asks before it sends them again).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import OutboxBusy, OutboxCorrupt, OutboxError, OutboxForeign, OutboxUnavailable
from ..names import chat_generation_of, session_id_for
from ..settings.config import Settings
from . import memory_log, processes
from .journal import FOLDER as JOURNAL_FOLDER
from .memory_log import KeptWrite, MemoryWrite
from .processes import Beat, SharedCircuit

# -- the file's schema -----------------------------------------------------------------------------

# `PRAGMA application_id` of every outbox this plugin writes: ASCII "HnHb" (Honcho hub). It lets the
# plugin tell its own file from any other SQLite database at `outbox_path` by the header (offset 68)
# before writing anything.
APPLICATION_ID = 0x486E4862

# Step N (a tuple of statements, run in one transaction) brings the database from user_version N to N+1.
# Append steps; never edit a shipped one: files written by every earlier version must still open.
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
        # Mark the file as ours. A new file carries the mark from its first write already (see _open);
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
    (
        # Known chat -> Honcho session mappings (the `sessions` command), recorded with each captured
        # message's events from this step on: a chat has several under a changed strategy or a project
        # attached after its first message. Bounded to the MAX_CHAT_SESSIONS most recently captured.
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
        # The processes that drain this outbox (storage/processes.py): one heartbeat row per delivery worker,
        # rewritten at most every few seconds, deleted at a clean stop, expired after an hour; at most
        # processes.MAX_PROCESSES rows.
        """CREATE TABLE worker_processes (
            owner              TEXT PRIMARY KEY,  -- the worker's lease owner (pid and a random part)
            pid                INTEGER NOT NULL,
            host               TEXT NOT NULL,
            started_at         REAL NOT NULL,     -- wall epoch s of its first beat
            beat_at            REAL NOT NULL,     -- of its latest beat
            beat_every_s       REAL NOT NULL,     -- the longest it means to go between beats
            state              TEXT NOT NULL,     -- running, idle, paused, circuit_open, error
            reason             TEXT,              -- why paused or failing: a setting's name or an error code
            circuit_kind       TEXT,              -- the circuit it holds: unreachable, auth, sdk_missing
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
        # The unreachable-server circuit every process of this outbox honours, one row per destination while
        # it is open; a success deletes it.
        """CREATE TABLE shared_circuits (
            destination TEXT PRIMARY KEY,  -- API URL + workspace, never the key
            code        TEXT NOT NULL,     -- unreachable, connect_timeout, timeout, reset
            open_until  REAL NOT NULL,     -- wall epoch s
            failures    INTEGER NOT NULL,  -- consecutive openings, for the backoff
            opened_at   REAL NOT NULL      -- when it was opened or last extended
        )""",
    ),
    (
        # Chats the user asked to forget (ops/forget_chat.py): the chat's later messages go to a session of the
        # next generation (names.session_id_for), and messages captured up to `forgotten_at` (still in
        # a capture journal then) are not queued. At most MAX_CHAT_SESSIONS rows, the oldest forgets go first.
        """CREATE TABLE forgotten_chats (
            destination  TEXT NOT NULL,        -- API URL + workspace, never the key
            chat_id      TEXT NOT NULL,
            generation   INTEGER NOT NULL,     -- how often it was forgotten
            forgotten_at REAL NOT NULL,        -- wall epoch s of the latest forget
            PRIMARY KEY (destination, chat_id)
        )""",
        # The forgotten chats' own sessions: no row of theirs is leased again, none is queued again, and
        # `deleted_at` says when Honcho accepted the session's deletion (or held none).
        """CREATE TABLE forgotten_sessions (
            destination  TEXT NOT NULL,
            session_id   TEXT NOT NULL,
            chat_id      TEXT NOT NULL,
            forgotten_at REAL NOT NULL,
            deleted_at   REAL,
            PRIMARY KEY (destination, session_id)
        )""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)

MAX_CHAT_SESSIONS = 10_000  # chat -> session mappings kept; the least recently captured go first

# The versions an outbox could have before the step above marked it: such a file carries application id 0,
# and only the first step's `events` table tells it from another program's database.
UNMARKED_VERSIONS = range(1, 3)


def _refuse_newer(conn: sqlite3.Connection) -> int:
    """The file's schema version; raises, having written nothing, if a newer plugin wrote it."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise OutboxCorrupt("outbox schema is newer than this plugin")
    return version


def _is_unmarked_outbox(conn: sqlite3.Connection) -> bool:
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


# -- errors ------------------------------------------------------------------------------------------

# Primary SQLite result codes (the low byte of extended codes).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


@contextmanager
def _translated() -> Iterator[None]:
    """sqlite3 and OS errors raised inside come out as OutboxError kinds, judged by their codes, never by
    message text (which may hold the path). Opening the file and every transaction go through here."""
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


# -- opening the file ---------------------------------------------------------------------------------

# The files SQLite keeps beside the database; SQLite opens them by name.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")

# What else the plugin keeps beside the outbox (the capture journal's folder; recall's cache marker is
# named after the outbox file): a folder holding only these and the outbox's own files is the plugin's.
PLUGIN_FOLDER_ENTRIES = frozenset({JOURNAL_FOLDER})

# A WAL checkpoint that resets the log truncates it to this size. SQLite checkpoints on its own once the
# log holds about 1,000 pages (≈ 4 MB), so normal operation stays within it without shrinking and
# regrowing the file; a burst (large pastes while a reader held back the checkpoint) shrinks back to it.
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
            conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
            _refuse_swapped(path, judged)
            conn.execute("PRAGMA secure_delete=ON")  # deleted rows are overwritten, not left readable in free pages
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
            if new:
                # The first write, still in rollback mode so it lands in the main file: free pages can be
                # given back (only settable before the first table), and the mark says the file is ours even
                # if this process dies before its first migration. Two transactions (SQLite ignores the vacuum
                # mode inside one): `_admit` knows the file between them.
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            _refuse_newer(conn)  # again on this connection: a newer plugin's version may be only in the WAL
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
                raise OutboxUnavailable("outbox cannot use WAL mode here")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("PRAGMA cache_size=-16000")  # 16 MB: a full outbox of 10,000 rows stays in memory
            return conn
    except BaseException:
        if conn is not None:
            conn.close()
        raise


# Why no descriptor of our own ever reads the database file: closing any descriptor of a file drops
# every POSIX lock this process holds on it, and SQLite's locks are POSIX locks. Another connection of
# this process (the worker's, capture's) would lose its locks, and other processes could then write
# under it. SQLite's own connections share their descriptors and defer such closes, so the header is
# read through one of them; the names are checked with lstat, which opens nothing.

def _refuse_links(path: str) -> None:
    """A symbolic link at the outbox or at a name SQLite opens beside it would send our writes elsewhere."""
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
    """An empty owner-only file; O_EXCL neither follows a link nor opens a file that already exists, so
    the descriptor closed here is one nobody else can hold locks through."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass  # there already, or created by another process meanwhile: judged next like any other file


def _admit(path: str, judged: os.stat_result, busy_timeout_s: float) -> bool:
    """Whether the file is new (empty, or begun by a connection of ours); raises, having written nothing, unless it is an outbox of this plugin.

    SQLite reads the header on a connection that cannot write: the magic (else "not a database"), the
    application id (offset 68) and the user version (offset 60). Files from before the mark carry id 0;
    our `events` table then tells them apart. Without WAL frames the main file holds everything, and
    `immutable` reads it without creating -wal or -shm files beside someone else's database. With frames,
    a read-only connection reads them too: a plugin from before the mark that was killed before any
    checkpoint left its first migration there, and the main file at user version 0."""
    wal_has_frames = _wal_size(path) > 0
    if judged.st_size == 0:
        if wal_has_frames:
            raise OutboxForeign("outbox file is empty but its WAL is not; left untouched")
        return True
    uri = "file:" + urllib.parse.quote(path) + ("?mode=ro" if wal_has_frames else "?mode=ro&immutable=1")
    look = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
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
    """Whether the file is a new outbox between its first two writes (see `_open`): incremental vacuum,
    yet no stamp, no version and nothing stored. SQLite commits the vacuum mode on its own (it ignores
    it inside a transaction), so another thread or process opening the outbox at that moment sees this,
    and a kill at that moment leaves it for good. It holds no data of anyone's: it is stamped as new."""
    return (look.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
            and look.execute("PRAGMA user_version").fetchone()[0] == 0
            and look.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)


def _wal_size(path: str) -> int:
    try:
        return os.lstat(path + "-wal").st_size
    except FileNotFoundError:
        return 0


def _make_private(path: str, folder: str) -> None:
    """Owner-only modes for an admitted outbox: the file, its companions, and the folder when it is ours.

    Only what this user owns. The folder only when it holds nothing but the outbox, its companion files
    (names starting with the outbox's name) and PLUGIN_FOLDER_ENTRIES, and is not sticky: a folder that
    holds anything else (a home folder, a shared one, /tmp) was not made for the outbox and keeps its mode. Files are changed
    by name (see above: no descriptor of ours on them) after lstat found a regular file; were it swapped
    for a link meanwhile, the worst is another file of ours turned owner-only. Best effort: a file system
    without modes must not make the outbox unusable."""
    for name in (path, *(path + suffix for suffix in COMPANION_SUFFIXES)):
        try:
            st = os.lstat(name)
            if stat.S_ISREG(st.st_mode) and _needs_private(st):
                os.chmod(name, 0o600)
        except OSError:
            continue  # absent (SQLite creates it with the database's mode), or a volume without modes
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        name = os.path.basename(path)
        st = os.fstat(folder_fd)
        ours = all(entry == name or entry.startswith((name + "-", name + ".")) or entry in PLUGIN_FOLDER_ENTRIES
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


# -- records -----------------------------------------------------------------------------------------

class EventState(str, Enum):
    """The `state` column (see the module's diagram)."""

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
    # The Agent Zero chat and project it was captured in: recorded in `chat_sessions` (not on the row, and
    # never read back on a leased event).
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
    reconcile_failed: bool = False  # asking Honcho failed permanently once more (counts toward the limit)


@dataclass
class Settlement:
    """The fate of one round of sends, recorded together.

    Delivered ids are recorded whoever holds their lease now (Honcho has them); retries and dead letters
    only while the settling owner still holds the lease, so a worker that lost its lease cannot release
    rows another worker is sending.
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
    """A chat's forget as the outbox did it: its own sessions (marked: never leased or queued again), those
    it shares with other chats (a project's, the global one: left alone), the rows deleted and those still
    leased by a live worker (deleted once their sends ended: see `drop_forgotten_rows`)."""

    generation: int
    sessions: tuple[str, ...]
    shared: tuple[str, ...]
    deleted: int
    leased: int


# -- the outbox ----------------------------------------------------------------------------------------

_LIVE = "('pending', 'leased')"
_COLUMNS = "id, destination, workspace_id, session_id, peer_id, role, content, captured_at, scope_id"
MAX_IDS_PER_STATEMENT = 500  # well under SQLite's variable limit

# How the transaction helper begins and ends each kind of transaction.
_READ, _WRITE, _AUTOCOMMIT = "read", "write", "autocommit"


class Outbox:
    """Operations on the outbox file at `path`; safe to share between threads of one process.

    Each operation is one short transaction (`_transaction`); threads of this process queue for the
    connection, processes for SQLite's write lock, neither longer than `busy_timeout_s`."""

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_s: float = 0.25,
                 max_rows: int = 10_000, dead_retention_s: float = 30 * 86_400.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._conn = _open(path, synchronous, busy_timeout_s)
        self._lock = threading.Lock()
        self._busy_timeout_s = busy_timeout_s
        self._max_rows = max_rows
        self._dead_retention_s = dead_retention_s
        self._clock = clock
        self.closed = False
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    @classmethod
    def for_settings(cls, settings: Settings, *, busy_timeout_s: float | None = None,
                     synchronous: str | None = None, clock: Callable[[], float] = time.time) -> Outbox:
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

    # -- capture ---------------------------------------------------------------------------------------

    def enqueue_batches(self, batches: Sequence[Sequence[NewEvent]], *,
                        asked_again: Collection[str] = ()) -> list[EnqueueResult]:
        """Store several messages' events in order in one transaction (ignoring ids already stored),
        stopping at the first message that does not fit even after pruning terminal rows. `asked_again`:
        forgotten chats whose messages from before the forget a person asked to queue again (backfill's
        `--include-forgotten`): they go to the chat's current generation like later ones.

        Returns one result per stored or refused batch; batches after a refused one are not attempted.
        """
        results = []
        with self._transaction(_WRITE) as (conn, now):
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
                        f"INSERT OR IGNORE INTO events ({_COLUMNS}, next_attempt_at, updated_at, ambiguous)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (e.id, e.destination, e.workspace_id, e.session_id, e.peer_id, e.role, e.content,
                         e.captured_at, e.scope_id, now, now, int(e.ambiguous))).rowcount
                if inserted and events[0].chat_id is not None:
                    _record_chat_session(conn, events[0], max(e.captured_at for e in events))
                results.append(EnqueueResult(inserted, len(events) - inserted, 0))
        return results

    # -- delivery --------------------------------------------------------------------------------------

    def settle_and_lease(self, settlement: Settlement, owner: str, count: int, batch_size: int, lease_s: float,
                         destination: str | None = None, renew: Sequence[str] = ()) -> list[list[LeasedEvent]]:
        """The worker's one transaction (one fsync): record finished sends (retries and dead letters only
        of rows `owner` still holds), extend `owner`'s leases of the `renew` ids still on the wire, return
        expired leases to pending (marked ambiguous), and lease up to `count` batches of different sessions
        (each the oldest ready session head and the ready rows behind it), oldest head first."""
        with self._transaction(_WRITE) as (conn, now):
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
        """Return `owner`'s leased rows among `ids`, whose send was withdrawn before anything of them left, to
        pending at once: no attempt counted, their marks (ambiguous, last error) kept; returns how many. It
        waits for the lock only briefly (a drain's time is up): rows it cannot release go out after their lease."""
        with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
            return self._set(conn, "state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = ?",
                             (now,), list(ids), "state = 'leased' AND lease_owner = ?", (owner,))

    def adopt_unsent(self, old_destination: str, destination: str) -> int:
        """Rows captured for `old_destination` and never sent (the URL could not be used then) go to
        `destination`; returns how many. Only pending rows that were never attempted move."""
        with self._transaction(_WRITE) as (conn, now):
            return conn.execute(
                "UPDATE events SET destination = ?, updated_at = ? WHERE destination = ? AND state = 'pending'"
                " AND attempts = 0", (destination, now, old_destination)).rowcount

    def prune(self, delivered_retention_s: float) -> int:
        """Delete delivered rows older than their retention and dead rows older than theirs; returns how
        many. Then, best effort, give their pages back and empty the WAL of their old copies, so that a
        pruned message is gone from the disk too, not only from the table."""
        with self._transaction(_WRITE) as (conn, now):
            removed = self._prune_terminal(conn, now - delivered_retention_s, now - self._dead_retention_s, None)
            processes.expire(conn, now)  # and what dead processes left
        self.reclaim_space(deleted=removed > 0)
        return removed

    def reclaim_space(self, deleted: bool = True) -> None:
        """Best effort, after rows were deleted: give their pages back and empty the WAL of their old
        copies (secure_delete has zeroed them in the database), so their text is gone from the disk too."""
        with self._transaction(_AUTOCOMMIT) as (conn, now):
            idle = conn.execute(f"SELECT 1 FROM events WHERE state IN {_LIVE} LIMIT 1").fetchone() is None
            _reclaim_space(conn, queue_idle=idle, deleted=deleted)

    # -- operations ------------------------------------------------------------------------------------

    def requeue_dead(self, limit: int) -> int:
        """Give at most `limit` dead letters (oldest first) a fresh set of attempts. Rows Honcho may
        already hold stay marked so: they are reconciled before they are sent."""
        with self._transaction(_WRITE) as (conn, now):
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM events WHERE state = 'dead' ORDER BY seq LIMIT ?", (max(0, int(limit)),))]
            return self._set(conn, "state = 'pending', attempts = 0, reconcile_failures = 0, next_attempt_at = ?,"
                             " error_code = NULL, updated_at = ?", (now, now), ids, "state = 'dead'")

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """Oldest dead letters: id, session, error code, attempts; never their content."""
        with self._transaction(_READ) as (conn, now):
            rows = conn.execute(
                "SELECT id, session_id, error_code, attempts, updated_at FROM events WHERE state = 'dead'"
                " ORDER BY seq LIMIT ?", (max(0, int(limit)),)).fetchall()
        return [{"id": r[0], "session_id": r[1], "error_code": r[2], "attempts": r[3], "dead_since": r[4]}
                for r in rows]

    def contents(self, limit: int = 100) -> list[str]:
        """Queued texts, oldest first: for the demo and tests only, never for status or logs."""
        with self._transaction(_READ) as (conn, now):
            return [r[0] for r in conn.execute("SELECT content FROM events ORDER BY seq LIMIT ?", (limit,))]

    def stats(self) -> dict:
        """Counts by state, dead letters by error code, oldest pending capture time and next attempt time:
        no content, no path. All from one snapshot, so the figures agree with each other."""
        with self._transaction(_READ) as (conn, now):
            counts = dict(conn.execute("SELECT state, count(*) FROM events GROUP BY state").fetchall())
            oldest, next_at = conn.execute(
                "SELECT min(captured_at), min(next_attempt_at) FROM events WHERE state = 'pending'").fetchone()
            dead_by_code = dict(conn.execute(
                "SELECT error_code, count(*) FROM events WHERE state = 'dead' GROUP BY error_code").fetchall())
        return {"counts": {s.value: counts.get(s.value, 0) for s in EventState}, "dead_by_code": dead_by_code,
                "oldest_pending_captured_at": oldest, "next_attempt_at": next_at}

    def chat_sessions(self, limit: int = 100) -> list[dict]:
        """Known chat -> Honcho session mappings, most recently captured first: chat id, project, session id,
        first and last capture times; never content."""
        with self._transaction(_READ) as (conn, now):
            rows = conn.execute(
                "SELECT chat_id, project, session_id, first_captured_at, last_captured_at FROM chat_sessions"
                " ORDER BY last_captured_at DESC, rowid DESC LIMIT ?", (max(0, min(int(limit), MAX_CHAT_SESSIONS)),))
            return [{"chat_id": r[0], "project": r[1], "session_id": r[2], "first_captured_at": r[3],
                     "last_captured_at": r[4]} for r in rows]

    # -- forgetting a chat (ops/forget_chat.py runs the whole forget) ------------------------------------

    def begin_forget(self, destination: str, chat_id: str) -> ForgetRows:
        """Forget `chat_id` here, in one transaction: its next messages go to the next generation's session;
        its own sessions (those it was captured into, those of an earlier forget Honcho has not confirmed,
        and its current generation's) are marked, so no row of theirs is leased or queued again; their rows
        are deleted but those a worker holds leased, and the chat's mappings go."""
        with self._transaction(_WRITE) as (conn, now):
            found = _forgotten_chat(conn, destination, chat_id)
            current = found[0] if found else 0
            mapped = [r[0] for r in conn.execute(
                "SELECT session_id FROM chat_sessions WHERE destination = ? AND chat_id = ?", (destination, chat_id))]
            unconfirmed = [r[0] for r in conn.execute(
                "SELECT session_id FROM forgotten_sessions WHERE destination = ? AND chat_id = ? AND deleted_at IS NULL",
                (destination, chat_id))]
            own = list(dict.fromkeys([session_id_for(chat_id, current), *unconfirmed,
                                      *(s for s in mapped if chat_generation_of(chat_id, s) is not None)]))
            shared = tuple(s for s in mapped if chat_generation_of(chat_id, s) is None)
            conn.execute("INSERT INTO forgotten_chats (destination, chat_id, generation, forgotten_at) VALUES"
                         " (?, ?, ?, ?) ON CONFLICT (destination, chat_id) DO UPDATE SET generation = excluded.generation,"
                         " forgotten_at = excluded.forgotten_at", (destination, chat_id, current + 1, now))
            for session_id in own:
                conn.execute("INSERT INTO forgotten_sessions (destination, session_id, chat_id, forgotten_at) VALUES"
                             " (?, ?, ?, ?) ON CONFLICT (destination, session_id) DO UPDATE SET deleted_at = NULL,"
                             " forgotten_at = excluded.forgotten_at", (destination, session_id, chat_id, now))
                conn.execute("DELETE FROM chat_sessions WHERE destination = ? AND chat_id = ? AND session_id = ?",
                             (destination, chat_id, session_id))
            deleted, leased = _drop_rows(conn, destination, own, now)
            _bound_forgotten(conn)
            return ForgetRows(current + 1, tuple(own), shared, deleted, leased)

    def drop_forgotten_rows(self, destination: str, sessions: Sequence[str]) -> tuple[int, int]:
        """Delete the rows of these (forgotten) sessions that no live lease holds: (deleted, still leased).
        A lease whose time ran out counts as ended: its holder died or stalled."""
        with self._transaction(_WRITE) as (conn, now):
            return _drop_rows(conn, destination, list(sessions), now)

    def forgotten_session_deleted(self, destination: str, session_id: str) -> None:
        """Record that Honcho accepted the session's deletion (or held no such session)."""
        with self._transaction(_WRITE) as (conn, now):
            conn.execute("UPDATE forgotten_sessions SET deleted_at = ? WHERE destination = ? AND session_id = ?",
                         (now, destination, session_id))

    def chat_generation(self, destination: str, chat_id: str) -> int:
        """How often `chat_id` was forgotten (0: never): its messages go to that generation's session."""
        with self._transaction(_READ) as (conn, now):
            found = _forgotten_chat(conn, destination, chat_id)
        return found[0] if found else 0

    # -- the memory tool's record (memory_log owns the table's rows) -----------------------------------

    def record_memory_write(self, write: MemoryWrite) -> None:
        """Keep one record of the memory tool's writes; only the newest memory_log.MAX_RECORDS stay."""
        with self._transaction(_WRITE) as (conn, now):
            memory_log.insert(conn, write, now)

    def memory_writes(self, latest: int = 3) -> dict:
        """Counts of the kept memory-tool writes and the newest ids, kinds and times; never their text."""
        with self._transaction(_READ) as (conn, now):
            return memory_log.summary(conn, latest)

    def memory_records(self, destination: str, observer_id: str, observed_id: str, limit: int,
                       since: float | None = None) -> list[KeptWrite]:
        """The newest `limit` kept writes of `destination` about these peers (those kept at `since` or later,
        when given), newest first, with their text: for the memory inspector only (status reads
        `memory_writes`, which holds none)."""
        with self._transaction(_READ) as (conn, now):
            return memory_log.records(conn, destination, observer_id, observed_id, limit, since)

    # -- the processes that drain this outbox (processes owns the tables' rows) ---------------------------
    # Writes wait at most processes.BEAT_WAIT_S for the lock (then OutboxBusy: the caller skips them).

    def beat(self, beat: Beat) -> None:
        """Record a worker's heartbeat."""
        with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
            processes.beat(conn, beat, now)

    def forget_process(self, owner: str) -> None:
        """Delete a worker's heartbeat row (it stopped cleanly)."""
        with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
            processes.forget(conn, owner)

    def processes(self) -> list[dict]:
        """The heartbeat rows, newest beat first (processes.COLUMNS); ids, times, states, codes and counts only."""
        with self._transaction(_READ) as (conn, now):
            return processes.listed(conn)

    def shared_circuit(self, destination: str) -> SharedCircuit | None:
        """`destination`'s unreachable circuit as its row says (for status); None when closed or unreadable."""
        with self._transaction(_READ, processes.BEAT_WAIT_S) as (conn, now):
            return processes.shared_circuit(conn, destination)

    def follow_shared_circuit(self, destination: str, max_s: float) -> SharedCircuit | None:
        """`destination`'s unreachable circuit as a worker honours it: open at most `max_s` from now; None when
        closed. A row that says more (a clock running ahead) is bounded for every process, one that does not
        parse deleted; while another writer holds the outbox the bound holds here only, and a later reading
        writes it."""
        with self._transaction(_READ, processes.BEAT_WAIT_S) as (conn, now):
            found, untrusted = processes.bounded_shared(conn, destination, now, max_s)
        if untrusted:
            try:
                with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
                    found = processes.bound_shared(conn, destination, now, max_s)
            except OutboxBusy:
                pass
        return found

    def open_shared_circuit(self, destination: str, circuit: SharedCircuit) -> None:
        """Open or extend `destination`'s shared circuit (see processes.open_shared)."""
        with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
            processes.open_shared(conn, destination, circuit, now)

    def close_shared_circuit(self, destination: str, opened_until: float) -> bool:
        """Close `destination`'s shared circuit unless it was opened after `opened_until`; whether it closed."""
        with self._transaction(_WRITE, processes.BEAT_WAIT_S) as (conn, now):
            return processes.close_shared(conn, destination, opened_until)

    # -- the one transaction helper ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, kind: str, wait_s: float | None = None) -> Iterator[tuple[sqlite3.Connection, float]]:
        """The only way to the connection of an open outbox: yields it and the time the transaction
        began (one reading of the clock: every row it touches carries the same time).

        `_WRITE`: BEGIN IMMEDIATE (the write lock up front, so two writers never deadlock), COMMIT, and
        ROLLBACK when anything raises. `_READ`: several reads from one snapshot, ended by ROLLBACK
        (nothing was written). `_AUTOCOMMIT`: statements SQLite refuses inside a transaction (VACUUM,
        checkpoints). sqlite3 and OS errors come out as OutboxError kinds (`_translated`).

        `wait_s`, when shorter than the outbox's busy timeout, bounds this transaction's wait for the
        locks instead (for writes that are better skipped than waited for)."""
        wait = self._busy_timeout_s if wait_s is None else min(wait_s, self._busy_timeout_s)
        # Threads of this process queue here; they wait no longer than SQLite would for another process.
        if not self._lock.acquire(timeout=wait):
            raise OutboxBusy("outbox is in use by another thread")
        try:
            if self.closed:
                raise OutboxError("outbox is closed")
            now = self._clock()
            with _translated(), self._waiting(wait):
                if kind == _AUTOCOMMIT:
                    yield self._conn, now
                    return
                self._conn.execute("BEGIN IMMEDIATE" if kind == _WRITE else "BEGIN")
                try:
                    yield self._conn, now
                    if kind == _WRITE:
                        self._conn.execute("COMMIT")
                finally:
                    if self._conn.in_transaction:  # a read, or a write that raised (COMMIT itself included)
                        try:
                            self._conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass  # the transaction may already be gone; the original error matters
        finally:
            self._lock.release()

    @contextmanager
    def _waiting(self, wait_s: float) -> Iterator[None]:
        """SQLite's busy timeout set to `wait_s` for the statements inside, then back to the outbox's own."""
        if wait_s == self._busy_timeout_s:
            yield
            return
        self._conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            yield
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")

    def _migrate(self) -> None:
        """Apply the missing MIGRATIONS steps, one transaction each. Safe when several processes race:
        the version is read again under the write lock."""
        with _translated():
            version = _refuse_newer(self._conn)
        while version < SCHEMA_VERSION:
            with self._transaction(_WRITE) as (conn, now):
                version = _refuse_newer(conn)
                if version < SCHEMA_VERSION:
                    for statement in MIGRATIONS[version]:
                        conn.execute(statement)
                    version += 1
                    conn.execute(f"PRAGMA user_version = {int(version)}")

    # -- the SQL behind the operations (inside the caller's transaction) -----------------------------

    def _has_room(self, conn: sqlite3.Connection, needed: int, now: float) -> bool:
        excess = conn.execute("SELECT count(*) FROM events").fetchone()[0] + needed - self._max_rows
        if excess > 0:
            excess -= self._prune_terminal(conn, now, now - self._dead_retention_s, excess)
        return excess <= 0

    def _prune_terminal(self, conn: sqlite3.Connection, delivered_before: float, dead_before: float,
                        limit: int | None) -> int:
        removed = 0
        for state, before in (("delivered", delivered_before), ("dead", dead_before)):
            remaining = -1 if limit is None else limit - removed
            if remaining == 0:
                break
            removed += conn.execute(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE state = ? AND updated_at <= ?"
                " ORDER BY updated_at LIMIT ?)", (state, before, remaining)).rowcount
        return removed

    def _settle(self, conn: sqlite3.Connection, settlement: Settlement, now: float, owner: str) -> int:
        held, fence = "state = 'leased' AND lease_owner = ?", (owner,)  # see Settlement: only `owner`'s rows
        changed = self._set(conn, "state = 'delivered', error_code = NULL, lease_owner = NULL,"
                            " lease_expires_at = NULL, updated_at = ?", (now,), settlement.delivered,
                            f"state IN {_LIVE}")
        dead_by_code: dict[str, list[str]] = {}
        for event_id, code in settlement.dead:
            dead_by_code.setdefault(code, []).append(event_id)
        for code, ids in dead_by_code.items():
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

    def _renew(self, conn: sqlite3.Connection, owner: str, ids: Sequence[str], expires_at: float, now: float) -> int:
        return self._set(conn, "lease_expires_at = ?, updated_at = ?", (expires_at, now), list(ids),
                         "state = 'leased' AND lease_owner = ?", (owner,))

    def _lease_one(self, conn: sqlite3.Connection, owner: str, batch_size: int, lease_s: float,
                   destination: str | None, now: float) -> list[LeasedEvent]:
        batch = self._find_batch(conn, batch_size, destination, now)
        self._set(conn, "state = 'leased', lease_owner = ?, lease_expires_at = ?, updated_at = ?",
                  (owner, now + lease_s, now), [e.id for e in batch], "state = 'pending'")
        return batch

    def _find_batch(self, conn: sqlite3.Connection, batch_size: int, destination: str | None,
                    now: float) -> list[LeasedEvent]:
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
        for (event_id, row_destination, workspace_id, session_id, peer_id, role, content, captured_at, scope_id,
             seq, attempts, error_code, ambiguous, reconcile_failures, state, next_attempt_at) in rows:
            if state != "pending" or next_attempt_at > now:
                break  # keep order: stop at the first row that is not ready
            batch.append(LeasedEvent(event_id, row_destination, workspace_id, session_id, peer_id, role, content,
                                     captured_at, scope_id, ambiguous=bool(ambiguous), seq=seq, attempts=attempts,
                                     error_code=error_code, reconcile_failures=reconcile_failures))
        return batch

    def _recover(self, conn: sqlite3.Connection, now: float) -> int:
        # The holder died or stalled after its request may have reached Honcho: reconcile before resending.
        return conn.execute(
            "UPDATE events SET state = 'pending', ambiguous = 1, lease_owner = NULL, lease_expires_at = NULL,"
            " updated_at = ? WHERE state = 'leased' AND lease_expires_at <= ?", (now, now)).rowcount

    def _set(self, conn: sqlite3.Connection, assignments: str, params: tuple, ids: list[str], guard: str,
             guard_params: tuple = ()) -> int:
        changed = 0
        for start in range(0, len(ids), MAX_IDS_PER_STATEMENT):
            chunk = ids[start:start + MAX_IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            changed += conn.execute(f"UPDATE events SET {assignments} WHERE id IN ({marks}) AND {guard}",
                                    (*params, *chunk, *guard_params)).rowcount
        return changed


def with_existing_outbox(settings: Settings, work: Callable, missing: Any) -> Any:
    """`work(outbox)` on a short-lived connection, or `missing` when nothing was captured yet: reading
    status, dead letters or a chat's generation never creates an outbox. Raises OutboxError."""
    if not os.path.exists(settings.outbox_path):
        return missing
    box = Outbox.for_settings(settings, busy_timeout_s=5.0)
    try:
        return work(box)
    finally:
        box.close()


def _record_chat_session(conn: sqlite3.Connection, event: NewEvent, captured_at: float) -> None:
    """Record that `event`'s chat was captured into its session at `captured_at` (inside the enqueue's
    transaction). The project is the one of the latest capture. A new mapping beyond MAX_CHAT_SESSIONS
    drops the least recently captured: new mappings are rare (a chat's first message, a new strategy), so
    the count is taken only then."""
    key = (event.destination, event.chat_id, event.session_id)
    updated = conn.execute(
        "UPDATE chat_sessions SET project = CASE WHEN ? >= last_captured_at THEN ? ELSE project END,"
        " first_captured_at = min(first_captured_at, ?), last_captured_at = max(last_captured_at, ?)"
        " WHERE destination = ? AND chat_id = ? AND session_id = ?",
        (captured_at, event.project, captured_at, captured_at, *key)).rowcount
    if updated:
        return
    conn.execute("INSERT INTO chat_sessions (destination, chat_id, session_id, project, first_captured_at,"
                 " last_captured_at) VALUES (?, ?, ?, ?, ?, ?)", (*key, event.project, captured_at, captured_at))
    conn.execute("DELETE FROM chat_sessions WHERE rowid IN (SELECT rowid FROM chat_sessions"
                 " ORDER BY last_captured_at, rowid LIMIT max(0, (SELECT count(*) FROM chat_sessions) - ?))",
                 (MAX_CHAT_SESSIONS,))


def _forgotten_chat(conn: sqlite3.Connection, destination: str, chat_id: str) -> tuple[int, float] | None:
    """(its generation, when it was last forgotten) of a chat forgotten here, None for one never forgotten."""
    return conn.execute("SELECT generation, forgotten_at FROM forgotten_chats WHERE destination = ? AND chat_id = ?",
                        (destination, chat_id)).fetchone()


def _after_forget(conn: sqlite3.Connection, events: Sequence[NewEvent],
                  asked_again: Collection[str] = ()) -> Sequence[NewEvent]:
    """One message's events as they may be queued after a forget (inside the enqueue's transaction): none
    when its chat was forgotten after it was captured (it waited in a capture journal meanwhile), unless
    the chat is in `asked_again`, or when its session is a forgotten one; moved to the chat's current
    generation when capture named the chat's first session (capture does not know generations: it must
    not read the outbox on the turn's path)."""
    if not events:
        return events
    first = events[0]
    if first.chat_id is not None:
        forgotten = _forgotten_chat(conn, first.destination, first.chat_id)
        if forgotten is not None:
            generation, forgotten_at = forgotten
            if max(e.captured_at for e in events) <= forgotten_at and first.chat_id not in asked_again:
                return []
            if first.session_id == session_id_for(first.chat_id, 0):
                renamed = session_id_for(first.chat_id, generation)
                events = [dataclasses.replace(e, session_id=renamed) for e in events]
    if conn.execute("SELECT 1 FROM forgotten_sessions WHERE destination = ? AND session_id = ?",
                    (events[0].destination, events[0].session_id)).fetchone() is not None:
        return []
    return events


def _drop_rows(conn: sqlite3.Connection, destination: str, sessions: list[str], now: float) -> tuple[int, int]:
    """Delete these sessions' rows but those a live lease holds: (deleted, still leased)."""
    deleted = leased = 0
    for start in range(0, len(sessions), MAX_IDS_PER_STATEMENT):
        chunk = sessions[start:start + MAX_IDS_PER_STATEMENT]
        marks = ", ".join("?" * len(chunk))
        held = "state = 'leased' AND lease_expires_at > ?"
        deleted += conn.execute(f"DELETE FROM events WHERE destination = ? AND session_id IN ({marks})"
                                f" AND NOT ({held})", (destination, *chunk, now)).rowcount
        leased += conn.execute(f"SELECT count(*) FROM events WHERE destination = ? AND session_id IN ({marks})"
                               f" AND {held}", (destination, *chunk, now)).fetchone()[0]
    return deleted, leased


def _bound_forgotten(conn: sqlite3.Connection) -> None:
    """At most MAX_CHAT_SESSIONS forgotten chats: the oldest forgets go, with their sessions' marks (such a
    chat's next messages start over at its first session id, which Honcho creates again, empty)."""
    old = conn.execute("SELECT destination, chat_id FROM forgotten_chats ORDER BY forgotten_at, rowid LIMIT"
                       " max(0, (SELECT count(*) FROM forgotten_chats) - ?)", (MAX_CHAT_SESSIONS,)).fetchall()
    for destination, chat_id in old:
        conn.execute("DELETE FROM forgotten_sessions WHERE destination = ? AND chat_id = ? AND deleted_at IS NOT NULL",
                     (destination, chat_id))
        conn.execute("DELETE FROM forgotten_chats WHERE destination = ? AND chat_id = ?", (destination, chat_id))


# A forgotten session's rows are never leased again: a send of its rows that was on the wire when the chat was
# forgotten may come back as a retry, and a dead holder's lease returns its rows to pending; ops/forget_chat.py
# deletes them once no live lease holds any.
_NOT_FORGOTTEN = """NOT EXISTS (SELECT 1 FROM forgotten_sessions f
    WHERE f.destination = e.destination AND f.session_id = e.session_id)"""

# How many of the oldest pending rows the lease looks at before walking session heads instead.
NEAR_FRONT_ROWS = 32

# The oldest ready session head among the oldest pending rows: found here whenever the queue's front is
# ready (the usual case), in time that does not grow with the backlog or the number of sessions.
_READY_HEAD_NEAR_FRONT = f"""SELECT destination, session_id FROM (
    SELECT seq, destination, session_id, next_attempt_at FROM events WHERE state = 'pending'
    ORDER BY seq LIMIT {NEAR_FRONT_ROWS}) e
WHERE e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?) AND NOT EXISTS (SELECT 1 FROM events p
    WHERE p.destination = e.destination AND p.session_id = e.session_id AND p.state IN {_LIVE} AND p.seq < e.seq)
    AND {_NOT_FORGOTTEN}
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
WHERE e.state = 'pending' AND e.next_attempt_at <= ? AND (? IS NULL OR e.destination = ?) AND {_NOT_FORGOTTEN}
ORDER BY e.seq LIMIT 1"""


def _reclaim_space(conn: sqlite3.Connection, queue_idle: bool, deleted: bool) -> None:
    """Give the pages of deleted rows back to the file system and empty the WAL of their old copies.

    Best effort, never raises: each step is bounded by the busy timeout, and a step that meets a lock
    or a full disk is tried again at a later prune. A file created before auto_vacuum was set needs one
    full VACUUM to switch it on; it takes the write lock for as long as it copies the database (and as
    much free space), so it runs only while no row waits for delivery."""
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
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # busy readers: tried again later
        except sqlite3.Error:
            pass
