"""The outbox on real SQLite files: schema, order, leases, retries, bounds, crashes, processes."""

import _sqlite3
import contextlib
import ctypes
import os
import stat
import unittest

from hub_testkit import ROOT
from outbox_helpers import (
    CHILD_ENQUEUE,
    DEST,
    ManualClock,
    OutboxTestCase,
    enqueue,
    event,
    hold_write_lock,
    lease,
    legacy_outbox,
    open_with_connection,
    put_row,
    read_outbox,
    release_lock,
    run_child,
    schema_version,
    settle,
    temp_outbox_path,
)

from honcho_hub.errors import OutboxBusy, OutboxUnavailable
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.db import SCHEMA_VERSION
from honcho_hub.storage.outbox import Outbox, Retry, Settlement


def sqlite_memory_used() -> int:
    """The bytes the SQLite library of the sqlite3 module holds now, all connections together
    (skips the test where a build does not export it)."""
    try:
        function = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError) as exc:
        raise unittest.SkipTest(f"sqlite3_memory_used is not reachable: {exc}") from exc
    function.restype = ctypes.c_int64
    return int(function())


class FileTest(OutboxTestCase):
    def test_created_owner_only_in_wal_with_the_chosen_durability(self):
        for sync, level in (("FULL", 2), ("NORMAL", 1)):
            with self.subTest(sync=sync):
                path = temp_outbox_path(self)
                _, conn = open_with_connection(
                    path, lambda path=path, sync=sync: self.open(path, synchronous=sync))
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
                self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode), 0o700)
                self.assertEqual(read_outbox(path, "PRAGMA journal_mode"), [("wal",)])
                self.assertEqual(conn.execute("PRAGMA synchronous").fetchone()[0], level)
                self.assertEqual(schema_version(path), SCHEMA_VERSION)

    def test_opened_from_settings_with_their_durability_wait_row_bound_and_dead_retention(self):
        settings = build_settings({"outbox_path": self.path, "outbox_synchronous": "NORMAL",
                                   "capture_wait_ms": 400, "max_queued_rows": 100,
                                   "dead_retention_days": 2}, {}, {})
        self.clock = ManualClock()
        for overrides, sync_level, wait_ms in (({}, 1, 400),
                                               ({"synchronous": "FULL", "busy_timeout_s": 3.0},
                                                2, 3000)):
            with self.subTest(overrides=overrides):
                box, conn = open_with_connection(
                    self.path,
                    lambda overrides=overrides: Outbox.for_settings(settings, clock=self.clock,
                                                                    **overrides))
                self.addCleanup(box.close)
                self.assertEqual(conn.execute("PRAGMA synchronous").fetchone()[0], sync_level)
                self.assertEqual(conn.execute("PRAGMA busy_timeout").fetchone()[0], wait_ms)
        box = Outbox.for_settings(settings, clock=self.clock)
        self.addCleanup(box.close)
        # the settings' row bound
        self.assertEqual(enqueue(box, [event(n) for n in range(101)]).refused, 101)
        enqueue(box, [event(1)])
        settle(box, "w", Settlement(dead=[(e.id, "http_422") for e in lease(box, "w", 1)]))
        self.clock.advance(2 * 86_400 - 1)
        self.assertEqual(box.prune(delivered_retention_s=0), 0)  # dead letters are kept two days
        self.clock.advance(1)
        self.assertEqual(box.prune(delivered_retention_s=0), 1)

    def test_reopening_keeps_rows_and_does_not_migrate_twice(self):
        enqueue(self.open(), [event(1)])
        again = self.open()
        self.assertEqual(again.stats()["counts"]["pending"], 1)

    def test_rows_of_the_first_schema_honcho_may_hold_are_marked_ambiguous_by_the_migration(self):
        legacy_outbox(self.path, 1, {"leased-by-old-worker": ("leased", None),
                                     "after-timeout": ("pending", "timeout"),
                                     "after-503": ("pending", "http_503"),
                                     "after-429": ("pending", "http_429"),
                                     "never-tried": ("pending", None),
                                     "refused": ("dead", "http_422")})
        self.open()
        marked = dict(read_outbox(self.path, "SELECT id, ambiguous FROM events"))
        self.assertEqual(marked, {"leased-by-old-worker": 1, "after-timeout": 1, "after-503": 1,
                                  "after-429": 0, "never-tried": 0, "refused": 0})
        self.assertEqual(schema_version(self.path), SCHEMA_VERSION)

    def test_an_unusable_folder_or_a_relative_path_is_a_clear_error(self):
        # A regular file where the folder should be fails for every user, root included (root
        # ignores modes).
        blocker = os.path.join(os.path.dirname(os.path.dirname(self.path)), "blocker")
        open(blocker, "w").close()
        target = os.path.join(blocker, "outbox.sqlite3")
        with self.assertRaises(OutboxUnavailable) as caught:
            self.open(target)
        self.assertNotIn(target, str(caught.exception))
        # were it accepted, it would land in a temp folder
        with contextlib.chdir(os.path.dirname(blocker)):
            with self.assertRaises(OutboxUnavailable):
                self.open("relative/outbox.sqlite3")
            self.assertFalse(os.path.exists("relative"))


class OrderAndLeaseTest(OutboxTestCase):
    def test_enqueue_is_idempotent_on_the_id(self):
        box = self.open()
        self.assertEqual(enqueue(box, [event(1), event(2)]).inserted, 2)
        result = enqueue(box, [event(2), event(3)])
        self.assertEqual((result.inserted, result.duplicates), (1, 1))

    def test_lease_takes_the_oldest_session_in_order_up_to_the_batch_size(self):
        box = self.open()
        enqueue(box, [event(i, "chat-a") if i % 2 else event(i, "chat-b") for i in range(10)])
        first = lease(box, "w1", 3, 60)
        self.assertEqual([e.id for e in first], ["ev_chat-b_0", "ev_chat-b_2", "ev_chat-b_4"])
        second = lease(box, "w1", 10, 60)
        self.assertEqual([e.id for e in second], [f"ev_chat-a_{i}" for i in (1, 3, 5, 7, 9)])
        self.assertEqual(lease(box, "w2", 10, 60), [])  # chat-b's head is leased: its tail waits

    def test_sessions_blocked_behind_a_long_backlog_do_not_hide_the_oldest_ready_head(self):
        # Backlogs longer than the lease looks at near the front, behind heads that are blocked.
        box = self.open()
        box.enqueue_batches([[event(i, "chat-backing-off")] for i in range(50)]
                            + [[event(i, "chat-in-flight")] for i in range(50)]
                            + [[event(i, "chat-other-place", dest="https://elsewhere#agent-zero")]
                               for i in range(3)]
                            + [[event(i, "chat-ready-1")] for i in range(3)]
                            + [[event(i, "chat-ready-2")] for i in range(3)])
        backing_off = lease(box, "w", 20, 60, DEST)
        settle(box, "w", Settlement(retries=[Retry([e.id for e in backing_off],
                                                   self.clock.now + 600, "http_503",
                                                   burn_attempt=True)]))
        self.assertEqual(lease(box, "w", 20, 60, DEST)[0].session_id, "chat-in-flight")
        self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)],
                         [f"ev_chat-ready-1_{i}" for i in range(3)])
        self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)],
                         [f"ev_chat-ready-2_{i}" for i in range(3)])
        self.assertEqual(lease(box, "w", 20, 60, DEST), [])
        # any destination
        self.assertEqual(lease(box, "w", 20, 60)[0].session_id, "chat-other-place")

    def test_the_lease_does_not_visit_every_session_whose_head_is_backing_off(self):
        # An outage across many chats: each session's head backs off, a ready message waits behind
        # them in the chat after. The lease's work (SQLite VM steps, deterministic) at 1,000 such
        # sessions must stay that at 100, not grow tenfold with them.
        steps = {}
        for blocked in (100, 1_000):
            path = temp_outbox_path(self)
            box, conn = open_with_connection(path, lambda path=path: self.open(path))
            box.enqueue_batches([[event(2 * i, f"chat-{i}")] for i in range(blocked)]
                                + [[event(2 * i + 1, f"chat-{i}")] for i in range(blocked)])
            heads = box.settle_and_lease(Settlement(), "w", blocked, 1, 60, DEST)
            settle(box, "w", Settlement(retries=[Retry([b[0].id for b in heads],
                                                       self.clock.now + 600, "http_503",
                                                       burn_attempt=True)]))
            enqueue(box, [event(0, "chat-ready")])
            steps[blocked] = 0

            def step(blocked=blocked) -> int:
                steps[blocked] += 1
                return 0

            conn.set_progress_handler(step, 1)
            self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)], ["ev_chat-ready_0"])
            conn.set_progress_handler(None, 1)
        self.assertLess(steps[1_000], 1.5 * steps[100], steps)

    def test_behind_more_backing_off_heads_than_the_front_holds_the_oldest_ready_head_goes_first(
            self):
        box = self.open()
        box.enqueue_batches([[event(i, f"chat-{i}")] for i in range(40)]
                            + [[event(40, "chat-ready-2")], [event(41, "chat-ready-1")],
                               [event(42, "chat-ready-2")]])
        heads = box.settle_and_lease(Settlement(), "w", 40, 1, 60, DEST)
        settle(box, "w", Settlement(retries=[Retry([b[0].id for b in heads], self.clock.now + 600,
                                                   "http_503", burn_attempt=True)]))
        self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)],
                         ["ev_chat-ready-2_40", "ev_chat-ready-2_42"])
        self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)], ["ev_chat-ready-1_41"])
        self.assertEqual(lease(box, "w", 20, 60, DEST), [])
        self.clock.advance(600)
        self.assertEqual([e.id for e in lease(box, "w", 20, 60, DEST)], ["ev_chat-0_0"])

    def test_a_failed_head_blocks_only_its_own_session(self):
        box = self.open()
        enqueue(box, [event(1, "chat-a"), event(2, "chat-a"), event(3, "chat-b")])
        batch = lease(box, "w", 1, 60)
        settle(box, "w", Settlement(retries=[Retry([batch[0].id], self.clock.now + 30, "http_503",
                                                   burn_attempt=True)]))
        self.assertEqual([e.id for e in lease(box, "w", 5, 60)], ["ev_chat-b_3"])
        self.assertEqual(lease(box, "w", 5, 60), [])
        self.clock.advance(30)
        retried = lease(box, "w", 5, 60)
        self.assertEqual([(e.id, e.attempts) for e in retried],
                         [("ev_chat-a_1", 1), ("ev_chat-a_2", 0)])

    def test_ack_retry_without_burn_and_dead_letter(self):
        box = self.open()
        enqueue(box, [event(i) for i in range(4)])
        batch = lease(box, "w", 4, 60)
        settle(box, "w", Settlement(delivered=[batch[0].id], dead=[(batch[1].id, "http_422")],
                                    retries=[Retry([batch[2].id, batch[3].id], self.clock.now,
                                                   "unreachable", burn_attempt=False)]))
        self.assertEqual(box.stats()["dead_by_code"], {"http_422": 1})
        again = lease(box, "w", 4, 60)
        self.assertEqual([(e.id, e.attempts) for e in again],
                         [(batch[2].id, 0), (batch[3].id, 0)])
        self.assertEqual(box.stats()["counts"],
                         {"pending": 0, "leased": 2, "delivered": 1, "dead": 1})

    def test_destination_filter(self):
        box = self.open()
        enqueue(box, [event(1, dest="https://old#ws"), event(2, session="chat-z")])
        self.assertEqual([e.id for e in lease(box, "w", 5, 60, destination=DEST)], ["ev_chat-z_2"])

    def test_requeue_dead_is_bounded_and_oldest_first(self):
        box = self.open()
        enqueue(box, [event(i, f"chat-{i}") for i in range(5)])
        for _ in range(5):
            settle(box, "w", Settlement(dead=[(e.id, "http_400") for e in lease(box, "w", 1, 60)]))
        self.assertEqual(box.requeue_dead(3), 3)
        self.assertEqual(box.stats()["counts"]["dead"], 2)
        self.assertEqual([e.id for e in lease(box, "w", 1, 60)], ["ev_chat-0_0"])

    def test_stats_report_ages_without_content(self):
        box = self.open()
        enqueue(box, [event(1, content="SECRET-CONTENT")])
        stats = box.stats()
        self.assertEqual(stats["oldest_pending_captured_at"], 1_700_000_001.0)
        self.assertNotIn("SECRET-CONTENT", repr(stats))
        self.assertNotIn(self.path, repr(stats))


class CrashRecoveryTest(OutboxTestCase):
    def test_a_lease_of_a_dead_process_is_recovered_after_expiry_by_reopening_the_file(self):
        crashed = self.open()
        enqueue(crashed, [event(1), event(2)])
        self.assertEqual(len(lease(crashed, "dead-process", 10, 60)), 2)
        crashed.close()  # the process dies: closing releases nothing, the leases stay in the file
        survivor = self.open()
        self.assertEqual(lease(survivor, "next", 10, 60), [])
        self.clock.advance(61)
        self.assertEqual([e.id for e in lease(survivor, "next", 10, 60)],
                         ["ev_chat-a_1", "ev_chat-a_2"])

    def test_a_settlement_returns_an_expired_lease_to_pending_marked_possibly_held_by_honcho(self):
        box = self.open()
        enqueue(box, [event(1)])
        lease(box, "w", 1, 10)
        self.clock.advance(10)
        settle(box, "another-worker", Settlement())
        self.assertEqual({k: v for k, v in box.stats()["counts"].items() if v}, {"pending": 1})
        self.assertEqual([(e.id, e.ambiguous) for e in lease(box, "another-worker", 1)],
                         [(event(1).id, True)])


HEADS = "SELECT destination, session_id, seq, state, next_attempt_at FROM session_heads"
HEADS_FROM_ROWS = """SELECT destination, session_id, seq, state, next_attempt_at FROM events e
    WHERE state IN ('pending', 'leased') AND NOT EXISTS (SELECT 1 FROM events p
        WHERE p.destination = e.destination AND p.session_id = e.session_id
        AND p.state IN ('pending', 'leased') AND p.seq < e.seq)"""


class SessionHeadsTest(OutboxTestCase):
    """`session_heads`, through which the lease finds ready heads, always says what the rows say."""

    def assert_heads_agree(self, step: str) -> None:
        self.assertEqual(sorted(read_outbox(self.path, HEADS)),
                         sorted(read_outbox(self.path, HEADS_FROM_ROWS)), step)

    def test_every_operation_keeps_the_heads_those_of_the_rows(self):
        box = self.open()
        steps = {
            "enqueue": lambda: box.enqueue_batches(
                [[event(i, f"chat-{i % 3}")] for i in range(9)]
                + [[event(9, "chat-old", dest="https://old#ws")]]),
            "lease": lambda: box.settle_and_lease(Settlement(), "w", 3, 2, 60, DEST),
            "retry, delivered, dead": lambda: settle(box, "w", Settlement(
                retries=[Retry(["ev_chat-0_0"], self.clock.now + 600, "http_503",
                               burn_attempt=True)],
                delivered=["ev_chat-1_1", "ev_chat-1_4"], dead=[("ev_chat-2_2", "http_422")])),
            "release": lambda: box.release("w", ["ev_chat-0_3", "ev_chat-2_5"]),
            "requeue dead": lambda: box.requeue_dead(10),
            "lease again, expire, recover": lambda: (lease(box, "w2", 5, 10, DEST),
                                                     self.clock.advance(10),
                                                     settle(box, "w3", Settlement())),
            "adopt unsent": lambda: box.adopt_unsent("https://old#ws", DEST),
            "forget": lambda: box.begin_forget(DEST, "chat-1"),
            "drop rows": lambda: box.drop_forgotten_rows(DEST, ["chat-2"]),
            "prune": lambda: box.prune(delivered_retention_s=0),
        }
        for step, run in steps.items():
            run()
            self.assert_heads_agree(step)
        self.assertTrue(read_outbox(self.path, HEADS))

    def test_an_outbox_of_every_older_schema_gets_its_heads_and_leases_them_in_order(self):
        for version in range(1, SCHEMA_VERSION):
            with self.subTest(version=version):
                self.path = temp_outbox_path(self)
                legacy_outbox(self.path, version, {})
                self.clock = ManualClock()
                later = self.clock.now + 600
                for n, (session, state, next_at) in enumerate(
                        [("a", "pending", later), ("a", "pending", 0.0),  # backing off
                         ("b", "leased", 0.0), ("b", "pending", 0.0),  # in flight
                         ("c", "dead", 0.0), ("c", "pending", 0.0), ("c", "pending", 0.0),
                         ("d", "delivered", 0.0)]):
                    put_row(self.path, "events", {
                        "id": f"{session}{n}", "destination": DEST, "workspace_id": "w",
                        "session_id": session, "peer_id": "user", "role": "user",
                        "content": "c", "captured_at": n, "next_attempt_at": next_at,
                        "updated_at": 0.0, "state": state,
                        "lease_expires_at": later if state == "leased" else None})
                box = self.open()
                self.assertEqual(schema_version(self.path), SCHEMA_VERSION)
                self.assertEqual(sorted((h[1], h[2]) for h in read_outbox(self.path, HEADS)),
                                 [("a", 1), ("b", 3), ("c", 6)])
                self.assertEqual([e.id for e in lease(box, "w", 20, 60)], ["c5", "c6"])
                self.assertEqual(lease(box, "w", 20, 60), [])
                self.clock.advance(600)
                self.assertEqual([e.id for e in lease(box, "w", 20, 60)], ["a0", "a1"])
                box.close()


class BoundTest(OutboxTestCase):
    def test_terminal_rows_make_room_delivered_first_then_old_dead(self):
        box = self.open(max_rows=100, dead_retention_s=3600)
        enqueue(box, [event(i, f"chat-{i}") for i in range(100)])
        for _ in range(10):
            settle(box, "w", Settlement(delivered=[e.id for e in lease(box, "w", 1, 60)]))
        for _ in range(10):
            settle(box, "w", Settlement(dead=[(e.id, "http_422") for e in lease(box, "w", 1, 60)]))
        self.assertEqual(enqueue(box, [event(1000 + i, "chat-new") for i in range(10)]).inserted,
                         10)
        self.assertEqual(box.stats()["counts"]["delivered"], 0)
        # dead rows are still young
        self.assertEqual(enqueue(box, [event(2000, "chat-new")]).refused, 1)
        self.clock.advance(3601)
        self.assertEqual(enqueue(box, [event(2001, "chat-new")]).inserted, 1)
        self.assertEqual(box.stats()["counts"]["dead"], 9)

    def test_a_full_queue_of_live_rows_refuses_and_drops_nothing(self):
        box = self.open(max_rows=100)
        enqueue(box, [event(i) for i in range(100)])
        result = enqueue(box, [event(500), event(501)])
        self.assertEqual((result.inserted, result.refused), (0, 2))
        self.assertEqual(box.stats()["counts"]["pending"], 100)

    def test_prune_by_retention(self):
        box = self.open(dead_retention_s=100)
        enqueue(box, [event(1, "a"), event(2, "b")])
        settle(box, "w", Settlement(delivered=[e.id for e in lease(box, "w", 1, 60)]))
        settle(box, "w", Settlement(dead=[(e.id, "http_400") for e in lease(box, "w", 1, 60)]))
        self.assertEqual(box.prune(delivered_retention_s=50), 0)
        self.clock.advance(60)
        self.assertEqual(box.prune(delivered_retention_s=50), 1)
        self.clock.advance(60)
        self.assertEqual(box.prune(delivered_retention_s=50), 1)

    def test_a_prune_leaves_no_page_of_its_scan_in_memory(self):
        # The prune scans the whole table every ten minutes (no index for it), and the pages it
        # read stayed in the worker connection's cache (up to 16 MB) though nothing reads them
        # until the next prune: an hour of soak grew by them at each prune.
        writer = self.open(max_rows=10_000)
        for start in range(0, 3_000, 100):
            enqueue(writer, [event(n, content="x" * 1_000) for n in range(start, start + 100)])
        writer.close()
        box = self.open(max_rows=10_000)  # its cache is empty, as the worker's is before a prune
        before = sqlite_memory_used()
        self.assertEqual(box.prune(delivered_retention_s=3_600), 0)
        grown = sqlite_memory_used() - before
        self.assertLess(grown, 500_000, f"SQLite holds {grown} more bytes after the prune")


class ProcessesTest(OutboxTestCase):
    def test_two_real_processes_enqueue_into_one_file(self):
        enqueue(self.open(), [event(0)])  # create and migrate first
        children = [run_child(CHILD_ENQUEUE, ROOT, self.path, tag, "300")
                    for tag in ("p1", "p2")]
        for child in children:
            out, err = child.communicate(timeout=120)
            self.assertEqual(out.strip(), "done", err)
        box = self.open()
        self.assertEqual(box.stats()["counts"]["pending"], 601)
        sessions = set()
        for _ in ("p1", "p2"):
            batch = lease(box, "w", 300, 60, destination="d")
            tag = batch[0].session_id[len("chat-"):]
            sessions.add(tag)
            self.assertEqual([e.content for e in batch], [f"{tag} {i}" for i in range(300)])
        self.assertEqual(sessions, {"p1", "p2"})

    def test_a_lock_held_by_another_process_is_a_bounded_busy_error(self):
        box = self.open(busy_timeout_s=0.25)
        child = hold_write_lock(self.path)
        try:
            with self.assertRaises(OutboxBusy):
                enqueue(box, [event(1)])
        finally:
            release_lock(child)
        self.assertEqual(enqueue(box, [event(1)]).inserted, 1)


if __name__ == "__main__":
    unittest.main()
