"""The capture journal: what a capture hook accepted is on disk before the hook returns.

The capture hook runs on Agent Zero's event loop, where the outbox (SQLite, whose write lock another
process may hold for seconds) must not be touched. So the hook appends one record to this process's
journal — one `write`, plus `fdatasync` when durability is FULL — and a writer thread moves records
into the outbox. Once every appended record is committed there, the journal is truncated.

One file per process (`capture-<pid>-<token>.journal`), held under an exclusive `flock` for the
process's life. A file whose lock can be taken belongs to a process that died: whoever takes the lock
reads its records (a torn last record, cut by the crash before its hook returned, is ignored), hands
them over, and deletes the file while still holding the lock, so two processes never replay one file.

Record: `HJ1 <crc32 hex> <header bytes> <body bytes>\n`, the header JSON (ids, peers, destination),
the body the message text as UTF-8. No JSON encoding of the text: a 1 MB paste costs one encode and
one write on the loop. The text in the journal is what Agent Zero handed the hook (not yet redacted:
redaction of a large paste is too slow for the loop); the file is owner-only and emptied as soon as
its records are in the outbox.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import JournalFull, JournalUnavailable

log = logging.getLogger(__name__)

FOLDER = "journal"  # beside the outbox file
MAGIC = b"HJ1"
# A record up to this size is synced before `append` returns. A larger one (a paste) is written before
# it returns — it survives the process being killed — and synced by the writer thread at once: syncing
# a megabyte on the event loop can take tens of milliseconds while the disk is busy.
SYNC_ON_APPEND_BYTES = 64 * 1024
SUFFIX = ".journal"
MAX_HEADER_BYTES = 64 * 1024


@dataclass
class Entry:
    """One accepted message: its persisted header and text, plus what only this process can use."""

    header: dict[str, Any]
    text: str
    size: int
    local: dict[str, Any] = field(default_factory=dict)  # callables of the live host; never persisted


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
            magic, crc, head_len, body_len = parts[0], int(parts[1], 16), int(parts[2]), int(parts[3])
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
    return records, damaged


class Journal:
    """This process's journal file and the accepted entries not yet committed to the outbox."""

    def __init__(self, folder: str, *, max_entries: int, max_bytes: int, durable: bool = True) -> None:
        self.folder = folder
        self.max_entries, self.max_bytes, self.durable = max_entries, max_bytes, durable
        self._lock = threading.Lock()
        self.writing = threading.Lock()  # held by the one writer pass moving entries into the outbox
        self._emptied = threading.Condition(self._lock)
        self._entries: deque[Entry] = deque()
        self._bytes = 0
        self._unsynced = False  # a large record was appended without a sync
        self._fd = -1
        self.path = ""

    def open(self) -> None:
        """Create and lock this process's file; raises JournalUnavailable."""
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            name = f"capture-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
            path = os.path.join(self.folder, name)
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise JournalUnavailable(f"journal folder unavailable ({type(exc).__name__})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise JournalUnavailable("journal file could not be locked") from exc
        self._fd, self.path = fd, path

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def append(self, header: dict[str, Any], text: str, local: dict[str, Any] | None = None) -> Entry:
        """Persist one record (synced when durable) and keep it for the writer; raises JournalError."""
        record = encode(header, text)
        entry = Entry(header, text, len(record), dict(local or {}))
        with self._lock:
            if not self.is_open:
                raise JournalUnavailable("journal is not open")
            if len(self._entries) >= self.max_entries or self._bytes + len(record) > self.max_bytes:
                raise JournalFull("journal full: the outbox has not taken earlier messages yet")
            try:
                written = os.write(self._fd, record)
                if written != len(record):
                    raise OSError(errno.ENOSPC, "short write")
                if self.durable and len(record) <= SYNC_ON_APPEND_BYTES:
                    os.fdatasync(self._fd)
                else:
                    self._unsynced = self.durable
            except OSError as exc:
                self._drop_partial()
                raise JournalUnavailable(f"journal write failed ({type(exc).__name__})") from exc
            self._entries.append(entry)
            self._bytes += len(record)
        return entry

    def pending(self, limit: int) -> list[Entry]:
        """The oldest entries not yet committed, at most `limit`; first syncs large records `append` left
        unsynced (the writer calls this, off the event loop)."""
        with self._lock:
            if self._unsynced and self.is_open:
                self._unsynced = False
                fd = self._fd
            else:
                fd = -1
            entries = [self._entries[i] for i in range(min(limit, len(self._entries)))]
        if fd >= 0:
            try:
                os.fdatasync(fd)
            except OSError:
                log.warning("honcho capture: journal sync failed")
        return entries

    def committed(self, count: int) -> None:
        """The oldest `count` entries are in the outbox: forget them; empty the file when none is left."""
        with self._lock:
            for _ in range(min(count, len(self._entries))):
                self._bytes -= self._entries.popleft().size
            if not self._entries:
                self._emptied.notify_all()
            if not self._entries and self.is_open:
                try:
                    os.ftruncate(self._fd, 0)  # O_APPEND: the next record starts at offset 0 again
                except OSError:
                    log.warning("honcho capture: journal could not be emptied; it is replayed if this process dies")

    def wait_empty(self, timeout_s: float) -> bool:
        """Wait until every accepted entry is in the outbox (shutdown, tests); False on timeout."""
        with self._emptied:
            return self._emptied.wait_for(lambda: not self._entries, timeout_s)

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
        """After a failed write, cut the file back to the records that were accepted."""
        try:
            os.ftruncate(self._fd, sum(entry.size for entry in self._entries))
        except OSError:
            pass  # a torn tail is skipped on replay anyway


def orphans(folders: tuple[str, ...], own_path: str = "") -> Iterator[tuple[str, Callable[[bool], None]]]:
    """Journal files of dead processes, each yielded locked with a `release(delete)` to call when done.

    A file whose lock is held belongs to a live process and is skipped."""
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not name.endswith(SUFFIX) or path == own_path:
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


def journal_folders(outbox_path: str, fallback_folder: str) -> tuple[str, ...]:
    """Where journals live: beside the outbox, else (that folder unusable) in the per-user state folder."""
    return (os.path.join(os.path.dirname(outbox_path), FOLDER), fallback_folder)


def default_fallback_folder() -> str:
    """The per-user state folder's journal folder (used when the outbox folder is unusable)."""
    from ..settings.config import state_dir_outbox

    return os.path.join(os.path.dirname(state_dir_outbox(os.environ)), FOLDER)
