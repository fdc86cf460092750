"""The memory tool's record of its own writes (storage/memory_log.py), in the outbox file every
process shares: its schema step, every field an inspector needs, and only the newest records
kept."""

import json
import unittest

from outbox_helpers import DEST, OutboxTestCase, legacy_outbox, read_outbox, schema_version

from honcho_hub.storage import memory_log
from honcho_hub.storage.db import MIGRATIONS, SCHEMA_VERSION
from honcho_hub.storage.memory_log import MAX_RECORDS, MemoryWrite, WriteKind


class MemoryWritesTest(OutboxTestCase):
    """The local record of the memory tool's own writes, in the outbox file every process shares."""

    def write(self, n, kind=WriteKind.REMEMBER, content=None):
        return MemoryWrite(f"c{n:04d}", kind, content or f"fact number {n}", DEST, "agent-zero",
                           "user", "chat-a", "a0-alpha")

    def test_an_outbox_at_schema_3_upgrades_keeping_its_events_and_then_keeps_memory_writes(self):
        # schema 3 is the one before them
        self.assertIn("CREATE TABLE memory_writes", MIGRATIONS[3][0])
        legacy_outbox(self.path, 3, {"queued-at-v3": ("pending", None),
                                     "gone-at-v3": ("dead", "http_422")})
        box = self.open()
        self.assertEqual(schema_version(self.path), SCHEMA_VERSION)
        self.assertEqual((box.stats()["counts"]["pending"], box.stats()["counts"]["dead"]), (1, 1))
        self.assertEqual(memory_log.summary(box.db),
                         {"remembered": 0, "forgotten": 0, "latest": []})
        memory_log.record(box.db, self.write(1))
        self.assertEqual(memory_log.summary(box.db)["remembered"], 1)

    def test_every_field_an_inspector_needs_to_show_or_undo_a_write_is_kept(self):
        box = self.open()
        memory_log.record(box.db, self.write(7, WriteKind.FORGET, "The user drinks green tea"))
        row = read_outbox(self.path, "SELECT conclusion_id, kind, made_at, destination,"
                                     " observer_id, observed_id, session_id, scope_id, content"
                                     " FROM memory_writes")
        self.assertEqual(row, [("c0007", "forget", self.clock(), DEST, "agent-zero", "user",
                                "chat-a", "a0-alpha", "The user drinks green tea")])

    def test_only_the_newest_records_stay_and_the_summary_holds_counts_ids_times_never_text(self):
        box = self.open(synchronous="NORMAL")
        made_at = {}
        for n in range(1, MAX_RECORDS + 6):
            made_at[n] = self.clock()
            memory_log.record(box.db, self.write(
                n, WriteKind.FORGET if n % 4 == 0 else WriteKind.REMEMBER))
            self.clock.advance(1)
        kept = [r[0] for r in read_outbox(self.path,
                                          "SELECT conclusion_id FROM memory_writes ORDER BY seq")]
        self.assertEqual(kept, [f"c{n:04d}" for n in range(6, MAX_RECORDS + 6)])
        summary = memory_log.summary(box.db, latest=3)
        forgotten = sum(1 for n in range(6, MAX_RECORDS + 6) if n % 4 == 0)
        self.assertEqual((summary["remembered"], summary["forgotten"]),
                         (MAX_RECORDS - forgotten, forgotten))
        self.assertEqual(summary["latest"], [
            {"id": f"c{n:04d}", "kind": "forget" if n % 4 == 0 else "remember", "at": made_at[n]}
            for n in (MAX_RECORDS + 5, MAX_RECORDS + 4, MAX_RECORDS + 3)])
        self.assertNotIn("fact number", json.dumps(summary))


if __name__ == "__main__":
    unittest.main()
