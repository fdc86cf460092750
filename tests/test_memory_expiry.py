"""Memories that expire: `remember` with a lifetime (`expires_in`), the lifetime kept in the
outbox file (Honcho keeps no metadata on a conclusion), the sweep that deletes expired conclusions
(bounded, backed off, one process per row), pinning, the inspector's time left and status's counts.
Real SQLite in temp folders, the fake Honcho, injected clocks."""

import sqlite3
import unittest

import httpx
from delivery_helpers import Bench
from fake_honcho import FakeHoncho
from hub_testkit import checkout_text
from outbox_helpers import ManualClock, legacy_outbox, schema_version, temp_outbox_path

from honcho_hub import hub
from honcho_hub.delivery import expiry
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.ops import inspector
from honcho_hub.ops.inspector import Inspector
from honcho_hub.ops.status import build_status, status_text
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import expiries, memory_log
from honcho_hub.storage.db import SCHEMA_VERSION, Database
from honcho_hub.storage.outbox import Outbox
from honcho_hub.tool.actions import ActionContext, run_action

KEY = "hch-expiry-key-97531"
NOW = 1_800_000_000.0
TEMPLATE = checkout_text("prompts", "honcho.recall_block.md")


class ExpiryBench:
    """The memory tool's context as the bridge builds it (its record is memory_log.keep at the
    bench's clock), the real SDK over the fake Honcho, and the sweep's database on the same file."""

    def __init__(self, test, **plugin):
        self.test = test
        self.fake = FakeHoncho(api_key=KEY)
        self.clock, self.mono = ManualClock(NOW), ManualClock(1_000.0)
        self.settings = s = build_settings({"api_url": "https://honcho.test",
                                            "outbox_path": temp_outbox_path(test), **plugin},
                                           {"HONCHO_API_KEY": KEY}, {})
        self.gateway = HonchoGateway.for_settings(
            s, http_client_factory=lambda: httpx.Client(transport=self.fake.transport()))
        test.addCleanup(self.gateway.close)
        self.ctx = ActionContext(settings=s, session_id=None, gateway=self.gateway,
                                 record=self.keep)

    def keep(self, write):
        db = self.db()
        try:
            memory_log.record(db, write)
        finally:
            db.close()

    def db(self):
        return Database.for_settings(self.settings, clock=self.clock)

    def remember(self, content, expires_in=None):
        args = {"content": content, **({"expires_in": expires_in} if expires_in else {})}
        result = run_action("remember", args, self.ctx)
        self.test.assertTrue(result.ok, result.text)
        return result.text.split("conclusion ", 1)[1].split(".", 1)[0]

    def sweep(self, owner="process-a", **kw):
        db = self.db()
        try:
            return expiry.sweep(db, self.gateway, self.settings, owner, monotonic=self.mono, **kw)
        finally:
            db.close()

    def rows(self):
        conn = sqlite3.connect(self.settings.outbox_path)
        try:
            return conn.execute("SELECT conclusion_id, state, expires_at, attempts, error_code"
                                " FROM memory_expiries ORDER BY expires_at, conclusion_id"
                                ).fetchall()
        finally:
            conn.close()

    def deletes(self):
        return [path for method, path in self.fake.requests if method == "DELETE"]


class ExpiryMigrationTest(unittest.TestCase):
    def test_an_outbox_at_schema_7_upgrades_keeping_its_rows_and_then_keeps_lifetimes(self):
        path = temp_outbox_path(self)
        legacy_outbox(path, 7, {"queued-at-v7": ("pending", None)})
        box = Outbox(path)
        self.addCleanup(box.close)
        self.assertEqual(schema_version(path), SCHEMA_VERSION)
        self.assertEqual(box.stats()["counts"]["pending"], 1)
        memory_log.record(box.db, memory_log.MemoryWrite(
            "c1", memory_log.WriteKind.REMEMBER, "x", "d", "agent-zero", "user", None, None, 60))
        self.assertEqual(expiries.counts(box.db, "d"), {"pending": 1, "deleted": 0, "failed": 0})


class LifetimeTest(unittest.TestCase):
    def test_lifetimes_in_minutes_hours_and_days(self):
        for text, seconds in (("1m", 60), ("90m", 5_400), ("12h", 43_200), ("7d", 604_800),
                              (" 2H ", 7_200), ("365d", 365 * 86_400)):
            with self.subTest(text):
                self.assertEqual(expiries.lifetime_s(text), seconds)

    def test_an_unreadable_lifetime_or_one_outside_its_bounds_is_refused(self):
        for text in ("", "soon", "30s", "0m", "366d", "-1h", "1.5h", "7 days", 7, None, "1e3m"):
            with self.subTest(text):
                with self.assertRaises(ValueError) as caught:
                    expiries.lifetime_s(text)
                self.assertIn("1m", str(caught.exception))
                self.assertIn("365d", str(caught.exception))


class RememberWithLifetimeTest(unittest.TestCase):
    def test_the_lifetime_is_kept_locally_and_the_answer_says_when_it_ends(self):
        b = ExpiryBench(self)
        result = run_action("remember", {"content": "The user is in Lisbon this week.",
                                         "expires_in": "7d"}, b.ctx)
        self.assertTrue(result.ok, result.text)
        cid = next(iter(b.fake.conclusions))
        self.assertTrue(result.text.startswith(f"Remembered as conclusion {cid}."), result.text)
        self.assertIn("expires in 7d", result.text)
        self.assertEqual(b.rows(), [(cid, "pending", NOW + 7 * 86_400, 0, None)])

    def test_without_a_lifetime_nothing_expires(self):
        b = ExpiryBench(self)
        b.remember("The user's name is Ana.")
        self.assertEqual(b.rows(), [])

    def test_an_unreadable_lifetime_sends_nothing(self):
        b = ExpiryBench(self)
        result = run_action("remember", {"content": "x", "expires_in": "30s"}, b.ctx)
        self.assertFalse(result.ok)
        self.assertTrue(result.text.startswith("honcho_memory: `expires_in`"), result.text)
        self.assertEqual(b.fake.conclusions, {})

    def test_a_lifetime_with_nowhere_to_keep_it_sends_nothing(self):
        b = ExpiryBench(self)
        b.ctx.record = None
        result = run_action("remember", {"content": "x", "expires_in": "1h"}, b.ctx)
        self.assertFalse(result.ok, result.text)
        self.assertEqual(b.fake.conclusions, {})


class SweepTest(unittest.TestCase):
    def test_nothing_is_deleted_before_its_time(self):
        b = ExpiryBench(self)
        cid = b.remember("short-lived", "1h")
        b.clock.advance(3_599)
        report = b.sweep()
        self.assertEqual(report.deleted, 0)
        self.assertIn(cid, b.fake.conclusions)
        self.assertEqual(b.deletes(), [])

    def test_an_expired_conclusion_is_deleted_from_honcho(self):
        b = ExpiryBench(self)
        cid = b.remember("short-lived", "1h")
        kept = b.remember("kept for good")
        b.clock.advance(3_600)
        report = b.sweep()
        self.assertEqual(report.deleted, 1)
        self.assertNotIn(cid, b.fake.conclusions)
        self.assertIn(kept, b.fake.conclusions)
        self.assertEqual([(r[0], r[1]) for r in b.rows()], [(cid, "deleted")])

    def test_a_conclusion_already_gone_counts_as_deleted(self):
        b = ExpiryBench(self)
        cid = b.remember("forgotten by hand first", "1h")
        run_action("forget", {"id": cid, "confirm": True}, b.ctx)
        b.clock.advance(3_600)
        report = b.sweep()
        self.assertEqual((report.deleted, report.failed, report.retried), (1, 0, 0))
        self.assertEqual([(r[0], r[1]) for r in b.rows()], [(cid, "deleted")])

    def test_a_sweep_deletes_at_most_its_limit_the_soonest_expired_first(self):
        b = ExpiryBench(self)
        ids = []
        for n in range(5):
            ids.append(b.remember(f"fact {n}", "1h"))
            b.clock.advance(1)
        b.clock.advance(3_600)
        self.assertEqual(b.sweep(limit=3).deleted, 3)
        self.assertEqual(sorted(set(b.fake.conclusions) & set(ids)), sorted(ids[3:]))
        self.assertEqual(b.sweep(limit=3).deleted, 2)
        self.assertEqual(set(b.fake.conclusions) & set(ids), set())

    def test_a_server_error_backs_the_row_off(self):
        b = ExpiryBench(self, expiry_sweep_s=60)
        cid = b.remember("short-lived", "1h")
        b.clock.advance(3_600)
        b.fake.fail(r"/conclusions/", status=500)
        report = b.sweep()
        self.assertEqual((report.deleted, report.retried), (0, 1))
        (_, state, _, attempts, code), = b.rows()
        self.assertEqual((state, attempts, code), ("pending", 1, "http_500"))
        b.sweep()  # at once: the row waits out its backoff
        self.assertEqual(len(b.deletes()), 1)
        b.clock.advance(3_600)
        self.assertEqual(b.sweep().deleted, 1)
        self.assertNotIn(cid, b.fake.conclusions)

    def test_a_refused_delete_fails_for_good_after_its_attempts(self):
        b = ExpiryBench(self)
        b.remember("short-lived", "1h")
        b.fake.fail(r"/conclusions/", status=422, times=expiry.MAX_ATTEMPTS)
        for _ in range(expiry.MAX_ATTEMPTS):
            b.clock.advance(86_400)
            b.sweep()
        (_, state, _, attempts, code), = b.rows()
        self.assertEqual((state, attempts, code), ("failed", expiry.MAX_ATTEMPTS, "http_422"))
        b.clock.advance(86_400)
        b.sweep()
        self.assertEqual(len(b.deletes()), expiry.MAX_ATTEMPTS, "a failed row is not tried again")

    def test_an_unreachable_server_ends_the_sweep_at_its_first_row(self):
        b = ExpiryBench(self)
        for n in range(3):
            b.remember(f"fact {n}", "1h")
        b.clock.advance(3_600)
        b.fake.fail(r"/conclusions/", kind="reset")
        report = b.sweep()
        self.assertEqual((report.deleted, report.retried), (0, 1))
        self.assertEqual(len(b.deletes()), 1, "no request after the server stopped answering")
        self.assertEqual(sorted(r[3] for r in b.rows()), [0, 0, 1], "the others are untouched")

    def test_a_row_another_process_claimed_is_not_deleted_twice(self):
        b = ExpiryBench(self)
        b.remember("short-lived", "1h")
        b.clock.advance(3_600)
        other = b.db()
        try:
            claimed = expiries.claim_due(other, b.settings.destination(), "process-b", 10, 60.0)
        finally:
            other.close()
        self.assertEqual(len(claimed), 1)
        self.assertEqual(b.sweep(owner="process-a").deleted, 0)
        self.assertEqual(b.deletes(), [])
        b.clock.advance(61)  # process b died with its claim: it lapses
        self.assertEqual(b.sweep(owner="process-a").deleted, 1)

    def test_only_the_destinations_own_rows_are_swept(self):
        b = ExpiryBench(self)
        b.remember("short-lived", "1h")
        b.clock.advance(3_600)
        elsewhere = build_settings({"api_url": "https://honcho.test", "workspace_id": "other",
                                    "outbox_path": b.settings.outbox_path},
                                   {"HONCHO_API_KEY": KEY}, {})
        db = b.db()
        try:
            report = expiry.sweep(db, b.gateway, elsewhere, "process-a", monotonic=b.mono)
        finally:
            db.close()
        self.assertEqual(report.deleted, 0)
        self.assertEqual(b.deletes(), [])


class PinTest(unittest.TestCase):
    def test_a_pinned_conclusion_outlives_its_lifetime(self):
        b = ExpiryBench(self)
        cid = b.remember("keep this after all", "1h")
        db = b.db()
        try:
            self.assertEqual(expiries.pin(db, b.settings.destination(), cid), "pinned")
        finally:
            db.close()
        b.clock.advance(7_200)
        b.sweep()
        self.assertIn(cid, b.fake.conclusions)
        self.assertEqual(b.rows(), [])

    def test_pinning_a_conclusion_without_a_lifetime_or_one_being_deleted_says_so(self):
        b = ExpiryBench(self)
        cid = b.remember("short-lived", "1h")
        db = b.db()
        try:
            self.assertEqual(expiries.pin(db, b.settings.destination(), "c-unknown"),
                             "not_expiring")
            b.clock.advance(3_600)
            expiries.claim_due(db, b.settings.destination(), "process-b", 10, 60.0)
            self.assertEqual(expiries.pin(db, b.settings.destination(), cid), "deleting")
        finally:
            db.close()


class WorkerSweepTest(unittest.TestCase):
    def test_the_worker_sweeps_every_expiry_sweep_s(self):
        bench = Bench(self, expiry_sweep_s=60)
        settings = bench.settings
        gateway = HonchoGateway.for_settings(
            settings, http_client_factory=lambda: httpx.Client(transport=bench.transport))
        self.addCleanup(gateway.close)
        made = run_action("remember", {"content": "short-lived", "expires_in": "1m"},
                          ActionContext(settings=settings, gateway=gateway,
                                        record=lambda w: self._keep(settings, bench.clock, w)))
        cid = made.text.split("conclusion ", 1)[1].split(".", 1)[0]
        bench.worker.step()  # the first step sweeps: nothing has expired yet
        bench.clock.advance(61)
        bench.mono.advance(30)
        bench.worker.step()  # expired, but the next sweep is not due yet
        self.assertIn(cid, bench.fake.conclusions)
        bench.mono.advance(30)
        bench.worker.step()
        self.assertNotIn(cid, bench.fake.conclusions)

    def test_a_drains_step_sweeps_only_within_the_drains_deadline(self):
        # A drain (pre_update's, the command line's) is bounded by its timeout; the sweep's own
        # budget (30 s) must not outlast it.
        bench = Bench(self, expiry_sweep_s=60)
        settings = bench.settings
        gateway = HonchoGateway.for_settings(
            settings, http_client_factory=lambda: httpx.Client(transport=bench.transport))
        self.addCleanup(gateway.close)
        run_action("remember", {"content": "short-lived", "expires_in": "1m"},
                   ActionContext(settings=settings, gateway=gateway,
                                 record=lambda w: self._keep(settings, bench.clock, w)))
        bench.clock.advance(61)
        bench.worker.step(deadline=bench.mono())  # a drain whose time is up
        self.assertEqual([m for m, _ in bench.fake.requests if m == "DELETE"], [])

    def _keep(self, settings, clock, write):
        db = Database.for_settings(settings, clock=clock)
        try:
            memory_log.record(db, write)
        finally:
            db.close()

    def test_expiry_sweep_s_is_bounded(self):
        for value, expected in ((60, 60.0), (3_600, 3_600.0), (59, 300.0), (3_601, 300.0)):
            with self.subTest(value):
                settings = build_settings({"expiry_sweep_s": value}, {}, {})
                self.assertEqual(settings.expiry_sweep_s, expected)


class StatusTest(unittest.TestCase):
    def test_status_counts_lifetimes_pending_deleted_and_failed_never_their_text(self):
        b = ExpiryBench(self)
        b.remember("refused", "1m")
        b.fake.fail(r"/conclusions/", status=422, times=expiry.MAX_ATTEMPTS)
        for _ in range(expiry.MAX_ATTEMPTS):
            b.clock.advance(86_400)
            b.sweep()
        b.remember("Password Hunter2-Very-Secret, in Lisbon", "1h")
        b.remember("goes away", "1h")
        b.remember("later", "7d")
        b.clock.advance(3_600)
        b.sweep()
        status = build_status(b.settings, hub.current().status_parts(b.settings), b.clock())
        self.assertEqual(status["memory_expiry"], {"pending": 1, "deleted": 2, "failed": 1})
        text = status_text(status)
        self.assertIn("Expiring memories: 1 pending, 2 expired and deleted, 1 failed", text)
        self.assertNotIn("Hunter2", text + repr(status))


class InspectorExpiryTest(unittest.TestCase):
    def bench(self):
        b = ExpiryBench(self)
        recaller = Recaller(lambda settings: b.gateway)
        self.addCleanup(recaller.close)
        return b, Inspector(b.ctx, recaller, TEMPLATE, clock=b.clock)

    def test_remember_with_a_lifetime_then_the_view_shows_the_time_left(self):
        b, ins = self.bench()
        made = inspector.remember(ins, "The user is travelling until Friday.", "2h")
        self.assertTrue(made["ok"], made)
        b.clock.advance(600)
        item, = inspector.view(ins)["conclusions"]["items"]
        self.assertEqual(item["expires_in_s"], 6_600)
        self.assertEqual(item["expires_at"], "2027-01-15T10:00:00+00:00")

    def test_a_conclusion_without_a_lifetime_shows_none(self):
        b, ins = self.bench()
        self.assertTrue(inspector.remember(ins, "The user's name is Ana.", "")["ok"])
        item, = inspector.view(ins)["conclusions"]["items"]
        self.assertEqual((item["expires_in_s"], item["expires_at"]), (None, None))

    def test_pin_removes_the_lifetime(self):
        b, ins = self.bench()
        inspector.remember(ins, "The user is travelling until Friday.", "2h")
        cid = next(iter(b.fake.conclusions))
        pinned = inspector.pin(ins, cid)
        self.assertTrue(pinned["ok"], pinned)
        item, = inspector.view(ins)["conclusions"]["items"]
        self.assertIsNone(item["expires_at"])
        again = inspector.pin(ins, cid)
        self.assertFalse(again["ok"])
        self.assertEqual(again["error"], "not_expiring")

    def test_a_bad_lifetime_or_id_is_refused_with_nothing_sent(self):
        b, ins = self.bench()
        self.assertFalse(inspector.remember(ins, "x", "forever")["ok"])
        self.assertFalse(inspector.pin(ins, "../etc")["ok"])
        self.assertEqual(b.fake.conclusions, {})


if __name__ == "__main__":
    unittest.main()
