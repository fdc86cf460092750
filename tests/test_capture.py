"""Capture service: bad input, chunking, stable ids, bounded waits and the in-memory hand-off."""

import os
import sqlite3
import unittest

from outbox_helpers import ManualClock, hold_write_lock, release_lock, temp_outbox_path
import hub_testkit  # noqa: F401

from honcho_hub.capture import CaptureRequest, CaptureService, Outcome, Role, event_id, session_id_for
from honcho_hub.chunking import HONCHO_MAX_CHARS, clean_text, split_message, strip_marker
from honcho_hub.config import build_settings
from honcho_hub.outbox import Outbox

KEY = "ghp_" + "a1B2c3D4e5" * 4


class CaptureTestCase(unittest.TestCase):
    def setUp(self):
        self.path = temp_outbox_path(self)
        self.clock, self.mono = ManualClock(), ManualClock(100.0)
        self.settings = self.make_settings()
        self.service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono)
        self.addCleanup(self.service.close)

    def make_settings(self, **overrides):
        return build_settings({"outbox_path": self.path, **overrides}, {}, {})

    def capture(self, text, source="m1", role=Role.USER, chat="Ab3dE6gH", secrets=None):
        return self.service.capture(CaptureRequest(chat, role, source, text), self.settings, secrets)

    def rows(self):
        box = Outbox(self.path, clock=self.clock)
        try:
            return box._conn.execute(
                "SELECT id, session_id, peer_id, role, content, captured_at FROM events ORDER BY seq").fetchall()
        finally:
            box.close()


class BadInputTest(CaptureTestCase):
    def test_empty_and_whitespace_are_skipped(self):
        for text in ["", "   ", "\n\t\n", "\x00\x00"]:
            with self.subTest(text=repr(text)):
                self.assertEqual(self.capture(text, source=repr(text)), Outcome.SKIPPED_EMPTY)
        self.assertFalse(os.path.exists(self.path))  # nothing to store: the file is not even created

    def test_non_string_content_is_refused_and_counted(self):
        for i, value in enumerate([None, 42, b"bytes", ["a"], {"m": "x"}]):
            self.assertEqual(self.capture(value, source=str(i)), Outcome.INVALID)
        self.assertEqual(self.service.counters["invalid"], 5)

    def test_odd_characters_are_stored_safely(self):
        cases = {"surrogate": ("a\ud800b", "a\ufffdb"), "nul": ("a\x00b", "ab"), "control": ("a\x07\x1bb\tc", "ab\tc"),
                 "rtl": ("שלום \u202eevil\u202c", "שלום \u202eevil\u202c"), "combining": ("e\u0301 n\u0303", "e\u0301 n\u0303")}
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
        self.assertTrue(all(len(p) <= HONCHO_MAX_CHARS for p in parts))
        self.assertEqual("".join(strip_marker(p) for p in parts), text)
        self.assertTrue(parts[1].startswith(f"[continued, part 2 of {len(parts)}]\n"))

    def test_a_redaction_failure_queues_nothing(self):
        self.assertEqual(self.capture("token ok", secrets={"BROKEN": _Exploding("xxxx")}), Outcome.REDACTION_FAILED)
        self.assertEqual(self.service.counters["redaction_failed"], 1)
        self.assertFalse(os.path.exists(self.path))

    def test_secrets_are_redacted_before_storage(self):
        self.capture(f"my key {KEY} and db pass hunter2!", secrets={"DB": "hunter2!"})
        stored = self.rows()[0][4]
        self.assertNotIn(KEY, stored)
        self.assertNotIn("hunter2!", stored)


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
            (event_id("Ab3dE6gH", "user", "h1", 0), "chat-Ab3dE6gH", "user", "user", "hi", 1_800_000_123.5),
            (event_id("Ab3dE6gH", "agent", "a1", 0), "chat-Ab3dE6gH", "agent-zero", "agent", "hello human",
             1_800_000_123.5)])

    def test_ids_are_stable_and_session_ids_safe(self):
        self.assertEqual(event_id("c", "user", "m", 0), event_id("c", "user", "m", 0))
        self.assertNotEqual(event_id("c", "user", "m", 0), event_id("c", "user", "m", 1))
        self.assertNotEqual(event_id("c", "user", "m", 0), event_id("c", "agent", "m", 0))
        self.assertEqual(session_id_for("a.b/c d"), "chat-a_b_c_d")
        self.assertEqual(len(session_id_for("x" * 900)), 512)


class HandoffTest(CaptureTestCase):
    """A real second process holds the write lock (see outbox_helpers.hold_write_lock)."""

    def test_a_database_locked_by_another_process_hands_off_then_flushes_in_order(self):
        self.capture("first", source="1")  # creates the file
        child = hold_write_lock(self.path)
        try:
            self.assertEqual(self.capture("second", source="2"), Outcome.HANDED_OFF)
            self.assertEqual(self.capture("third", source="3"), Outcome.HANDED_OFF)
        finally:
            release_lock(child)
        self.assertEqual(self.capture("fourth", source="4"), Outcome.QUEUED)  # flushed the hand-off first
        self.assertEqual([r[4] for r in self.rows()], ["first", "second", "third", "fourth"])
        self.assertEqual(self.service.counters["handed_off"], 2)

    def test_a_lock_held_while_the_outbox_is_first_opened_causes_no_cooldown(self):
        os.makedirs(os.path.dirname(self.path))
        sqlite3.connect(self.path).close()  # the file exists; another process is about to migrate it
        child = hold_write_lock(self.path)
        try:
            self.assertEqual(self.capture("early", source="1"), Outcome.HANDED_OFF)
        finally:
            release_lock(child)
        self.assertEqual(self.capture("right after", source="2"), Outcome.QUEUED)  # no 30 s wait
        self.assertEqual([r[4] for r in self.rows()], ["early", "right after"])

    def test_the_worker_can_flush_the_hand_off(self):
        self.capture("first", source="1")
        child = hold_write_lock(self.path)
        try:
            self.capture("second", source="2")
            self.assertEqual(self.service.flush_handoff(), 0)
        finally:
            release_lock(child)
        self.assertEqual(self.service.flush_handoff(), 1)
        self.assertEqual(len(self.service.handoff), 0)

    def test_a_full_hand_off_refuses_and_counts(self):
        self.settings = self.make_settings(handoff_capacity=16, capture_wait_ms=10)
        self.service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono)
        self.capture("first", source="first")
        child = hold_write_lock(self.path)
        try:
            outcomes = [self.capture(f"m{i}", source=str(i)) for i in range(17)]
        finally:
            release_lock(child)
        self.assertEqual(outcomes.count(Outcome.HANDED_OFF), 16)
        self.assertEqual(outcomes[-1], Outcome.REFUSED_HANDOFF_FULL)
        self.assertEqual(self.service.counters["refused_handoff_full"], 1)

    def test_an_unusable_outbox_keeps_messages_in_memory_until_it_is_fixed(self):
        blocker = os.path.dirname(self.path)
        os.makedirs(os.path.dirname(blocker), exist_ok=True)
        open(blocker, "w").close()  # a file where the folder should be
        self.assertEqual(self.capture("kept", source="k"), Outcome.HANDED_OFF)
        self.assertEqual(self.service.unavailable, "outbox_unavailable")
        os.remove(blocker)
        self.assertEqual(self.capture("later", source="l"), Outcome.HANDED_OFF)  # still cooling down
        self.mono.advance(31)
        self.assertEqual(self.capture("after fix", source="f"), Outcome.QUEUED)
        self.assertIsNone(self.service.unavailable)
        self.assertEqual([r[4] for r in self.rows()], ["kept", "later", "after fix"])

    def test_a_corrupted_outbox_is_visible_and_the_agent_keeps_working(self):
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, "wb") as handle:
            handle.write(b"garbage" * 1000)
        self.assertEqual(self.capture("safe in memory"), Outcome.HANDED_OFF)
        self.assertEqual(self.service.unavailable, "outbox_corrupt")

    def test_a_full_outbox_refuses_and_counts(self):
        self.settings = self.make_settings(max_queued_rows=100)
        self.service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono)
        for i in range(100):
            self.capture(f"m{i}", source=str(i))
        self.assertEqual(self.capture("one too many", source="x"), Outcome.REFUSED_FULL)
        self.assertEqual(self.service.counters["refused_full"], 1)


class ChunkingTest(unittest.TestCase):
    def test_boundaries_in_order_of_preference(self):
        limit = 200
        cases = {
            "paragraph": ("word " * 25 + "\n\n") * 6,
            "sentence": "This is one sentence. " * 40,
            "word": "lorem " * 120,
            "none": "x" * 1000,
            "combining": ("e\u0301" * 400),
        }
        for name, text in cases.items():
            with self.subTest(name=name):
                parts = split_message(text, limit)
                self.assertTrue(all(len(p) <= limit for p in parts))
                self.assertEqual("".join(strip_marker(p) for p in parts), text)
                first = strip_marker(parts[0])
                if name == "paragraph":
                    self.assertTrue(first.endswith("\n\n"))
                elif name == "sentence":
                    self.assertTrue(first.endswith(". "))
                elif name == "word":
                    self.assertTrue(first.endswith(" "))
                elif name == "combining":
                    self.assertFalse(strip_marker(parts[1])[0] == "\u0301")

    def test_short_text_is_one_part_without_marker(self):
        self.assertEqual(split_message("short"), ["short"])

    def test_clean_text(self):
        self.assertEqual(clean_text("a\r\nb\x00c\x1f\ud83dd"), "a\nbc\ufffdd")


if __name__ == "__main__":
    unittest.main()
