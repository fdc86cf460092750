"""The capture journal: what a capture hook accepted is written to a file before the hook returns,
so it survives the process being killed. The hook appends one record of redacted text to this
process's file, on Agent Zero's event loop where the outbox must not be touched; a writer thread
syncs the file (when durable) and moves the records into the outbox. The file of a process
that died is replayed by whoever takes its lock (docs/architecture.md, "Storage").
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import stat
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import JournalFull, JournalUnavailable

log = logging.getLogger(__name__)

FOLDER = "journal"  # beside the outbox file, once the plugin opened it as its own
PREFIX = "capture-"
CREATING = "."  # before PREFIX while a new journal is not locked yet: no replay takes it
MARK = ".beside-our-outbox"  # in a journal folder beside an outbox the plugin opened as its own
MAGIC = b"HJ1"
SUFFIX = ".journal"
MAX_HEADER_BYTES = 64 * 1024


@dataclass
class Entry:
    """One accepted message: its header and text (persisted unless only held), plus what only this
    process can use."""

    header: dict[str, Any]
    text: str
    size: int  # bytes it counts against the journal's limit
    # Callables of the live host; never persisted.
    local: dict[str, Any] = field(default_factory=dict)
    on_disk: bool = True  # False: held in memory until the writer redacts and persists it


def encode(header: dict[str, Any], text: str) -> bytes:
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    body = text.encode("utf-8", "surrogatepass")
    crc = zlib.crc32(body, zlib.crc32(head))
    return b"%s %08x %d %d\n%s%s\n" % (MAGIC, crc, len(head), len(body), head, body)


def decode_all(data: bytes) -> tuple[list[tuple[dict, str]], int]:
    """The records of one journal file, in order, and how many damaged records were skipped.

    Reading stops at a torn record at the end (a crash while appending: its hook never returned)."""
    records, damaged, at = [], 0, 0
    while at < len(data):
        line_end = data.find(b"\n", at, at + 64)
        if line_end < 0:
            break
        parts = data[at:line_end].split(b" ")
        try:
            magic, crc, head_len, body_len = (parts[0], int(parts[1], 16), int(parts[2]),
                                              int(parts[3]))
        except (IndexError, ValueError):
            break  # not a record start: nothing after it can be trusted to be aligned
        if magic != MAGIC or not 0 < head_len <= MAX_HEADER_BYTES or body_len < 0:
            break
        start = line_end + 1
        end = start + head_len + body_len
        if end + 1 > len(data):
            break  # torn at the end
        head, body = data[start:start + head_len], data[start + head_len:end]
        at = end + 1
        if zlib.crc32(body, zlib.crc32(head)) != crc or data[end:end + 1] != b"\n":
            damaged += 1
            continue
        try:
            records.append((json.loads(head), body.decode("utf-8", "surrogatepass")))
        except ValueError:
            damaged += 1
    # A held message is written when the writer has redacted it, after messages accepted meanwhile.
    records.sort(key=lambda record: record[0].get("n", 0) if isinstance(record[0], dict) else 0)
    return records, damaged


class Journal:
    """This process's journal file and the accepted entries not yet committed to the outbox."""

    def __init__(self, folder: str, *, max_entries: int, max_bytes: int,
                 durable: bool = True) -> None:
        self.folder = folder
        self.max_entries, self.max_bytes, self.durable = max_entries, max_bytes, durable
        self._lock = threading.Lock()
        # Held by the one writer pass moving entries into the outbox.
        self.writing = threading.Lock()
        self._entries: deque[Entry] = deque()
        self._bytes = 0
        self._unsynced = False  # a record was appended since the writer's last sync
        self._accepted = 0  # messages accepted so far: a record's `n`
        self._end = 0  # the file's length: its records that were written whole
        self._fd = -1
        self.path = ""

    def open(self) -> None:
        """Create and lock this process's file; raises JournalUnavailable.

        Created under a name `orphans` skips, renamed once locked: another process looking for dead
        processes' journals meanwhile would take an unlocked file for one of theirs."""
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
            path = os.path.join(self.folder, name)
            creating = os.path.join(self.folder, CREATING + name)
            fd = os.open(creating, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND
                         | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise JournalUnavailable(f"journal folder unavailable ({type(exc).__name__})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(creating, path)
        except OSError as exc:
            os.close(fd)
            _remove(creating)
            raise JournalUnavailable("journal file could not be locked") from exc
        self._fd, self.path = fd, path

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def append(self, header: dict[str, Any], text: str,
               local: dict[str, Any] | None = None) -> Entry:
        """Write one record of redacted text and keep it for the writer, which syncs it when
        durable; raises JournalError. No sync here: a sync holds the caller (Agent Zero's event
        loop) for milliseconds on a busy disk (bench/a0_turn.py), and the written record already
        survives the process being killed; the writer, woken at once, syncs before it commits."""
        with self._lock:
            header = {**header, "n": self._accepted + 1}
            record = encode(header, text)
            self._check_room(len(record))
            self._write(record)
            self._unsynced = self._unsynced or self.durable
            self._accepted += 1
            entry = Entry(header, text, len(record), dict(local or {}))
            self._keep(entry)
        return entry

    def hold(self, header: dict[str, Any], text: str, local: dict[str, Any] | None = None) -> Entry:
        """Keep one message in memory only, in accept order, for the writer to redact and `persist`;
        lost if the process dies first. Raises JournalError."""
        with self._lock:
            self._check_room(len(text))
            self._accepted += 1
            entry = Entry({**header, "n": self._accepted}, text, len(text), dict(local or {}),
                          on_disk=False)
            self._keep(entry)
        return entry

    def persist(self, entry: Entry, header: dict[str, Any], text: str) -> None:
        """Write a held entry's redacted `text` under `header` (the writer calls this, off the event
        loop, then syncs); it then survives the process. Raises JournalError; the entry stays
        held."""
        record = encode(header, text)
        with self._lock:
            if not self.is_open:
                raise JournalUnavailable("journal is not open")
            self._write(record)
            entry.header, entry.text, entry.on_disk = header, text, True
            self._bytes += len(record) - entry.size
            entry.size, fd = len(record), self._fd
        if self.durable:
            _sync(fd)

    def _check_room(self, size: int) -> None:
        if not self.is_open:
            raise JournalUnavailable("journal is not open")
        if len(self._entries) >= self.max_entries or self._bytes + size > self.max_bytes:
            raise JournalFull("journal full: the outbox has not taken earlier messages yet")

    def _keep(self, entry: Entry) -> None:
        self._entries.append(entry)
        self._bytes += entry.size

    def _write(self, record: bytes) -> None:
        """Append one whole record (under `_lock`), unsynced; a failed write leaves the file as it
        was."""
        try:
            written = os.write(self._fd, record)
            if written != len(record):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as exc:
            self._drop_partial()
            raise JournalUnavailable(f"journal write failed ({type(exc).__name__})") from exc
        self._end += len(record)

    def pending(self, limit: int) -> list[Entry]:
        """The oldest entries not yet committed, at most `limit`; first syncs what `append` wrote
        since the last sync (the writer calls this, off the event loop)."""
        with self._lock:
            fd = self._take_unsynced()
            entries = [self._entries[i] for i in range(min(limit, len(self._entries)))]
        if fd >= 0:
            _sync(fd)
        return entries

    def sync_appended(self) -> None:
        """Sync what `append` wrote since the last sync (the writer, off the event loop, while its
        pass waits)."""
        with self._lock:
            fd = self._take_unsynced()
        if fd >= 0:
            _sync(fd)

    def holds_in_memory(self) -> bool:
        """Whether an entry waits in memory only (a message over the hook's redaction size)."""
        with self._lock:
            return any(not entry.on_disk for entry in self._entries)

    def _take_unsynced(self) -> int:
        """(Under `_lock`.) The descriptor to sync, -1 when nothing was appended unsynced."""
        if not (self._unsynced and self.is_open):
            return -1
        self._unsynced = False
        return self._fd

    def committed(self, count: int) -> None:
        """The oldest `count` entries are in the outbox: forget them; empty the file when none is
        left."""
        with self._lock:
            for _ in range(min(count, len(self._entries))):
                self._bytes -= self._entries.popleft().size
            if not self._entries and self.is_open:
                try:
                    os.ftruncate(self._fd, 0)  # O_APPEND: the next record starts at offset 0 again
                    self._end = 0
                except OSError:
                    log.warning("honcho capture: journal could not be emptied; it is replayed if"
                                " this process dies")

    def is_full(self) -> bool:
        with self._lock:
            return len(self._entries) >= self.max_entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Release the file (its entries stay on disk for a later replay unless committed)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _drop_partial(self) -> None:
        """After a failed write, cut the file back to the records written whole before it."""
        try:
            os.ftruncate(self._fd, self._end)
        except OSError:
            pass  # a torn tail is skipped on replay anyway


def orphans(folders: tuple[str, ...],
            own_path: str = "") -> Iterator[tuple[str, Callable[[bool], None]]]:
    """Journal files of dead processes, each yielded locked with a `release(delete)` to call when
    done.

    A file whose lock is held belongs to a live process and is skipped."""
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not (name.startswith(PREFIX) and name.endswith(SUFFIX)) or path == own_path:
                continue
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # Another process may have replayed and deleted it between our open and our lock.
                still_there = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
            except OSError:
                still_there = False
            if not still_there:
                os.close(fd)
                continue
            yield path, _releaser(path, fd)


def read_locked(path: str) -> tuple[list[tuple[dict, str]], int]:
    """The records of a journal file this process holds the lock of."""
    with open(path, "rb") as handle:
        return decode_all(handle.read())


def _releaser(path: str, fd: int) -> Callable[[bool], None]:
    def release(delete: bool) -> None:
        try:
            if delete:
                os.unlink(path)  # still under the lock: no other process can be replaying it
        except OSError:
            pass
        finally:
            os.close(fd)
    return release


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sync(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError:
        log.warning("honcho capture: journal sync failed")


def journal_folders(outbox_path: str, fallback_folder: str) -> tuple[str, ...]:
    """Where journals live: beside the outbox when the plugin made a journal folder there (it does
    once it has opened that outbox as its own), and the per-user state folder. Nothing here creates
    a folder: beside another program's file at `outbox_path` there is never one of ours."""
    beside = os.path.join(os.path.dirname(outbox_path), FOLDER)
    return (beside, fallback_folder) if is_our_folder(beside) else (fallback_folder,)


def make_folder_beside(outbox_path: str) -> None:
    """The journal folder beside an outbox the plugin has opened as its own, with its mark (best
    effort).

    The mark tells it from a folder an earlier version made beside whatever file the setting
    named."""
    folder = os.path.join(os.path.dirname(outbox_path), FOLDER)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.close(os.open(os.path.join(folder, MARK), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600))
    except OSError:
        pass  # the folder cannot take it: journals stay in the state folder


def is_our_folder(folder: str) -> bool:
    """A real folder of this user that no one else can enter, with the mark `make_folder_beside`
    leaves."""
    try:
        st, mark = os.lstat(folder), os.lstat(os.path.join(folder, MARK))
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
            and stat.S_ISREG(mark.st_mode))


def default_fallback_folder() -> str:
    """The per-user state folder's journal folder."""
    from ..settings.config import state_dir_outbox

    return os.path.join(os.path.dirname(state_dir_outbox(os.environ)), FOLDER)
