"""Opening the outbox database: whose file it is, owner-only, WAL, durability, migrations, disk
reclaim, error translation."""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from contextlib import contextmanager
from typing import Iterator

from .journal import FOLDER as JOURNAL_FOLDER
from .schema import APPLICATION_ID, SchemaTooNew, is_unmarked_outbox, migrate, refuse_newer
from ..errors import OutboxBusy, OutboxCorrupt, OutboxError, OutboxForeign, OutboxUnavailable

# Primary SQLite result codes (the low byte of extended codes).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB

# The files SQLite keeps beside the database; SQLite opens them by name.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")

# What else the plugin keeps beside the outbox (the capture journal's folder; recall's cache marker is
# named after the outbox file): a folder holding only these and the outbox's own files is the plugin's.
PLUGIN_FOLDER_ENTRIES = frozenset({JOURNAL_FOLDER})

# A WAL checkpoint that resets the log truncates it to this size. SQLite checkpoints on its own once the
# log holds about 1,000 pages (≈ 4 MB), so normal operation stays within it without shrinking and
# regrowing the file; a burst (large pastes while a reader held back the checkpoint) shrinks back to it.
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024


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
    """Create (owner-only) or open the outbox at `path`, in WAL mode, migrated to the current schema.

    An existing file is judged by its header before anything writes to it: anything but an outbox of
    this plugin (or an empty file) is refused untouched."""
    if not os.path.isabs(path):
        raise OutboxUnavailable("outbox path must be absolute")
    if synchronous not in ("FULL", "NORMAL"):
        raise ValueError("synchronous must be FULL or NORMAL")
    conn = None
    try:
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
        refuse_newer(conn)  # again on this connection: a newer plugin's version may be only in the WAL
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
            refuse_newer(look)
            return False
        if is_unmarked_outbox(look):
            return False
        if _begun_by_us(look):
            return True
    finally:
        look.close()
    raise OutboxForeign("outbox file is another program's database; left untouched")


def _begun_by_us(look: sqlite3.Connection) -> bool:
    """Whether the file is a new outbox between its first two writes (see `connect`): incremental vacuum,
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


def reclaim_space(conn: sqlite3.Connection, queue_idle: bool, deleted: bool) -> None:
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


@contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Several reads from one snapshot (a deferred transaction that reads only); errors come out as
    OutboxError kinds."""
    try:
        conn.execute("BEGIN")
    except sqlite3.Error as exc:
        raise translate(exc) from exc
    try:
        yield conn
    except sqlite3.Error as exc:
        raise translate(exc) from exc
    finally:
        try:
            conn.execute("ROLLBACK")  # nothing was written: this ends the read and releases the snapshot
        except sqlite3.Error:
            pass  # the transaction may already be gone; the reads are done


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
