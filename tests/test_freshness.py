"""Derivation-aware freshness: after a delivery, recall follows Honcho's queue status for that
session (bounded polling) and refreshes the base pack when derivation is done, instead of waiting
for the cache TTL."""

from __future__ import annotations

import unittest

import httpx
import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)
from fake_honcho import FakeHoncho
from idle import wait_idle
from loopback import serve
from outbox_helpers import ManualClock, temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.delivery import lifecycle
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.hub import Hub
from honcho_hub.ops.status import build_status, gather_parts, status_text
from honcho_hub.recall.freshness import (
    FRESH_MIN_AGE_S,
    FRESHNESS_MAX_S,
    FRESHNESS_POLL_MAX_S,
    FRESHNESS_POLL_S,
    Freshness,
    poll_interval_s,
)
from honcho_hub.recall.recaller import Recaller
from honcho_hub.runtime import process_state
from honcho_hub.settings.config import build_settings

TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"
SESSION = "chat-fresh"


class FreshnessTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho()
        for peer in ("agent-zero", "user"):
            self.fake.ensure_peer("agent-zero", peer)
        self.fake.representations[("agent-zero", "user")] = "The user drinks green tea."
        self.clock = ManualClock(1000.0)
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(self),
                                        "cache_ttl_s": 3600, "recall_wait_ms": 0}, {}, {})
        self.recaller = Recaller(lambda s: HonchoGateway.for_settings(
            s, http_client_factory=lambda: httpx.Client(transport=self.fake.transport())),
            monotonic=self.clock, threads=1)
        self.addCleanup(self.recaller.close)
        # Every query-aware load fails: each turn shows the base pack, the one freshness refreshes.
        self.fake.fail(r"/sessions/chat-other/context$", kind="status", status=500, times=10_000)

    def turn(self, advance_s: float = 0.0) -> str:
        """A recall of another chat of the same destination (the base pack is every chat's), then
        idle."""
        self.clock.advance(advance_s)
        result = self.recaller.recall(self.settings, "chat-other", "", TEMPLATE)
        self.assertTrue(wait_idle(30, self.recaller))
        return result.block

    def base_loads(self) -> int:
        return self.fake.count("/peers/agent-zero/context")

    def test_nothing_delivered_nothing_polled(self):
        for _ in range(5):
            self.turn(FRESHNESS_POLL_S)
        self.assertEqual(self.fake.queue_reads, [])
        self.assertEqual(self.recaller.freshness(self.settings, SESSION),
                         {"state": "fresh", "pending": 0, "checked_age_s": None})

    def test_work_seen_pending_then_drained_refreshes_the_base_pack_before_the_ttl(self):
        self.turn()
        self.assertIn("green tea", self.turn())
        self.fake.representations[("agent-zero", "user")] = "The user now drinks oolong."
        self.fake.queue_script[SESSION] = [2, 1, 0]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.turn()  # polls: 2 pending
        self.assertEqual(self.recaller.freshness(self.settings, SESSION),
                         {"state": "deriving", "pending": 2, "checked_age_s": 0})
        self.turn(1.0)  # within the interval: no second request
        self.assertEqual(self.fake.queue_reads, [SESSION])
        self.turn(FRESHNESS_POLL_S)  # 1 pending
        loads = self.base_loads()
        self.turn(FRESHNESS_POLL_S)  # drained: the base pack is reloaded at once
        self.assertEqual(self.fake.queue_reads, [SESSION] * 3)
        self.assertEqual(self.base_loads(), loads + 1)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION),
                         {"state": "fresh", "pending": 0, "checked_age_s": None})
        self.assertIn("oolong", self.turn())  # an hour of TTL left, yet the new memory
        self.assertEqual(self.fake.queue_reads, [SESSION] * 3)  # fresh: no more polling

    def test_status_says_fresh_or_deriving_with_the_pending_work(self):
        def memory_line():
            parts = gather_parts(self.settings, process_state(), session_id=SESSION,
                                 recaller=self.recaller)
            status = build_status(self.settings, parts, 1_900_000_000.0)
            return status["recall"]["memory"], [line for line in status_text(status).splitlines()
                                                if line.startswith("Memory is ")]
        self.assertEqual(memory_line(), ({"state": "fresh", "pending": 0, "checked_age_s": None},
                                         ["Memory is fresh"]))
        self.fake.queue_script[SESSION] = [4, 0]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.assertEqual(memory_line()[1], ["Memory is deriving (not checked yet)"])
        self.turn()
        self.clock.advance(3)
        self.assertEqual(memory_line(), ({"state": "deriving", "pending": 4, "checked_age_s": 3},
                                         ["Memory is deriving (4 pending, last checked 3 s ago)"]))
        self.turn(FRESHNESS_POLL_S - 3)
        self.assertEqual(memory_line()[1], ["Memory is fresh"])

    def test_no_work_seen_counts_as_done_only_after_the_minimum_age(self):
        self.turn()
        # the deriver has not queued it yet
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        loads = self.base_loads()
        self.turn()
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "deriving")
        self.assertEqual(self.base_loads(), loads)
        self.turn(FRESH_MIN_AGE_S)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "fresh")
        self.assertEqual(self.base_loads(), loads + 1)

    def test_a_derivation_that_never_ends_is_left_to_the_ttl(self):
        self.turn()
        self.fake.queue_script[SESSION] = [3]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.turn()
        reads = len(self.fake.queue_reads)
        self.turn(FRESHNESS_MAX_S + 1)
        self.assertEqual(len(self.fake.queue_reads), reads)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "fresh")

    def test_a_failed_poll_is_asked_again_at_the_next_interval(self):
        self.turn()
        self.fake.queue_script[SESSION] = [0]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.fake.fail(r"/queue/status$", kind="status", status=503)
        self.turn(FRESH_MIN_AGE_S)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "deriving")
        self.turn(FRESHNESS_POLL_S)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "fresh")

    def follow_without_a_turn(self, advance_s: float = 0.0) -> None:
        """What the delivery worker's thread does after a step: no recall, no turn."""
        self.clock.advance(advance_s)
        self.recaller.follow_derivation(self.settings)
        self.assertTrue(wait_idle(30, self.recaller))

    def test_with_no_turn_the_background_follow_polls_until_fresh_and_reloads_the_base(self):
        self.turn()
        self.fake.representations[("agent-zero", "user")] = "The user now drinks oolong."
        self.fake.queue_script[SESSION] = [1, 0]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.follow_without_a_turn()
        self.assertEqual(self.fake.queue_reads, [SESSION])
        self.follow_without_a_turn(2.0)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION),
                         {"state": "deriving", "pending": 1, "checked_age_s": 2})
        self.assertEqual(self.fake.queue_reads, [SESSION])  # within the interval
        loads = self.base_loads()
        self.follow_without_a_turn(FRESHNESS_POLL_S)
        self.assertEqual(self.fake.queue_reads, [SESSION] * 2)
        self.assertEqual(self.recaller.freshness(self.settings, SESSION)["state"], "fresh")
        self.assertEqual(self.base_loads(), loads + 1)
        self.follow_without_a_turn(FRESHNESS_POLL_S)
        self.assertEqual(self.fake.queue_reads, [SESSION] * 2)  # fresh: no more polling

    def test_with_nothing_delivered_the_background_follow_asks_nothing(self):
        for _ in range(3):
            self.follow_without_a_turn(FRESHNESS_POLL_S)
        self.assertEqual(self.fake.queue_reads, [])

    def test_an_older_derivation_is_polled_less_often(self):
        self.fake.queue_script[SESSION] = [3]
        self.recaller.note_delivered(self.settings.destination(), SESSION)
        self.follow_without_a_turn()  # age 0
        self.follow_without_a_turn(100.0)  # age 100: due
        # Now a tenth of its age apart: at age 105 not yet, at age 112 (12 s after) due.
        self.follow_without_a_turn(FRESHNESS_POLL_S)
        self.assertEqual(len(self.fake.queue_reads), 2)
        self.follow_without_a_turn(7.0)
        self.assertEqual(len(self.fake.queue_reads), 3)

    def test_the_interval_grows_with_the_age_of_the_derivation_within_its_bounds(self):
        for age_s, interval_s in ((0.0, FRESHNESS_POLL_S), (50.0, FRESHNESS_POLL_S),
                                  (100.0, 10.0), (300.0, 30.0), (600.0, FRESHNESS_POLL_MAX_S),
                                  (5_000.0, FRESHNESS_POLL_MAX_S)):
            with self.subTest(age_s=age_s):
                self.assertEqual(poll_interval_s(age_s), interval_s)

    def test_another_destinations_delivery_is_not_polled_here(self):
        self.turn()
        self.recaller.note_delivered("https://elsewhere.test#ws", SESSION)
        self.turn(FRESHNESS_POLL_S)
        self.assertEqual(self.fake.queue_reads, [])


class UnpromptedFollowTest(unittest.TestCase):
    def test_a_derivation_done_with_no_turn_reloads_for_the_scope_of_the_latest_turn(self):
        fake, clock = FakeHoncho(), ManualClock(1000.0)
        settings = build_settings({"api_url": "https://honcho.test",
                                   "outbox_path": temp_outbox_path(self)}, {}, {})
        gateway = HonchoGateway.for_settings(
            settings, http_client_factory=lambda: httpx.Client(transport=fake.transport()))
        self.addCleanup(gateway.close)
        fresh: list[tuple[str, str | None]] = []

        def run_now(work, *args) -> bool:
            work(*args)
            return True
        freshness = Freshness(lambda s: gateway, run_now,
                              lambda s, scope_id: fresh.append((s.destination(), scope_id)), clock)
        freshness.follow(settings, "project-a")  # a turn recalled in this scope
        freshness.note_delivered(settings.destination(), SESSION)
        clock.advance(FRESH_MIN_AGE_S)
        freshness.follow_unprompted(settings)
        self.assertEqual(fake.queue_reads, [SESSION])
        self.assertEqual(fresh, [(settings.destination(), "project-a")])


class DeliveryTellsRecallTest(unittest.TestCase):
    def test_the_hubs_worker_tells_its_recaller_which_session_it_delivered(self):
        server = serve(FakeHoncho())
        self.addCleanup(server.close)
        settings = build_settings({"api_url": server.url, "outbox_path": temp_outbox_path(self)},
                                  {}, {})
        the_hub = Hub(settings=lambda: settings)
        self.addCleanup(the_hub.stop)
        recaller = the_hub.recaller()
        the_hub.capture(settings).capture(CaptureRequest("told", Role.USER, "u1", "I keep bees"),
                                          settings)
        the_hub.flush_capture()
        self.assertTrue(the_hub.load_delivery())
        worker = the_hub.ensure_worker()
        self.addCleanup(lifecycle.stop_workers)
        self.assertEqual(server.fake.await_request(r"/sessions/chat-told/messages$", 1, 30), 1)
        self.assertTrue(worker.stop(30))  # its callbacks have run
        self.assertEqual(recaller.freshness(settings, "chat-told")["state"], "deriving")
        self.assertEqual(recaller.freshness(settings, "chat-other")["state"], "fresh")

    def test_after_the_delivering_step_recall_polls_the_queue_with_no_turn(self):
        server = serve(FakeHoncho())
        self.addCleanup(server.close)
        settings = build_settings({"api_url": server.url, "outbox_path": temp_outbox_path(self)},
                                  {}, {})
        the_hub = Hub(settings=lambda: settings)
        self.addCleanup(the_hub.stop)
        the_hub.recaller()
        the_hub.capture(settings).capture(CaptureRequest("told", Role.USER, "u1", "I keep bees"),
                                          settings)
        the_hub.flush_capture()
        self.assertTrue(the_hub.load_delivery())
        the_hub.ensure_worker()
        self.addCleanup(lifecycle.stop_workers)
        self.assertEqual(server.fake.await_request(r"/queue/status$", 1, 30), 1)
        self.assertEqual(server.fake.queue_reads[:1], ["chat-told"])


if __name__ == "__main__":
    unittest.main()
