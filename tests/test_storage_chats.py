"""Chats as the outbox file records them (storage/chats.py): each chat's Honcho sessions, recorded
with the captured messages' events, and the schema step of forgotten chats."""

import dataclasses
import json
import unittest

from outbox_helpers import (
    DEST,
    OutboxTestCase,
    enqueue,
    event,
    legacy_outbox,
    read_outbox,
    schema_version,
    temp_outbox_path,
)

from honcho_hub.storage import chats
from honcho_hub.storage.chats import MAX_CHAT_SESSIONS
from honcho_hub.storage.db import MIGRATIONS, SCHEMA_VERSION
from honcho_hub.storage.outbox import Outbox


class ChatSessionsTest(OutboxTestCase):
    """Known chat -> Honcho session mappings, recorded with the captured messages' events."""

    def message(self, n, chat="c1", session="chat-c1", project=None, parts=1, dest=DEST):
        return [dataclasses.replace(event(n * 10 + i, session, dest=dest), chat_id=chat,
                                    project=project, captured_at=1_700_000_000.0 + n)
                for i in range(parts)]

    def mappings(self, box, limit=100):
        return [(m["chat_id"], m["project"], m["session_id"],
                 m["first_captured_at"] - 1_700_000_000.0, m["last_captured_at"] - 1_700_000_000.0)
                for m in chats.known_sessions(box.db, limit)]

    def test_an_outbox_at_schema_4_upgrades_keeping_its_events_and_then_records_chat_sessions(self):
        # schema 4 is the one before them
        self.assertIn("CREATE TABLE chat_sessions", MIGRATIONS[4][0])
        legacy_outbox(self.path, 4, {"queued-at-v4": ("pending", None),
                                     "sent-at-v4": ("delivered", None)})
        box = self.open()
        self.assertEqual(schema_version(self.path), SCHEMA_VERSION)
        self.assertEqual((box.stats()["counts"]["pending"], box.stats()["counts"]["delivered"]),
                         (1, 1))
        self.assertEqual(chats.known_sessions(box.db), [])
        box.enqueue_batches([self.message(1)])
        self.assertEqual(self.mappings(box), [("c1", None, "chat-c1", 1.0, 1.0)])

    def test_each_chat_and_session_is_one_row_newest_first_with_its_first_and_last_capture(self):
        box = self.open()
        box.enqueue_batches([self.message(1, parts=3), self.message(2, "c2", "chat-c2")])
        box.enqueue_batches([self.message(3)])  # c1 again: its last capture moves
        # a project, per-project
        box.enqueue_batches([self.message(4, "c1", "project-Alpha", "Alpha")])
        # global
        box.enqueue_batches([self.message(5, "c3", "global"), self.message(6, "c2", "global")])
        self.assertEqual(self.mappings(box), [("c2", None, "global", 6.0, 6.0),
                                              ("c3", None, "global", 5.0, 5.0),
                                              ("c1", "Alpha", "project-Alpha", 4.0, 4.0),
                                              ("c1", None, "chat-c1", 1.0, 3.0),
                                              ("c2", None, "chat-c2", 2.0, 2.0)])
        self.assertEqual(self.mappings(box, 2), self.mappings(box)[:2])
        self.assertEqual(set(chats.known_sessions(box.db)[0]),
                         {"chat_id", "project", "session_id", "first_captured_at",
                          "last_captured_at"})

    def test_a_project_attached_later_is_recorded_on_the_chats_session(self):
        box = self.open()
        box.enqueue_batches([self.message(1)])
        box.enqueue_batches([self.message(2, project="Alpha")])
        # captured earlier, stored later: not the latest
        box.enqueue_batches([self.message(0, project="Beta")])
        self.assertEqual(self.mappings(box), [("c1", "Alpha", "chat-c1", 0.0, 2.0)])

    def test_destinations_are_kept_apart(self):
        box = self.open()
        box.enqueue_batches([self.message(1), self.message(2, dest="https://other.example#ws")])
        self.assertEqual(len(chats.known_sessions(box.db)), 2)

    def test_duplicates_refused_messages_and_events_without_a_chat_record_nothing(self):
        box = self.open(max_rows=2)
        self.assertEqual(enqueue(box, self.message(1)).inserted, 1)
        # the same message again: stored once, its times unchanged
        box.enqueue_batches([self.message(1)])
        self.assertEqual(
            box.enqueue_batches([self.message(2, "c2", "chat-c2", parts=2)])[0].refused, 2)
        enqueue(box, [event(99, "chat-x")])  # no chat: an event stored by another path
        self.assertEqual(self.mappings(box), [("c1", None, "chat-c1", 1.0, 1.0)])

    def test_only_the_newest_mappings_are_kept(self):
        box = self.open(synchronous="NORMAL", max_rows=MAX_CHAT_SESSIONS + 10)
        batches = [self.message(n, f"c{n}", f"chat-c{n}") for n in range(MAX_CHAT_SESSIONS + 5)]
        box.enqueue_batches(batches[:MAX_CHAT_SESSIONS])
        # c0 is active again
        box.enqueue_batches([self.message(MAX_CHAT_SESSIONS + 9, "c0", "chat-c0")])
        box.enqueue_batches(batches[MAX_CHAT_SESSIONS:])
        count = read_outbox(self.path, "SELECT count(*) FROM chat_sessions")[0][0]
        self.assertEqual(count, MAX_CHAT_SESSIONS)
        kept = {m["chat_id"] for m in chats.known_sessions(box.db, MAX_CHAT_SESSIONS)}
        self.assertEqual(kept, {"c0"} | {f"c{n}" for n in range(6, MAX_CHAT_SESSIONS + 5)})

    def test_the_limit_is_bounded_and_mappings_hold_no_content(self):
        box = self.open()
        box.enqueue_batches([self.message(n, f"c{n}", f"chat-c{n}") for n in range(3)])
        for limit, expected in ((-5, 0), (0, 0), (2, 2), (10**9, 3)):
            with self.subTest(limit=limit):
                self.assertEqual(len(chats.known_sessions(box.db, limit)), expected)
        self.assertNotIn("message", json.dumps(chats.known_sessions(box.db)))


class ForgetMigrationTest(unittest.TestCase):
    def test_an_outbox_at_schema_6_upgrades_keeping_its_rows_and_then_forgets(self):
        self.assertEqual(len(MIGRATIONS[6]), 2)
        path = temp_outbox_path(self)
        legacy_outbox(path, 6, {"queued-at-v6": ("pending", None)})
        box = Outbox(path)
        self.addCleanup(box.close)
        self.assertEqual(schema_version(path), SCHEMA_VERSION)
        self.assertEqual(box.stats()["counts"]["pending"], 1)
        # the legacy row's session is `s`, not a chat's
        self.assertEqual(box.begin_forget("d", "s").deleted, 0)
        self.assertEqual((chats.generation(box.db, "d", "s"), box.stats()["counts"]["pending"]),
                         (1, 1))


if __name__ == "__main__":
    unittest.main()
