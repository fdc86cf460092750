"""The outbox's record of the processes that drain it (storage/processes.py): heartbeat rows,
bounded and expiring; the shared unreachable circuit; a worker's beats (at most one per interval,
never per message, skipped rather than waited for while another process holds the lock); and what
status makes of them."""

import json
import os
import re
import sqlite3
import unittest

from delivery_helpers import Bench
from outbox_helpers import (
    DEST,
    ManualClock,
    OutboxTestCase,
    circuit_row,
    hold_write_lock,
    legacy_outbox,
    open_with_connection,
    process_row,
    put_row,
    release_lock,
    schema_version,
    temp_outbox_path,
)

from honcho_hub.errors import OutboxBusy
from honcho_hub.ops.status import StatusParts, build_status, gather_parts, status_text
from honcho_hub.runtime import ProcessState
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import chats, processes
from honcho_hub.storage.db import MIGRATIONS, SCHEMA_VERSION, Database
from honcho_hub.storage.processes import (
    BEAT_EVERY_S,
    COLUMNS,
    EXPIRE_S,
    MAX_PROCESSES,
    MAX_SHARED_CIRCUITS,
    Beat,
    SharedCircuit,
    host_name,
)

T0 = 1_800_000_000.0


class StorageTest(unittest.TestCase):
    def setUp(self):
        self.path = temp_outbox_path(self)
        self.clock = ManualClock(T0)
        self.db = self.open()

    def open(self, **options):
        db = Database(self.path, clock=self.clock, **options)
        self.addCleanup(db.close)
        return db

    def owners(self):
        return [row["owner"] for row in processes.listed(self.db)]

    def test_each_worker_has_one_row_its_beats_rewrite_and_at_most_max_processes_are_kept(self):
        processes.beat(self.db, Beat("w1", 5.0, "idle"))
        self.clock.advance(5)
        processes.beat(self.db, Beat("w1", 5.0, "running", sent=7, last_error_code="http_503",
                                     last_error_at=T0 + 4))
        [row] = processes.listed(self.db)
        self.assertEqual(set(row), set(COLUMNS))
        self.assertEqual((row["pid"], row["host"], row["started_at"], row["beat_at"]),
                         (os.getpid(), host_name(), T0, T0 + 5))
        self.assertEqual((row["state"], row["sent"], row["last_error_code"], row["last_error_at"]),
                         ("running", 7, "http_503", T0 + 4))
        for n in range(MAX_PROCESSES + 3):
            self.clock.advance(1)
            processes.beat(self.db, Beat(f"x{n}", 5.0, "idle"))
        self.assertEqual(self.owners(), [f"x{n}" for n in reversed(range(3, MAX_PROCESSES + 3))],
                         "newest beat first; the oldest beats made room")

    def test_a_clean_stop_deletes_its_row_and_the_expiry_deletes_rows_and_circuits_past_it(self):
        for owner in ("stopped", "killed"):
            processes.beat(self.db, Beat(owner, 5.0, "running"))
        processes.open_shared(self.db, DEST, SharedCircuit("reset", T0 + 10, 1))
        processes.forget(self.db, "stopped")
        self.assertEqual(self.owners(), ["killed"])
        self.clock.advance(EXPIRE_S)
        processes.expire(self.db)
        self.assertEqual(self.owners(), ["killed"], "a beat exactly EXPIRE_S old is kept")
        self.clock.advance(1)
        processes.expire(self.db)
        self.assertEqual(self.owners(), [])
        self.assertIsNotNone(processes.shared_circuit(self.db, DEST),
                             "its open-until is younger than EXPIRE_S")
        self.clock.advance(10)
        processes.expire(self.db)
        self.assertIsNone(processes.shared_circuit(self.db, DEST))

    def test_openings_keep_the_later_open_until_and_more_failures_a_success_closes_older_ones(self):
        processes.open_shared(self.db, DEST, SharedCircuit("reset", T0 + 30, 2))
        self.clock.advance(1)
        # another process's first
        processes.open_shared(self.db, DEST, SharedCircuit("unreachable", T0 + 10, 1))
        self.assertEqual(processes.shared_circuit(self.db, DEST),
                         SharedCircuit("unreachable", T0 + 30, 2, T0 + 1))
        self.assertIsNone(processes.shared_circuit(self.db, "https://elsewhere.test#ws"))
        self.assertFalse(processes.close_shared(self.db, DEST, T0 + 0.5),
                         "a success before the latest opening")
        self.assertIsNotNone(processes.shared_circuit(self.db, DEST))
        self.assertTrue(processes.close_shared(self.db, DEST, T0 + 1))
        self.assertIsNone(processes.shared_circuit(self.db, DEST))
        for n in range(MAX_SHARED_CIRCUITS + 2):
            self.clock.advance(1)
            processes.open_shared(self.db, f"https://h{n}.test#ws",
                                  SharedCircuit("unreachable", self.clock.now + 5, 1))
        kept = [n for n in range(MAX_SHARED_CIRCUITS + 2)
                if processes.shared_circuit(self.db, f"https://h{n}.test#ws")]
        self.assertEqual(kept, list(range(2, MAX_SHARED_CIRCUITS + 2)))

    def test_a_beat_waits_only_briefly_on_another_processs_lock_and_restores_the_wait_after(self):
        db, conn = open_with_connection(self.path, lambda: self.open(busy_timeout_s=5.0))
        statements = []
        conn.set_trace_callback(statements.append)
        holder = hold_write_lock(self.path)
        try:
            for write in (lambda: processes.beat(db, Beat("w1", 5.0, "idle")),
                          lambda: processes.open_shared(db, DEST,
                                                        SharedCircuit("reset", T0 + 5, 1))):
                with self.assertRaises(OutboxBusy):
                    write()
        finally:
            release_lock(holder)
        conn.set_trace_callback(None)
        waits = [s for s in statements if re.fullmatch(r"PRAGMA busy_timeout = \d+", s)]
        self.assertEqual(waits, ["PRAGMA busy_timeout = 250", "PRAGMA busy_timeout = 5000"] * 2)
        self.assertEqual(conn.execute("PRAGMA busy_timeout").fetchone()[0], 5000)
        processes.beat(db, Beat("w1", 5.0, "idle"))
        self.assertEqual([r["owner"] for r in processes.listed(db)], ["w1"])


class WorkerBeatTest(unittest.TestCase):
    def rows(self, bench):
        db = Database(bench.path)
        try:
            return processes.listed(db)
        finally:
            db.close()

    def test_a_worker_beats_at_most_once_per_interval_however_many_messages_it_delivers(self):
        bench = Bench(self)
        bench.say("b1", 5)
        bench.worker.step()
        first = bench.clock.now
        [row] = self.rows(bench)
        self.assertEqual((row["owner"], row["beat_at"], row["state"], row["sent"],
                          row["beat_every_s"]),
                         (bench.worker.owner, first, "running", 5, 5.0))
        # wall time moves, the monotonic clock the beats are paced by does not
        for _ in range(3):
            bench.clock.advance(1)
            bench.say("b1", 5)
            bench.worker.step()
        self.assertEqual(len(bench.server_texts("b1")), 20)
        [row] = self.rows(bench)
        self.assertEqual((row["beat_at"], row["sent"]), (first, 5))
        bench.mono.advance(BEAT_EVERY_S)
        bench.worker.step()
        [row] = self.rows(bench)
        self.assertEqual((row["beat_at"], row["state"], row["sent"]),
                         (bench.clock.now, "idle", 20))

    def test_the_beat_interval_follows_a_longer_poll_interval(self):
        bench = Bench(self, poll_interval_s=60)
        bench.worker.step()
        [row] = self.rows(bench)
        self.assertEqual(row["beat_every_s"], 60.0)
        status = build_status(bench.settings,
                              gather_parts(bench.settings, ProcessState(), worker=bench.worker),
                              bench.clock.now + 1)
        [shown] = status["processes"]["workers"]
        self.assertEqual((shown["stale_after_s"], shown["this_process"], shown["pid"]),
                         (180.0, True, os.getpid()))

    def test_a_locked_outbox_skips_the_beat_and_the_step_goes_on(self):
        bench = Bench(self)
        bench.worker.step()  # opens the outbox: the first beat says idle
        bench.enabled = False  # a paused step writes nothing but its beat
        bench.mono.advance(BEAT_EVERY_S)
        holder = hold_write_lock(bench.path)
        try:
            report = bench.worker.step()
        finally:
            release_lock(holder)
        self.assertEqual(report.state, "paused")
        self.assertEqual([r["state"] for r in self.rows(bench)], ["idle"],
                         "skipped, not waited for")
        bench.worker.step()
        self.assertEqual([r["state"] for r in self.rows(bench)], ["idle"],
                         "the next beat is an interval later")
        bench.mono.advance(BEAT_EVERY_S)
        bench.worker.step()
        self.assertEqual([r["state"] for r in self.rows(bench)], ["paused"])

    def test_a_stopped_worker_deletes_its_row(self):
        bench = Bench(self)
        bench.worker.step()
        self.assertEqual(len(self.rows(bench)), 1)
        self.assertTrue(bench.worker.stop(10))
        self.assertEqual(self.rows(bench), [])


class ProcessesStatusTest(unittest.TestCase):
    def setUp(self):
        self.path = temp_outbox_path(self)
        self.settings = build_settings({"outbox_path": self.path, "api_url": "https://honcho.test"},
                                       {}, {})

    def status(self, now, rows=(), shared=None, pending=0):
        parts = StatusParts(processes=list(rows), shared_circuit=shared,
                            queue_counts={"pending": pending})
        return build_status(self.settings, parts, now)

    def test_a_row_is_stale_past_its_bound_and_hidden_past_the_expiry(self):
        rows = [process_row("w1", 101, T0, state="running", sent=4)]
        for age, stale, shown in ((15, False, True), (16, True, True), (EXPIRE_S, True, True),
                                  (EXPIRE_S + 1, None, False)):
            with self.subTest(age=age):
                section = self.status(T0 + age, rows)["processes"]
                self.assertEqual(len(section["workers"]), int(shown))
                self.assertEqual((section["live"], section["stale"]),
                                 (0, 0) if not shown else (int(not stale), int(stale)))
                if shown:
                    self.assertEqual(section["workers"][0]["stale"], stale)
                    self.assertEqual(section["workers"][0]["beat_age_s"], float(age))

    def test_each_worker_shows_its_circuit_counters_and_last_error_and_never_the_path(self):
        rows = [process_row("w1", 101, T0, state="circuit_open", circuit_kind="auth",
                            circuit_code="auth_401", circuit_open_until=T0 + 60,
                            last_error_code="auth_401", last_error_at=T0 - 1, failed=3),
                process_row("w2", 102, T0 - 2, sent=9, reconciled=1, dead=2,
                            last_success_at=T0 - 3)]
        status = self.status(T0 + 1, rows)
        first, second = status["processes"]["workers"]
        self.assertEqual((first["pid"], first["circuit"], first["last_error_code"],
                          first["last_error_age_s"], first["failed"]),
                         (101, {"kind": "auth", "reason": "auth_401", "retry_in_s": 59.0},
                          "auth_401", 2.0, 3))
        self.assertEqual((second["sent"], second["reconciled"], second["dead_lettered"],
                          second["last_success_age_s"], second["started_age_s"],
                          second["this_process"]),
                         (9, 1, 2, 4.0, 103.0, False))
        self.assertNotIn("owner", first)
        self.assertNotIn(self.path, json.dumps(status))
        text = status_text(status)
        self.assertIn("pid 101 on box circuit_open (circuit auth), beat 1 s ago, 0 sent", text)
        self.assertIn("pid 102 on box idle, beat 3 s ago, 9 sent", text)

    def test_events_pending_with_no_worker_here_are_amber_only_while_no_other_process_drains(self):
        cases = (("no process", [], True),
                 ("another process beats", [process_row("w1", 101, T0)], False),
                 ("its beat is stale", [process_row("w1", 101, T0 - 60)], True),
                 ("it is paused",
                  [process_row("w1", 101, T0, state="paused", reason="plugin_disabled")], True))
        for name, rows, amber in cases:
            with self.subTest(name):
                reasons = self.status(T0 + 1, rows, pending=2)["health_reasons"]
                self.assertEqual("worker stopped with events pending" in reasons, amber)

    def test_an_open_shared_circuit_is_amber_and_says_when_the_processes_probe_again(self):
        shared = SharedCircuit("reset", T0 + 30, 2, T0 - 5)
        status = self.status(T0, [process_row("w1", 101, T0)], shared=shared)
        self.assertEqual(status["processes"]["shared_circuit"],
                         {"reason": "reset", "retry_in_s": 30.0, "failures": 2})
        self.assertEqual((status["health"], status["health_reasons"]),
                         ("amber", ["Honcho unreachable (reset)"]))
        self.assertIn("Honcho unreachable for every process (reset): next probe in 30 s",
                      status_text(status))
        self.assertIsNone(
            self.status(T0, [process_row("w1", 101, T0)])["processes"]["shared_circuit"])

    def test_the_text_names_at_most_a_few_processes(self):
        rows = [process_row(f"w{n}", 100 + n, T0 - n) for n in range(12)]
        text = status_text(self.status(T0, rows))
        self.assertIn("pid 107", text)
        self.assertNotIn("pid 108", text)
        self.assertIn("and 4 more", text)


# Values no process of the plugin writes: another program's, a corrupted file's, or nonsense. Each
# replaces one column of an otherwise sound row.
CIRCUITS_THAT_DO_NOT_PARSE = {
    "open_until as text": {"open_until": "tomorrow"}, "open_until negative": {"open_until": -1.0},
    "open_until infinite": {"open_until": float("inf")}, "open_until huge": {"open_until": 1e300},
    "failures as a blob": {"failures": b"\x00\x01"}, "failures negative": {"failures": -3},
    "code as a blob": {"code": b"\xff"}, "opened_at NaN as text": {"opened_at": "NaN"},
}
PROCESSES_THAT_DO_NOT_PARSE = {
    "beat_at as text": {"beat_at": "late"}, "pid as text": {"pid": "pid"},
    "sent negative": {"sent": -1},
    "beat_every_s zero": {"beat_every_s": 0.0}, "beat_every_s huge": {"beat_every_s": 1e300},
    "host as a blob": {"host": b"\x00"},
    "last_success_at infinite": {"last_success_at": float("inf")},
    "circuit_open_until as text": {"circuit_open_until": "NaN"},
}


def table_rows(path: str, table: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT * FROM {table}").fetchall()
    finally:
        conn.close()


class UntrustedRowsTest(unittest.TestCase):
    """Rows other processes wrote are not obeyed blindly: a shared circuit holds delivery back at
    most circuit_max_s from when it is read, and rows that do not parse are ignored, then
    deleted."""

    def test_a_shared_circuit_dated_a_day_ahead_holds_delivery_back_at_most_circuit_max_s(self):
        bench = Bench(self)
        texts = bench.say("ahead", 2)
        now = bench.clock()  # a process whose clock runs a day ahead opened it
        put_row(bench.path, "shared_circuits",
                circuit_row(bench.settings.destination(), now + 86_400,
                            open_until=now + 2 * 86_400))
        self.assertEqual(bench.worker.step().state, "circuit_open")
        bench.clock.advance(bench.settings.circuit_max_s)
        bench.run_until_idle()
        bench.assert_exactly_once("ahead", texts)

    def test_a_worker_step_ignores_rows_that_do_not_parse_and_the_next_expiry_deletes_them(self):
        cases = [("shared_circuits", name, changed)
                 for name, changed in CIRCUITS_THAT_DO_NOT_PARSE.items()]
        cases += [("worker_processes", name, changed)
                  for name, changed in PROCESSES_THAT_DO_NOT_PARSE.items()]
        for table, name, changed in cases:
            with self.subTest(name):
                bench = Bench(self)
                texts = bench.say("junk", 2)
                now = bench.clock()
                put_row(bench.path, table,
                        circuit_row(bench.settings.destination(), now, **changed)
                        if table == "shared_circuits"
                        else {**process_row("other", 4242, now), **changed})
                bench.run_until_idle()
                bench.assert_exactly_once("junk", texts)
                db = Database(bench.path, clock=bench.clock)
                self.addCleanup(db.close)
                self.assertNotIn("other", [r["owner"] for r in processes.listed(db)])
                processes.expire(db)
                self.assertEqual([r for r in table_rows(bench.path, table)
                                  if "other" in r or "junk" in str(r)]
                                 if table == "worker_processes"
                                 else table_rows(bench.path, table), [])


class ProcessTablesMigrationTest(OutboxTestCase):
    """Schema step 6: the heartbeat and shared-circuit tables (storage/processes.py)."""

    def test_schema_5_upgrades_keeping_events_and_chat_sessions_then_records_processes(self):
        self.assertGreaterEqual(SCHEMA_VERSION, 6)  # later steps add their own tables
        self.assertIn("CREATE TABLE worker_processes", MIGRATIONS[5][0])
        legacy_outbox(self.path, 5, {"queued-at-v5": ("pending", None),
                                     "sent-at-v5": ("delivered", None)})
        conn = sqlite3.connect(self.path)
        with conn:
            conn.execute("INSERT INTO chat_sessions VALUES (?, 'c1', 'chat-c1', NULL, 1.0, 2.0)",
                         (DEST,))
        conn.close()
        box = self.open()
        self.assertEqual(schema_version(self.path), SCHEMA_VERSION)
        self.assertEqual((box.stats()["counts"]["pending"], box.stats()["counts"]["delivered"]),
                         (1, 1))
        self.assertEqual([m["session_id"] for m in chats.known_sessions(box.db)], ["chat-c1"])
        self.assertEqual((processes.listed(box.db), processes.shared_circuit(box.db, DEST)),
                         ([], None))
        processes.beat(box.db, Beat("w1", 5.0, "idle"))
        processes.open_shared(box.db, DEST, SharedCircuit("reset", self.clock.now + 5, 1))
        self.assertEqual([r["owner"] for r in processes.listed(box.db)], ["w1"])
        self.assertEqual(processes.shared_circuit(box.db, DEST).code, "reset")
        box.close()
        again = self.open()  # reopened: migrated once, rows kept
        self.assertEqual([r["owner"] for r in processes.listed(again.db)], ["w1"])


if __name__ == "__main__":
    unittest.main()
