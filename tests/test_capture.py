"""Capture service: bad input, chunking, stable ids, bounded waits and the journal."""

import fcntl
import os
import signal
import sqlite3
import stat
import threading
import unittest
from unittest import mock

import hub_testkit
from outbox_helpers import (
    ManualClock,
    hold_write_lock,
    read_outbox,
    release_lock,
    run_child,
    temp_outbox_path,
)
from test_chunking import strip_marker
from test_db import other_program, snapshot

from honcho_hub.backoff import wait_s
from honcho_hub.capture.service import (
    REDACT_ON_HOOK_MAX_BYTES,
    REPLAY_RETRY_S,
    CaptureRequest,
    CaptureService,
    Counters,
    Outcome,
    Role,
    event_id,
)
from honcho_hub.capture.writer import CaptureWriter
from honcho_hub.names import MAX_CONTENT_CHARS, session_id_for
from honcho_hub.ops.status import StatusParts, build_status
from honcho_hub.prompt_window import PromptWindow
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.journal import Journal, decode_all, orphans

KEY = "ghp_" + "a1B2c3D4e5" * 4


class PassCountingWriter(CaptureWriter):
    """The writer thread as capture starts it, releasing `passes` at the end of each of its
    passes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.passes = threading.Semaphore(0)

    def step(self, woken: bool = False) -> float | None:
        try:
            return super().step(woken)
        finally:
            self.passes.release()


class CaptureTestCase(unittest.TestCase):
    def setUp(self):
        self.path = temp_outbox_path(self)
        self.clock, self.mono = ManualClock(), ManualClock(100.0)
        self.settings = self.make_settings()
        self.fallback = os.path.join(os.path.dirname(os.path.dirname(self.path)), "state-journal")
        self.service = self.new_service()

    def new_service(self):
        service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono,
                                 fallback_journal_folder=self.fallback)
        self.addCleanup(service.close)
        return service

    def make_settings(self, **overrides):
        return build_settings({"outbox_path": self.path, **overrides}, {}, {})

    def capture(self, text, source="m1", role=Role.USER, chat="Ab3dE6gH", secrets=None):
        return self.service.capture(CaptureRequest(chat, role, source, text), self.settings,
                                    secrets)

    def rows(self):
        return read_outbox(self.path, "SELECT id, session_id, peer_id, role, content, captured_at"
                                      " FROM events ORDER BY seq")

    def accept_in_a_process_then_kill_it(self) -> None:
        """Another process accepts 20 messages into its journal (the outbox may be locked), then
        is SIGKILLed."""
        capturer = run_child(CHILD_ACCEPT_THEN_WAIT, self.path, self.fallback, hub_testkit.ROOT)
        self.assertEqual(capturer.stdout.readline().strip(), "accepted 20")
        os.kill(capturer.pid, signal.SIGKILL)
        capturer.communicate(timeout=30)


class BadInputTest(CaptureTestCase):
    def test_empty_and_whitespace_are_skipped(self):
        for text in ["", "   ", "\n\t\n", "\x00\x00"]:
            with self.subTest(text=repr(text)):
                self.assertEqual(self.capture(text, source=repr(text)), Outcome.SKIPPED_EMPTY)
        # nothing to store: the file is not even created
        self.assertFalse(os.path.exists(self.path))

    def test_non_string_content_is_refused_and_counted(self):
        for i, value in enumerate([None, 42, b"bytes", ["a"], {"m": "x"}]):
            self.assertEqual(self.capture(value, source=str(i)), Outcome.INVALID)
        self.assertEqual(self.service.counters["invalid"], 5)

    def test_odd_characters_are_stored_safely(self):
        cases = {"surrogate": ("a\ud800b", "a\ufffdb"), "nul": ("a\x00b", "ab"),
                 "control": ("a\x07\x1bb\tc", "ab\tc"),
                 "rtl": ("שלום \u202eevil\u202c", "שלום \u202eevil\u202c"),
                 "combining": ("e\u0301 n\u0303", "e\u0301 n\u0303")}
        for name, (raw, stored) in cases.items():
            with self.subTest(name=name):
                self.assertEqual(self.capture(raw, source=name), Outcome.QUEUED)
                self.assertEqual(self.rows()[-1][4], stored)

    def test_one_megabyte_is_chunked_in_order_and_nothing_is_lost(self):
        paragraph = "Sentence one is here. Sentence two follows it! " * 40 + "\n\n"
        text = (paragraph * 600)[:1_000_000]
        self.assertEqual(self.capture(text), Outcome.QUEUED)
        parts = [row[4] for row in self.rows()]
        self.assertGreaterEqual(len(parts), 40)
        self.assertTrue(all(len(p) <= MAX_CONTENT_CHARS for p in parts))
        self.assertEqual("".join(strip_marker(p) for p in parts), text)
        self.assertTrue(parts[1].startswith(f"[continued, part 2 of {len(parts)}]\n"))

    def test_a_redaction_failure_queues_nothing(self):
        self.assertEqual(self.capture("token ok", secrets={"BROKEN": _Exploding("xxxx")}),
                         Outcome.REDACTION_FAILED)
        self.assertEqual(self.service.counters["redaction_failed"], 1)
        self.assertFalse(os.path.exists(self.path))

    def test_secrets_are_redacted_before_storage(self):
        self.capture(f"my key {KEY} and db pass hunter2!", secrets={"DB": "hunter2!"})
        stored = self.rows()[0][4]
        self.assertNotIn(KEY, stored)
        self.assertNotIn("hunter2!", stored)


class CountersTest(unittest.TestCase):
    def test_counts_bumped_from_many_threads_add_up(self):
        counters = Counters()
        threads = [threading.Thread(target=lambda: [counters.add("queued") for _ in range(5_000)])
                   for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self.assertEqual(counters["queued"], 40_000)
        self.assertEqual(counters.snapshot(), {"queued": 40_000})


class _Exploding(str):
    def strip(self, *args):
        raise RuntimeError("broken")


class IdentityTest(CaptureTestCase):
    def test_a_replayed_hook_enqueues_nothing_new(self):
        self.assertEqual(self.capture("hello", source="hist-1"), Outcome.QUEUED)
        self.assertEqual(self.capture("hello", source="hist-1"), Outcome.DUPLICATE)
        self.assertEqual(len(self.rows()), 1)

    def test_two_identical_replies_are_two_events(self):
        self.capture("Done.", source="ai-1", role=Role.AGENT)
        self.capture("Done.", source="ai-2", role=Role.AGENT)
        self.assertEqual([r[4] for r in self.rows()], ["Done.", "Done."])

    def test_event_fields(self):
        self.clock.now = 1_800_000_123.5
        self.capture("hi", source="h1")
        self.capture("hello human", source="a1", role=Role.AGENT)
        self.assertEqual(self.rows(), [
            (event_id("Ab3dE6gH", "user", "h1", 0), "chat-Ab3dE6gH", "user", "user", "hi",
             1_800_000_123.5),
            (event_id("Ab3dE6gH", "agent", "a1", 0), "chat-Ab3dE6gH", "agent-zero", "agent",
             "hello human", 1_800_000_123.5)])

    def test_ids_are_stable_and_session_ids_safe(self):
        self.assertEqual(event_id("c", "user", "m", 0), event_id("c", "user", "m", 0))
        self.assertNotEqual(event_id("c", "user", "m", 0), event_id("c", "user", "m", 1))
        self.assertNotEqual(event_id("c", "user", "m", 0), event_id("c", "agent", "m", 0))
        # Agent Zero's ids stay where they are
        self.assertEqual(session_id_for("Ab3dE6gH"), "chat-Ab3dE6gH")
        self.assertEqual(session_id_for("a-b_c"), "chat-a-b_c")
        self.assertRegex(session_id_for("a.b/c d"), r"^chat-a_b_c_d-[0-9a-f]{16}$")
        self.assertEqual(len(session_id_for("x" * 900)), 512)
        self.assertEqual(session_id_for("x" * 507), "chat-" + "x" * 507)  # fits exactly: unchanged

    def test_ids_that_had_to_be_changed_to_fit_never_share_a_session(self):
        changed = ["чат🙂", "чат😀", "ЧАТ🙂", "x" * 600, "x" * 599 + "y", "a.b", "a/b"]
        sessions = [session_id_for(chat) for chat in changed]
        self.assertEqual(len(set(sessions)), len(changed))
        for session in sessions:
            self.assertRegex(session, r"^[A-Za-z0-9_-]{1,512}$")


class JournalTest(CaptureTestCase):
    """A real second process holds the write lock (see outbox_helpers.hold_write_lock)."""

    def test_a_database_locked_by_another_process_keeps_messages_in_the_journal_then_in_order(self):
        self.capture("first", source="1")  # creates the file
        child = hold_write_lock(self.path)
        try:
            self.assertEqual(self.capture("second", source="2"), Outcome.HANDED_OFF)
            self.assertEqual(self.capture("third", source="3"), Outcome.HANDED_OFF)
        finally:
            release_lock(child)
        # the journal went first
        self.assertEqual(self.capture("fourth", source="4"), Outcome.QUEUED)
        self.assertEqual([r[4] for r in self.rows()], ["first", "second", "third", "fourth"])
        self.assertEqual(self.service.counters["queued"], 4)
        self.assertEqual(self.service.backlog(), 0)

    def test_a_lock_held_while_the_outbox_is_first_opened_causes_no_cooldown(self):
        os.makedirs(os.path.dirname(self.path))
        # the file exists; another process is about to migrate it
        sqlite3.connect(self.path).close()
        child = hold_write_lock(self.path)
        try:
            self.assertEqual(self.capture("early", source="1"), Outcome.HANDED_OFF)
        finally:
            release_lock(child)
        self.assertEqual(self.capture("right after", source="2"), Outcome.QUEUED)  # no 30 s wait
        self.assertEqual([r[4] for r in self.rows()], ["early", "right after"])

    def test_accept_never_touches_the_outbox_and_a_writer_pass_moves_what_was_accepted(self):
        self.capture("first", source="1")
        child = hold_write_lock(self.path)
        try:
            request = CaptureRequest("Ab3dE6gH", Role.USER, "2", "second")
            # no wait at all
            self.assertEqual(self.service.accept(request, self.settings), Outcome.ACCEPTED)
            self.assertEqual(self.service.write_pending(), 0)
        finally:
            release_lock(child)
        self.assertEqual(self.service.write_pending(), 1)
        self.assertEqual(self.service.backlog(), 0)
        self.assertEqual(os.path.getsize(self.service.journal.path), 0)  # emptied once committed

    def test_accept_writes_without_a_sync_and_the_writer_syncs_once_before_the_outbox(self):
        # FULL durability (the default): what the hook appends is written, so it survives the
        # process being killed, but not synced there (a sync holds Agent Zero's event loop for
        # milliseconds); the writer, off the loop, syncs once for all it moves.
        self.capture("first", source="1")  # opens the journal and the outbox
        journal_fd = self.service.journal._fd
        with mock.patch("os.fdatasync", wraps=os.fdatasync) as synced:
            for n in range(3):
                request = CaptureRequest("Ab3dE6gH", Role.USER, f"s{n}", f"message {n}")
                self.assertEqual(self.service.accept(request, self.settings), Outcome.ACCEPTED)
            self.assertEqual(synced.call_args_list, [], "no sync on the hook")
            self.assertEqual(self.service.write_pending(), 3)
        self.assertEqual(synced.call_args_list, [mock.call(journal_fd)],
                         "one sync of the journal, by the writer")
        self.assertEqual([r[4] for r in self.rows()],
                         ["first", "message 0", "message 1", "message 2"])

    def test_a_full_journal_refuses_and_counts(self):
        self.settings = self.make_settings(journal_capacity=16, capture_wait_ms=10)
        self.service = self.new_service()
        self.capture("first", source="first")
        child = hold_write_lock(self.path)
        try:
            outcomes = [self.capture(f"m{i}", source=str(i)) for i in range(17)]
        finally:
            release_lock(child)
        self.assertEqual(outcomes.count(Outcome.HANDED_OFF), 16)
        self.assertEqual(outcomes[-1], Outcome.REFUSED_JOURNAL_FULL)
        self.assertEqual(self.service.counters["refused_journal_full"], 1)

    def test_when_the_journal_is_full_and_the_database_frees_up_the_next_message_is_taken(self):
        self.settings = self.make_settings(journal_capacity=16, capture_wait_ms=10)
        self.service = self.new_service()
        self.capture("first", source="first")
        child = hold_write_lock(self.path)
        try:
            for i in range(16):
                self.capture(f"m{i}", source=str(i))
        finally:
            release_lock(child)
        self.assertEqual(self.capture("after the lock", source="after"), Outcome.QUEUED)
        self.assertEqual(len(self.rows()), 18)

    def test_an_unusable_outbox_keeps_messages_in_the_journal_until_it_is_fixed(self):
        blocker = os.path.dirname(self.path)
        os.makedirs(os.path.dirname(blocker), exist_ok=True)
        open(blocker, "w").close()  # a file where the folder should be
        self.assertEqual(self.capture("kept", source="k"), Outcome.HANDED_OFF)
        self.assertEqual(self.service.unavailable, "outbox_unavailable")
        # the outbox folder is unusable
        self.assertTrue(self.service.journal.path.startswith(self.fallback))
        os.remove(blocker)
        # still cooling down
        self.assertEqual(self.capture("later", source="l"), Outcome.HANDED_OFF)
        self.mono.advance(31)
        self.assertEqual(self.capture("after fix", source="f"), Outcome.QUEUED)
        self.assertIsNone(self.service.unavailable)
        self.assertEqual([r[4] for r in self.rows()], ["kept", "later", "after fix"])

    def test_pointing_the_setting_at_a_usable_folder_takes_the_waiting_messages_there(self):
        blocker = os.path.dirname(self.path)
        os.makedirs(os.path.dirname(blocker), exist_ok=True)
        open(blocker, "w").close()
        self.assertEqual(self.capture("waiting", source="w"), Outcome.HANDED_OFF)
        self.path = os.path.join(os.path.dirname(blocker), "elsewhere", "outbox.sqlite3")
        moved = CaptureService(self.make_settings(), clock=self.clock, monotonic=self.mono,
                               journal=self.service.journal, counters=self.service.counters,
                               fallback_journal_folder=self.fallback)
        self.addCleanup(moved.close)
        self.assertEqual(moved.write_pending(self.make_settings()), 1)
        self.assertEqual([r[4] for r in self.rows()], ["waiting"])

    def test_a_corrupted_outbox_is_visible_and_the_agent_keeps_working(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, "wb") as handle:
            handle.write(b"garbage" * 1000)
        self.assertEqual(self.capture("safe in the journal"), Outcome.HANDED_OFF)
        self.assertIn(self.service.unavailable, ("outbox_corrupt", "outbox_foreign"))

    def test_a_full_outbox_keeps_new_messages_in_the_journal_then_refuses_once_that_is_full(self):
        self.settings = self.make_settings(max_queued_rows=100, journal_capacity=16)
        self.service = self.new_service()
        for i in range(100):
            self.capture(f"m{i}", source=str(i))
        self.assertEqual(self.capture("one too many", source="x"), Outcome.HANDED_OFF)
        outcomes = [self.capture(f"more {i}", source=f"y{i}") for i in range(16)]
        self.assertEqual(outcomes[-1], Outcome.REFUSED_FULL)
        self.assertEqual(self.service.counters["refused_full"], 1)

    def test_the_writer_thread_moves_accepted_messages_without_any_delivery_worker(self):
        writer = PassCountingWriter(lambda: self.service, lambda: self.settings)
        self.service.accept(CaptureRequest("Ab3dE6gH", Role.USER, "1", "hello"), self.settings)
        writer.start()  # its first pass is at once
        self.addCleanup(writer.stop)
        self.assertTrue(writer.passes.acquire(timeout=10))
        self.assertEqual(len(self.service.journal), 0)
        self.assertEqual([r[4] for r in self.rows()], ["hello"])

    def test_messages_accepted_by_a_process_killed_during_a_db_lock_are_replayed_as_ambiguous(self):
        self.capture("first", source="1")
        child = hold_write_lock(self.path)
        try:
            self.accept_in_a_process_then_kill_it()
        finally:
            release_lock(child)
        self.assertEqual(self.service.write_pending(), 20)
        rows = read_outbox(self.path, "SELECT content, ambiguous FROM events ORDER BY seq")
        self.assertEqual(rows[0], ("first", 0))
        self.assertEqual(sorted(content for content, _ in rows[1:]),
                         sorted(f"kept {i}" for i in range(20)))
        self.assertTrue(all(ambiguous == 1 for _, ambiguous in rows[1:]))
        # the dead journal was replayed once, then removed
        self.assertEqual(self.service.write_pending(), 0)


class JournalPrivacyTest(CaptureTestCase):
    """What the journal may hold while the outbox cannot take messages: redacted text only, and
    nothing beside a file at `outbox_path` that is not the plugin's."""

    def put_another_programs_database_at_the_outbox_path(self):
        os.makedirs(os.path.dirname(self.path))
        other_program("WAL")(self.path)
        return snapshot(os.path.dirname(self.path))

    def journal_bytes(self):
        with open(self.service.journal.path, "rb") as handle:
            return handle.read()

    def test_a_message_waiting_for_an_unusable_outbox_is_journaled_redacted(self):
        self.put_another_programs_database_at_the_outbox_path()
        self.assertEqual(self.capture(f"my key {KEY} and pass hunter2!",
                                      secrets={"DB": "hunter2!"}),
                         Outcome.HANDED_OFF)
        self.assertEqual(self.service.unavailable, "outbox_foreign")
        held = self.journal_bytes()
        self.assertIn(b"my key", held)
        self.assertNotIn(KEY.encode(), held)
        self.assertNotIn(b"hunter2!", held)

    def test_nothing_is_created_beside_another_programs_database(self):
        before = self.put_another_programs_database_at_the_outbox_path()
        self.assertEqual(self.capture("kept for later"), Outcome.HANDED_OFF)
        self.assertEqual(sorted(os.listdir(os.path.dirname(self.path))), sorted(before))
        self.assertEqual(snapshot(os.path.dirname(self.path)), before)
        self.assertTrue(self.service.journal.path.startswith(self.fallback))

    def test_a_message_above_the_hook_limit_waits_in_memory_then_is_journaled_redacted(self):
        self.put_another_programs_database_at_the_outbox_path()
        paste = ("A line of a long paste, nothing secret in it.\n" * 25_000) + f"token {KEY}\n"
        request = CaptureRequest("Ab3dE6gH", Role.USER, "big", paste)
        self.assertEqual(self.service.accept(request, self.settings), Outcome.ACCEPTED_IN_MEMORY)
        self.assertEqual(self.journal_bytes(), b"")  # nothing on disk: a kill -9 now loses it
        status = build_status(self.settings,
                              StatusParts(capture_counters=self.service.counters.snapshot()), 0.0)
        self.assertEqual(status["capture"]["large_messages_accepted_in_memory"], 1)
        self.assertEqual(self.service.write_pending(), 0)  # the outbox is another program's
        held = self.journal_bytes()
        self.assertIn(b"nothing secret in it", held)
        self.assertNotIn(KEY.encode(), held)


    def test_a_message_whose_redaction_fails_on_the_hook_is_neither_journaled_nor_queued(self):
        request = CaptureRequest("Ab3dE6gH", Role.USER, "r", "token ok")
        self.assertEqual(self.service.accept(request, self.settings,
                                             {"BROKEN": _Exploding("xxxx")}),
                         Outcome.REDACTION_FAILED)
        self.assertEqual((self.service.backlog(), self.service.counters["redaction_failed"]),
                         (0, 1))
        self.assertEqual(self.service.write_pending(), 0)
        self.assertFalse(os.path.exists(self.path))

    def test_a_held_message_whose_redaction_fails_is_counted_and_never_journaled(self):
        self.put_another_programs_database_at_the_outbox_path()
        request = CaptureRequest("Ab3dE6gH", Role.USER, "big", "token ok\n" * 10_000)
        self.service.accept(request, self.settings, {"BROKEN": _Exploding("xxxx")})
        # it leaves the journal: nothing may be queued
        self.assertEqual(self.service.write_pending(), 1)
        self.assertEqual((self.service.backlog(), self.service.counters["redaction_failed"]),
                         (0, 1))
        self.assertEqual(self.journal_bytes(), b"")

    def test_the_hook_redacts_up_to_its_limit_in_utf8_bytes_and_holds_anything_larger(self):
        self.put_another_programs_database_at_the_outbox_path()
        key_line = f"key {KEY}\n"
        ascii_fit = key_line + "a" * (REDACT_ON_HOOK_MAX_BYTES - len(key_line))
        cases = {"exactly the limit": (ascii_fit, Outcome.ACCEPTED),
                 "a byte over": (ascii_fit + "a", Outcome.ACCEPTED_IN_MEMORY),
                 "fewer characters, more bytes": (key_line + "é" * (REDACT_ON_HOOK_MAX_BYTES // 2),
                                                  Outcome.ACCEPTED_IN_MEMORY)}
        for name, (text, outcome) in cases.items():
            with self.subTest(name):
                request = CaptureRequest("Ab3dE6gH", Role.USER, name, text)
                self.assertEqual(self.service.accept(request, self.settings), outcome)
        self.assertNotIn(KEY.encode(), self.journal_bytes())
        self.assertEqual(self.service.counters["accepted_in_memory"], 2)

    def test_a_dead_processs_journal_gives_its_records_in_accept_order(self):
        self.put_another_programs_database_at_the_outbox_path()
        for source, text in (("1", "large " * 5_000), ("2", "small after it")):
            self.service.accept(CaptureRequest("Ab3dE6gH", Role.USER, source, text), self.settings)
        self.service.write_pending()  # the large one is journaled now, after the small one
        records, damaged = decode_all(self.journal_bytes())
        self.assertEqual(([header["source_id"] for header, _ in records], damaged), (["1", "2"], 0))

    def test_a_journal_another_process_scans_for_dead_ones_while_it_is_created_stays_its_own(self):
        # Another process replaying dead processes' journals (journal.orphans) between the new
        # file's creation and its lock would find it unlocked, take it for a dead process's and
        # delete it: the journal would then write into a file no replay finds (or fail to lock it).
        journal = Journal(self.fallback, max_entries=10, max_bytes=1 << 20)
        self.addCleanup(journal.close)
        taken: list[str] = []
        real_flock = fcntl.flock

        def scan_first(fd, operation):
            if not taken and operation & fcntl.LOCK_EX:  # the new journal's lock: a scan first
                taken.append("")  # the scan's own locks go straight through
                for path, release in orphans((self.fallback,)):
                    taken.append(path)
                    release(True)  # an empty journal of a dead process: deleted
            return real_flock(fd, operation)

        with mock.patch.object(fcntl, "flock", scan_first):
            journal.open()
        self.assertEqual(taken, [""], "the scan took the journal being created")
        journal.append({"chat_id": "c"}, "kept")
        with open(journal.path, "rb") as handle:
            self.assertEqual([text for _, text in decode_all(handle.read())[0]], ["kept"])
        self.assertEqual(list(orphans((self.fallback,))), [], "a live journal is no orphan")

    def test_a_journal_folder_an_old_version_left_beside_another_programs_database_is_unused(self):
        self.put_another_programs_database_at_the_outbox_path()
        os.mkdir(os.path.join(os.path.dirname(self.path), "journal"), 0o700)
        self.assertEqual(self.capture("kept for later"), Outcome.HANDED_OFF)
        self.assertTrue(self.service.journal.path.startswith(self.fallback))
        self.assertEqual(os.listdir(os.path.join(os.path.dirname(self.path), "journal")), [])

    def test_the_journal_folder_beside_the_outbox_appears_once_the_outbox_is_known_to_be_ours(self):
        self.assertEqual(self.capture("first"), Outcome.QUEUED)
        # before: nothing beside it
        self.assertTrue(self.service.journal.path.startswith(self.fallback))
        beside = os.path.join(os.path.dirname(self.path), "journal")
        self.assertEqual(stat.S_IMODE(os.stat(beside).st_mode), 0o700)
        self.service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono,
                                      fallback_journal_folder=self.fallback)  # the next process's
        self.addCleanup(self.service.close)
        self.assertEqual(self.capture("second", source="m2"), Outcome.QUEUED)
        self.assertEqual(os.path.dirname(self.service.journal.path), beside)


CHILD_ACCEPT_THEN_WAIT = r"""
import sys
sys.path.insert(0, sys.argv[3])
from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.settings.config import build_settings
settings = build_settings({"outbox_path": sys.argv[1], "capture_wait_ms": 10}, {}, {})
service = CaptureService(settings, fallback_journal_folder=sys.argv[2])
for i in range(20):
    service.accept(CaptureRequest("killed", Role.USER, f"k{i}", f"kept {i}"), settings)
print("accepted", service.backlog(), flush=True)
sys.stdin.readline()  # killed here, before any writer pass could run
"""


class WriterScheduleTest(unittest.TestCase):
    def test_the_writers_timer_grows_to_its_longest_in_four_tries(self):
        waits = [wait_s(CaptureWriter.RETRY_WAIT, n) for n in range(1, 7)]
        self.assertEqual(waits, [CaptureWriter.SHORTEST_S, 0.25, 1.25]
                         + [CaptureWriter.LONGEST_S] * 3)


class WriterTimerTest(CaptureTestCase):
    """The hook's path: `accept` (never the outbox), then a wake of the writer thread, whose passes
    the tests run one step at a time on the injected clock."""

    def setUp(self):
        super().setUp()
        self.settings = self.make_settings(journal_capacity=16, capture_wait_ms=10,
                                           max_queued_rows=100)
        self.service = self.new_service()
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono)

    def hook(self, text, source):
        """What the capture adapter does: accept, then wake the writer (here: its woken step)."""
        outcome = self.service.accept(CaptureRequest("Ab3dE6gH", Role.USER, source, text),
                                      self.settings)
        self.writer.step(woken=True)
        return outcome

    def timer_steps(self, count):
        """The writer's own retries: each step once its wait has passed; the waits it chose."""
        waits = []
        for _ in range(count):
            waits.append(self.writer.step())
            self.mono.advance(waits[-1])
        return waits

    def test_a_database_freed_under_a_full_journal_accepts_a_message_after_the_shortest_retry(self):
        self.capture("first", source="first")  # creates the outbox
        child = hold_write_lock(self.path)
        try:
            outcomes = [self.hook(f"m{i}", str(i)) for i in range(16)]
            self.timer_steps(6)  # the lock is held for a while
            outcomes.append(self.hook("while full and locked", "refused"))
        finally:
            release_lock(child)
        self.assertEqual(outcomes, [Outcome.ACCEPTED] * 16
                         + [Outcome.REFUSED_JOURNAL_FULL])  # refused, clearly
        self.mono.advance(CaptureWriter.SHORTEST_S)
        # the writer's timer: no message has woken it since the lock was released
        self.writer.step()
        self.assertEqual(self.hook("right after the lock", "after"), Outcome.ACCEPTED)
        self.assertEqual([r[4] for r in self.rows()],
                         ["first", *(f"m{i}" for i in range(16)), "right after the lock"])

    def test_a_full_outbox_under_a_full_journal_is_retried_on_the_growing_timer(self):
        for i in range(100):
            self.capture(f"m{i}", source=str(i))
        outcomes = [self.hook(f"more {i}", f"y{i}") for i in range(17)]
        self.assertEqual(outcomes[-1], Outcome.REFUSED_FULL)
        # Room in a full outbox comes from deliveries, not from a lock let go: no transaction 20
        # times a second.
        self.assertEqual(self.timer_steps(5)[-2:], [CaptureWriter.LONGEST_S] * 2)

    def test_a_woken_writer_holds_its_pass_in_the_prompt_window_and_makes_it_at_the_model(self):
        window = PromptWindow(monotonic=self.mono)
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono, held_s=window.held_s)
        self.capture("first", source="first")  # creates the outbox
        window.opened()  # the user's message: Agent Zero builds the turn's prompt now
        self.hook("typed", "typed")
        self.assertEqual([r[4] for r in self.rows()], ["first"])  # not written yet
        self.assertEqual(self.writer.step(), PromptWindow.MAX_HOLD_S)  # still due, still held
        window.model_called()
        self.assertIsNone(self.writer.step())  # due since the wake: the pass now
        self.assertEqual([r[4] for r in self.rows()], ["first", "typed"])

    def test_a_held_writer_still_syncs_the_journal_at_once(self):
        # FULL covers a power loss from milliseconds after the hook on, held or not: the sync is
        # I/O (no interpreter lock); the outbox's transaction is what waits.
        window = PromptWindow(monotonic=self.mono)
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono, held_s=window.held_s)
        self.capture("first", source="first")  # opens the journal and the outbox
        journal_fd = self.service.journal._fd
        window.opened()
        with mock.patch("os.fdatasync", wraps=os.fdatasync) as synced:
            self.hook("typed", "typed")
            self.assertEqual(synced.call_args_list, [mock.call(journal_fd)])
            self.assertEqual([r[4] for r in self.rows()], ["first"])
            self.writer.step()  # held still: nothing new to sync
            self.assertEqual(synced.call_args_list, [mock.call(journal_fd)])

    def test_a_paste_held_in_memory_is_not_held_by_the_prompt_window(self):
        # A message over REDACT_ON_HOOK_MAX_BYTES lives only in memory until the writer redacts and
        # journals it: a kill -9 meanwhile loses it, so that pass does not wait for the model.
        window = PromptWindow(monotonic=self.mono)
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono, held_s=window.held_s)
        self.capture("first", source="first")  # opens the journal and the outbox
        window.opened()
        paste = "tide " * (REDACT_ON_HOOK_MAX_BYTES // 5 + 1)
        self.hook(paste, "paste")
        self.assertEqual([r[4] for r in self.rows()], ["first", paste])

    def hold_a_typed_message(self):
        """A writer whose pass for a typed message the prompt window holds; its clock stands
        still, so it stays held until stopped."""
        window = PromptWindow(monotonic=self.mono)
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono, held_s=window.held_s)
        self.capture("first", source="first")
        window.opened()
        self.service.accept(CaptureRequest("Ab3dE6gH", Role.USER, "typed", "typed"),
                            self.settings)
        self.assertEqual(self.writer.step(woken=True), PromptWindow.MAX_HOLD_S)  # held

    def test_a_writer_stopped_during_a_hold_makes_the_held_pass_first(self):
        # A switch-off, an uninstall or a settings change stops the writer: what the hold kept back
        # goes to the outbox of the settings it was captured under, as it would have without it.
        self.hold_a_typed_message()
        self.writer.start()  # held again, unless the stop comes before its first step
        self.writer.wake()
        self.writer.stop(10)
        self.assertFalse(self.writer.is_alive())
        self.assertEqual([r[4] for r in self.rows()], ["first", "typed"])

    def test_a_held_pass_is_not_made_once_its_stopper_no_longer_waits_for_it(self):
        # A purge halts the threads within what is left of its budget and then deletes the files:
        # a held pass made after the stop gave up waiting would create the purged outbox again.
        # Left in the journal, the message waits for the next writer, as any pass not yet begun.
        self.hold_a_typed_message()
        self.writer.start()
        self.writer.stop(0)  # the stopper's budget is spent: it does not wait
        self.writer.join()
        self.assertEqual([r[4] for r in self.rows()], ["first"])
        self.assertEqual(self.service.backlog(), 1)  # still in the journal

    def test_a_writer_held_past_the_cap_makes_its_pass(self):
        window = PromptWindow(monotonic=self.mono)
        self.writer = CaptureWriter(lambda: self.service, lambda: self.settings,
                                    monotonic=self.mono, held_s=window.held_s)
        window.opened()
        self.hook("typed", "typed")
        self.mono.advance(PromptWindow.MAX_HOLD_S)
        self.assertIsNone(self.writer.step())
        self.assertEqual([r[4] for r in self.rows()], ["typed"])

    def test_a_dead_processs_journal_the_locked_outbox_refused_is_read_again_on_its_own_timer(self):
        self.capture("first", source="first")
        child = hold_write_lock(self.path)
        try:
            self.accept_in_a_process_then_kill_it()
            self.assertEqual(self.service.write_pending(), 0)  # the lock: nothing replayed
        finally:
            release_lock(child)
        # Prompt retries under a full journal must not read (and redact) a dead journal on every
        # pass.
        self.assertEqual(self.service.write_pending(), 0)
        self.mono.advance(REPLAY_RETRY_S)
        self.assertEqual(self.service.write_pending(), 20)
        self.assertEqual(len(self.rows()), 21)


if __name__ == "__main__":
    unittest.main()
