"""Capture: a message accepted on the event loop in about a millisecond, then split and queued.

`accept` (a capture hook's call) redacts before anything is persisted and never raises; the writer
(`write_pending`) moves the journal's records to the outbox; `capture` is both on one thread.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..errors import JournalError, JournalFull, OutboxBusy, OutboxError
from ..keyed import Keyed, fields
from ..names import session_for
from ..safety.redact import redact_long
from ..settings.config import Settings
from ..storage import journal as journal_file
from ..storage.journal import Entry, Journal, default_fallback_folder, journal_folders
from ..storage.outbox import NewEvent, Outbox
from .chunking import clean_text, split_message

log = logging.getLogger(__name__)

REOPEN_AFTER_S = 30.0
REPLAY_EVERY_S = 60.0  # how often to look for journals of processes that died meanwhile
# After a dead process's journal the outbox could not take (locked, full, unusable): read (and
# redacted) again no sooner than this, however promptly the writer retries its own records.
REPLAY_RETRY_S = 5.0
# longest wait for another writer pass of this process (it holds no SQLite lock long)
WRITER_BUSY_WAIT_S = 5.0
WRITE_BATCH_ENTRIES = 64
WRITE_BATCH_CHARS = 2_000_000
# The largest message (UTF-8 bytes) redacted on the hook, so that its redacted text is what the
# journal persists before the hook returns; a larger one waits in memory for the writer. Measured
# with bench/capture.py (2 shared cores, FULL, sizes in turn): at 4 KB the hook's p99 was 1.4-1.9 ms
# over an empty hook's in 6 runs of 6 (400 B: 0.8-1.3 ms, mostly the fdatasync the hook then made;
# the writer makes it now); 8 KB went over 2 ms in most runs.
REDACT_ON_HOOK_MAX_BYTES = 4 * 1024
JOURNAL_MAX_BYTES = 256 * 1024 * 1024


class Role(str, Enum):
    USER = "user"
    AGENT = "agent"


class Outcome(str, Enum):
    ACCEPTED = "accepted"  # redacted, in the journal; the writer queues it
    # too large to redact on the hook: the writer has it in memory
    ACCEPTED_IN_MEMORY = "accepted_in_memory"
    QUEUED = "queued"
    DUPLICATE = "duplicate"
    HANDED_OFF = "handed_off"  # in the journal, waiting for the outbox (locked, full or unusable)
    SKIPPED_EMPTY = "skipped_empty"
    REFUSED_FULL = "refused_full"  # the journal is full because the outbox is full
    # the journal is full because the outbox is unusable
    REFUSED_JOURNAL_FULL = "refused_journal_full"
    JOURNAL_UNAVAILABLE = "journal_unavailable"
    REDACTION_FAILED = "redaction_failed"
    INVALID = "invalid"


@dataclass(frozen=True)
class CaptureRequest:
    """What an adapter knows about one message, in plain values."""

    chat_id: str
    role: Role
    source_id: str  # the host's history message id; '' when the host gave none
    text: Any
    scope_id: str | None = None
    # to find the project's secrets when a dead process's record is replayed
    project: str | None = None


class Counters:
    """Outcome counts of this process, for status; safe to bump from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + count

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def __getitem__(self, name: str) -> int:
        with self._lock:
            return self._counts.get(name, 0)


def event_id(chat_id: str, role: str, source_id: str, part: int) -> str:
    """Stable id of one event: the same source always gives the same id."""
    raw = "\x1f".join((str(chat_id), role, source_id, str(part)))
    return "ev_" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def message_header(request: CaptureRequest, role: str, settings: Settings,
                   captured_at: float) -> dict[str, Any]:
    """What every event of a captured message carries besides its text: where it goes and who said
    it.

    Capture fixes it when it accepts a message; the backfill of saved chats (cli/backfill.py) builds
    it the same way, so a message imported from a saved chat and the same message captured live are
    one event."""
    return {
        "chat_id": str(request.chat_id), "role": role,
        # no host id: nothing to deduplicate against
        "source_id": request.source_id or uuid.uuid4().hex,
        "destination": settings.destination(), "workspace_id": settings.workspace_id,
        # Fixed here, at capture: a later change of strategy never moves (or re-sends) a queued
        # message.
        "session_id": session_for(settings.session_strategy, str(request.chat_id),
                                  request.project),
        "peer_id": settings.user_peer_id if role == Role.USER.value else settings.agent_peer_id,
        "scope_id": request.scope_id, "project": request.project, "captured_at": captured_at,
    }


def redacted_text(text: str, secrets: Mapping[str, str] | None,
                  mask: Callable[[str], str] | None = None) -> str:
    """The text as capture queues it: the host's masker (when there is one), then redaction of the
    cleaned text. Raises RedactionError (and whatever the masker raises): the caller then queues
    nothing."""
    return redact_long(mask(text) if mask else text, secrets, clean=clean_text)


def fits_on_hook(text: str) -> bool:
    """Whether `text` is small enough to be redacted on the hook (`REDACT_ON_HOOK_MAX_BYTES`)."""
    return len(text) <= REDACT_ON_HOOK_MAX_BYTES and len(
        text.encode("utf-8", "surrogatepass")) <= REDACT_ON_HOOK_MAX_BYTES


def message_events(header: Mapping[str, Any], redacted: str, *,
                   ambiguous: bool) -> list[NewEvent]:
    """The events of one redacted message: a part each (split at Honcho's size), ids derived from
    its source; [] when nothing is left to queue."""
    if not redacted.strip():
        return []
    return [NewEvent(id=event_id(header["chat_id"], header["role"], header["source_id"], i),
                     destination=header["destination"], workspace_id=header["workspace_id"],
                     session_id=header["session_id"], peer_id=header["peer_id"],
                     role=header["role"], content=part, captured_at=header["captured_at"],
                     scope_id=header.get("scope_id"), ambiguous=ambiguous,
                     chat_id=header["chat_id"], project=header.get("project"))
            for i, part in enumerate(split_message(redacted))]


def journal_for(settings: Settings, journal: Journal | None = None) -> Journal:
    """`journal` (a new one, not yet open, if None) with the limits and durability `settings` ask
    for."""
    if journal is None:  # not `journal or …`: an empty journal is falsy (it has a length)
        journal = Journal("", max_entries=settings.journal_capacity,
                          max_bytes=JOURNAL_MAX_BYTES)
    journal.max_entries, journal.durable = (settings.journal_capacity,
                                            settings.outbox_synchronous == "FULL")
    return journal


class CaptureService:
    """The process's capture: one journal, the writer's outbox connection, the outcome counters."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic, journal: Journal | None = None,
                 counters: Counters | None = None, fallback_journal_folder: str | None = None,
                 replay_secrets: Callable[[str | None], Mapping[str, str]] = (
                     lambda project: {})) -> None:
        self._settings = settings
        self._clock, self._monotonic = clock, monotonic
        self.journal = journal
        self.counters = counters if counters is not None else Counters()
        self._fallback = fallback_journal_folder or default_fallback_folder()
        self._replay_secrets = replay_secrets
        self._open_lock = threading.Lock()
        # The writer's outbox connection: waiting records go to a new outbox when the setting
        # changes.
        self._outbox: Keyed[Settings, Outbox] = Keyed(fields("outbox_path"), self._open_outbox)
        self._reopen_at = 0.0
        self._replay_at = 0.0  # when to look for dead processes' journals again
        self.unavailable: str | None = None  # error code while the outbox cannot be used
        self.outbox_full = False

    # -- the hook's side: on Agent Zero's event loop -------------------------------------------

    def accept(self, request: CaptureRequest, settings: Settings,
               secrets: Mapping[str, str] | None = None,
               mask: Callable[[str], str] | None = None) -> Outcome:
        """Redact and journal one message (durable when this returns ACCEPTED), or hold a large one
        in memory for the writer (ACCEPTED_IN_MEMORY). Never raises, never waits on SQLite.

        `secrets` and `mask` (the host's masker) redact here up to `REDACT_ON_HOOK_MAX_BYTES`, in
        the writer above it; a journal record of an older version, replayed after a crash, is
        redacted with the secrets `replay_secrets` gives for its project."""
        return self._accept(request, settings, secrets, mask)[0]

    def _accept(self, request: CaptureRequest, settings: Settings,
                secrets: Mapping[str, str] | None,
                mask: Callable[[str], str] | None) -> tuple[Outcome, Entry | None]:
        text = request.text
        if not isinstance(text, str):
            return self._count(Outcome.INVALID), None
        try:
            role = Role(request.role).value
        except ValueError:
            return self._count(Outcome.INVALID), None
        header = message_header(request, role, settings, self._clock())
        if not fits_on_hook(text):
            return self._keep(settings, Outcome.ACCEPTED_IN_MEMORY, lambda journal: journal.hold(
                header, text, {"secrets": secrets, "mask": mask}))
        try:
            redacted = redacted_text(text, secrets, mask)
        except Exception:
            # RedactionError, or a host masker that fails: fail closed, nothing persisted
            log.warning("honcho capture: redaction failed; message not queued")
            return self._count(Outcome.REDACTION_FAILED), None
        if not redacted.strip():
            return self._count(Outcome.SKIPPED_EMPTY), None
        return self._keep(settings, Outcome.ACCEPTED,
                          lambda journal: journal.append({**header, "redacted": True}, redacted))

    def _keep(self, settings: Settings, outcome: Outcome,
              store: Callable[[Journal], Entry]) -> tuple[Outcome, Entry | None]:
        """`store` the message in the journal; `outcome`, or why it was refused."""
        try:
            entry = store(self._journal(settings))
        except JournalFull:
            log.warning("honcho capture: %s; message refused",
                        "outbox full and journal full" if self.outbox_full else "journal full")
            return self._count(Outcome.REFUSED_FULL if self.outbox_full
                               else Outcome.REFUSED_JOURNAL_FULL), None
        except JournalError as exc:
            log.error("honcho capture: journal unusable (%s); message refused", exc.code)
            return self._count(Outcome.JOURNAL_UNAVAILABLE), None
        return self._count(outcome), entry

    def capture(self, request: CaptureRequest, settings: Settings,
                secrets: Mapping[str, str] | None = None) -> Outcome:
        """`accept`, then one writer pass on this thread; the outcome of this message's write."""
        if self.journal is not None and self.journal.is_full():
            self.write_pending(settings)  # the outbox may have freed up: make room before refusing
        outcome, entry = self._accept(request, settings, secrets, None)
        if entry is None:
            return outcome
        self.write_pending(settings)
        return entry.local.get("outcome", Outcome.HANDED_OFF)

    def backlog(self) -> int:
        """Accepted messages not yet in the outbox."""
        return len(self.journal) if self.journal is not None else 0

    def sync_journal(self) -> bool:
        """Sync what the hooks appended to the journal (FULL durability), without moving it;
        whether every accepted message is now on disk (False: a paste waits in memory only, to be
        redacted and journaled by a pass)."""
        if self.journal is None:
            return True
        self.journal.sync_appended()
        return not self.journal.holds_in_memory()

    def refusing_for_a_lock(self) -> bool:
        """Whether messages are refused only because the outbox is locked: the journal is full, and
        the outbox, neither full nor unusable, can take its records the moment the lock is let
        go."""
        return (self.journal is not None and self.journal.is_full() and not self.outbox_full
                and self.unavailable is None)

    # -- the writer's side: off the loop ---------------------------------------------------------

    def write_pending(self, settings: Settings | None = None) -> int:
        """Move journal records into the outbox, oldest first; returns how many records it
        committed.

        Stops early, keeping the rest in the journal, when the outbox is locked past the wait, full
        or unusable. Never raises."""
        settings = settings or self._settings
        try:
            # our own file also marks this process as alive to the others
            journal = self._journal(settings)
        except JournalError:
            return 0  # nothing can have been accepted without a journal
        if not journal.writing.acquire(timeout=WRITER_BUSY_WAIT_S):
            return 0
        try:
            moved = self._replay_orphans(settings) if self._monotonic() >= self._replay_at else 0
            while True:
                entries = self._next_batch(journal)
                if not entries:
                    break
                done = self._write(journal, entries, settings)
                moved += done
                if done < len(entries):
                    break
            return moved
        finally:
            journal.writing.release()

    def close(self) -> None:
        """Close the outbox connection (the journal stays: it belongs to the process)."""
        with self.journal.writing if self.journal is not None else self._open_lock:
            self._outbox.reset()

    # -- internals -------------------------------------------------------------------------------

    def _journal(self, settings: Settings) -> Journal:
        with self._open_lock:
            self.journal = journal_for(settings, self.journal)
            if not self.journal.is_open:
                problem: JournalError | None = None
                for folder in journal_folders(settings.outbox_path, self._fallback):
                    self.journal.folder = folder
                    try:
                        self.journal.open()
                        break
                    except JournalError as exc:
                        problem = exc
                else:
                    raise problem or JournalError("no journal folder")
            return self.journal

    def _next_batch(self, journal: Journal) -> list[Entry]:
        entries: list[Entry] = []
        chars = 0
        for entry in journal.pending(WRITE_BATCH_ENTRIES):
            if entries and chars + len(entry.text) > WRITE_BATCH_CHARS:
                break
            entries.append(entry)
            chars += len(entry.text)
        return entries

    def _write(self, journal: Journal, entries: list[Entry], settings: Settings) -> int:
        """Commit `entries` in one transaction; returns how many left the journal (a prefix)."""
        prepared = [(entry, self._events(entry)) for entry in entries]
        batches = [events for _, events in prepared if events]
        try:
            results = self._open(settings).enqueue_batches(batches) if batches else []
        except OutboxError as exc:
            self._note_unavailable(exc)
            return 0
        done, at = 0, 0
        self.outbox_full = False
        for entry, events in prepared:
            if events:
                result = results[at]
                at += 1
                if result.refused:
                    self.outbox_full = True  # keep it and everything after it in the journal
                    break
                entry.local["outcome"] = self._count(
                    Outcome.QUEUED if result.inserted else Outcome.DUPLICATE)
            else:
                entry.local["outcome"] = self._count(
                    entry.local.get("outcome", Outcome.SKIPPED_EMPTY))
            done += 1
        journal.committed(done)
        return done

    def _events(self, entry: Entry) -> list[NewEvent]:
        """The redacted parts of one record (worked out once: a locked outbox means retries); []
        (with the outcome noted) when nothing may be queued. A held record is journaled once
        redacted."""
        if "events" not in entry.local:
            entry.local["events"] = self._prepare(entry)
            if entry.local["events"] and not entry.on_disk:
                self._persist(entry)
        return entry.local["events"]

    def _prepare(self, entry: Entry) -> list[NewEvent]:
        header, text = entry.header, entry.text
        try:
            if not header.get("redacted"):  # held in memory, or an older version's journal record
                text = entry.text = self._redacted(entry)
                entry.header = header = {**header, "redacted": True}
        except Exception:  # RedactionError, or a host masker that fails: fail closed
            log.warning("honcho capture: redaction failed; message not queued")
            entry.local["outcome"] = Outcome.REDACTION_FAILED
            return []
        events = message_events(header, text, ambiguous=bool(entry.local.get("replayed")))
        if not events:
            entry.local["outcome"] = Outcome.SKIPPED_EMPTY
        return events

    def _redacted(self, entry: Entry) -> str:
        secrets = entry.local.get("secrets")
        if "secrets" not in entry.local:  # a dead process's record: its host objects are gone
            secrets = self._replay_secrets(entry.header.get("project"))
        return redacted_text(entry.text, secrets, entry.local.get("mask"))

    def _persist(self, entry: Entry) -> None:
        """Journal a held record's redacted text: from now on it survives the process."""
        try:
            self._journal(self._settings).persist(entry, entry.header, entry.text)
        except JournalError as exc:
            log.warning(
                "honcho capture: a large message could not be journaled (%s); kept in memory",
                exc.code)

    def _replay_orphans(self, settings: Settings) -> int:
        """Records of dead processes' journals into the outbox, as ambiguous rows: a record may have
        been committed, delivered and pruned before its process died, so the worker asks Honcho
        first."""
        own = self.journal.path if self.journal is not None else ""
        moved = 0
        for path, release in journal_file.orphans(
                journal_folders(settings.outbox_path, self._fallback), own):
            delete = False
            try:
                records, damaged = journal_file.read_locked(path)
                entries = [Entry(header, text, 0, {"replayed": True}) for header, text in records]
                stored = self._store_replayed(entries, settings)
                delete = stored
                moved += len(entries) if stored else 0
                if damaged:
                    log.warning(
                        "honcho capture: %d damaged records skipped in a dead process's journal",
                        damaged)
            except (OSError, ValueError, KeyError, TypeError):
                log.warning(
                    "honcho capture: a dead process's journal could not be read; kept for later")
            finally:
                release(delete)
            if not delete:
                self._replay_at = self._monotonic() + REPLAY_RETRY_S  # the outbox is not ready
                return moved
        self._replay_at = self._monotonic() + REPLAY_EVERY_S
        return moved

    def _store_replayed(self, entries: list[Entry], settings: Settings) -> bool:
        batches = [events for events in (self._events(entry) for entry in entries) if events]
        if not batches:
            return True
        try:
            results = self._open(settings).enqueue_batches(batches)
        except OutboxError as exc:
            self._note_unavailable(exc)
            return False
        if any(result.refused for result in results):
            self.outbox_full = True
            # the whole file is replayed again later; rows already in are not duplicated
            return False
        self.counters.add("replayed", sum(len(batch) for batch in batches))
        return True

    def _open(self, settings: Settings) -> Outbox:
        return self._outbox.get(settings)

    def _open_outbox(self, settings: Settings) -> Outbox:
        if self._monotonic() < self._reopen_at:
            cooling = OutboxError("outbox unusable; reopening later")
            cooling.code = self.unavailable or "outbox_unavailable"
            raise cooling
        try:
            # Capture's short busy wait (the default): a locked outbox leaves records in the
            # journal, and the writer retries.
            outbox = Outbox.for_settings(settings, clock=self._clock)
        except OutboxError as exc:
            # busy is momentary (another process migrating): no cooldown
            if not isinstance(exc, OutboxBusy):
                self._reopen_at = self._monotonic() + REOPEN_AFTER_S
            raise
        # ours: later processes journal beside it
        journal_file.make_folder_beside(settings.outbox_path)
        self._replay_at = 0.0  # a new outbox folder may hold journals of its own
        self.unavailable = None
        return outbox

    def _note_unavailable(self, exc: OutboxError) -> None:
        code = exc.code
        if code != "outbox_busy":
            if self.unavailable != code:
                log.error("honcho capture: outbox unusable (%s); messages wait in the journal",
                          code)
            self.unavailable = code
            if self._outbox.peek() is not None:
                self._outbox.reset()
                self._reopen_at = self._monotonic() + REOPEN_AFTER_S

    def _count(self, outcome: Outcome) -> Outcome:
        self.counters.add(outcome.value)
        return outcome
