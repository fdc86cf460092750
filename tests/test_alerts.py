"""Silent degradation ends: when memory stops working, one notice saying what and what to do, and
one when it works again. The watch is a state machine over an injected monotonic clock: a condition
is raised once it has held RAISE_AFTER_S (a single failed turn says nothing), recovered once it has
not held for CLEAR_AFTER_S, and each condition has one notice id per phase, sent once."""

import html
import unittest
import uuid

import hub_testkit  # noqa: F401 - puts the checkout on sys.path
from outbox_helpers import event, lease, settle, temp_outbox_path

from honcho_hub.hub import Hub
from honcho_hub.ops import alerts
from honcho_hub.ops.alerts import Condition
from honcho_hub.ops.status import StatusParts, build_status
from honcho_hub.recall.cache import RECENT_LOADS, RecallCache
from honcho_hub.recall.pack import ContextData
from honcho_hub.runtime import process_state
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import Outbox, Settlement

NOW = 1_900_000_000.0
URL = "http://honcho.test"
UNREACHABLE = {Condition.UNREACHABLE: {"code": "unreachable", "api_url": URL}}


def settings(**env):
    return build_settings({}, {}, {"HONCHO_API_URL": URL, "HONCHO_WORKSPACE_ID": "ws-alerts",
                                   **env})


class WatchTest(unittest.TestCase):
    """The state machine alone: findings in, notices out, on a clock the test moves."""

    def setUp(self):
        self.watch = alerts.Watch()

    def observe(self, found, at):
        return alerts.observe(self.watch, found, at)

    def test_a_failure_shorter_than_the_raise_delay_notifies_nothing(self):
        self.assertEqual(self.observe(UNREACHABLE, 0.0), [])
        self.assertEqual(self.observe(UNREACHABLE, alerts.RAISE_AFTER_S[Condition.UNREACHABLE]
                                      - 1), [])
        self.assertEqual(self.observe({}, 40.0), [])
        self.assertEqual(self.observe({}, 40.0 + alerts.CLEAR_AFTER_S + 1), [],
                         "nothing was raised, so nothing recovers")

    def test_a_gap_starts_the_raise_delay_again(self):
        raise_after = alerts.RAISE_AFTER_S[Condition.UNREACHABLE]
        self.observe(UNREACHABLE, 0.0)
        self.observe({}, raise_after / 2)
        self.assertEqual(self.observe(UNREACHABLE, raise_after), [])
        self.assertEqual(self.observe(UNREACHABLE, raise_after * 2)[0].id,
                         "honcho-memory-unreachable")

    def test_a_lasting_outage_gives_one_notice_however_many_failures_follow(self):
        notices = [n for step in range(100) for n in self.observe(UNREACHABLE, step * 5.0)]
        self.assertEqual([(n.id, n.condition, n.recovered) for n in notices],
                         [("honcho-memory-unreachable", Condition.UNREACHABLE, False)])

    def test_recovery_gives_one_notice_once_the_condition_stayed_away(self):
        self.observe(UNREACHABLE, 0.0)
        self.observe(UNREACHABLE, 100.0)
        self.assertEqual(self.observe({}, 110.0), [])
        self.assertEqual(self.observe({}, 110.0 + alerts.CLEAR_AFTER_S - 1), [])
        recovered = self.observe({}, 110.0 + alerts.CLEAR_AFTER_S)
        self.assertEqual([(n.id, n.recovered) for n in recovered],
                         [("honcho-memory-unreachable-recovered", True)])
        self.assertEqual(self.observe({}, 500.0), [])

    def test_a_brief_return_of_the_condition_delays_recovery_and_notifies_nothing(self):
        self.observe(UNREACHABLE, 0.0)
        self.observe(UNREACHABLE, 100.0)
        self.observe({}, 110.0)
        self.assertEqual(self.observe(UNREACHABLE, 120.0), [])
        self.assertEqual(self.observe({}, 130.0), [])
        self.assertEqual(self.observe({}, 130.0 + alerts.CLEAR_AFTER_S - 1), [])
        self.assertEqual(len(self.observe({}, 130.0 + alerts.CLEAR_AFTER_S)), 1)

    def test_a_second_outage_reuses_the_first_outages_id(self):
        ids = []
        for start in (0.0, 1_000.0):
            for at in (start, start + 100.0):
                ids += [n.id for n in self.observe(UNREACHABLE, at)]
            for at in (start + 200.0, start + 300.0):
                ids += [n.id for n in self.observe({}, at)]
        self.assertEqual(ids, ["honcho-memory-unreachable",
                               "honcho-memory-unreachable-recovered"] * 2)

    def test_each_condition_is_raised_and_recovered_on_its_own(self):
        both = {**UNREACHABLE, Condition.OUTBOX_UNUSABLE: {"code": "outbox_unavailable"}}
        self.observe(both, 0.0)
        self.assertEqual(sorted(n.id for n in self.observe(both, 100.0)),
                         ["honcho-memory-outbox_unusable", "honcho-memory-unreachable"])
        self.observe(UNREACHABLE, 110.0)
        self.assertEqual([n.id for n in self.observe(UNREACHABLE, 200.0)],
                         ["honcho-memory-outbox_unusable-recovered"])

    def test_dead_letters_notify_at_once_when_they_appear_not_for_those_found_at_start(self):
        def dead(count, codes=None):
            return {Condition.DEAD_LETTERS: {"count": count, "codes": codes or {}}}

        self.assertEqual(self.observe(dead(3), 0.0), [],
                         "dead letters before the watch began are not news")
        appeared = self.observe(dead(5, {"invalid": 2}), 5.0)
        self.assertEqual([n.id for n in appeared], ["honcho-memory-dead_letters"])
        self.assertIn("2", appeared[0].message)
        self.assertEqual(self.observe(dead(9), 10.0), [])
        # Retried: none left.
        self.observe({}, 20.0)
        self.assertEqual([n.id for n in self.observe({}, 20.0 + alerts.CLEAR_AFTER_S)],
                         ["honcho-memory-dead_letters-recovered"])
        self.assertEqual(self.observe(dead(1), 100.0)[0].id,
                         "honcho-memory-dead_letters", "after none, one new dead letter is news")

    def test_each_notice_says_what_and_what_to_do_without_a_path_or_key(self):
        table = [
            (Condition.UNREACHABLE, {"code": "connect_timeout", "api_url": URL},
             [URL, "connect_timeout", "outbox"]),
            (Condition.KEY_REFUSED, {"code": "unauthorized"}, ["HONCHO_API_KEY", "Secrets"]),
            (Condition.OUTBOX_UNUSABLE, {"code": "outbox_corrupt"},
             ["outbox_corrupt", "outbox_path"]),
            (Condition.DEAD_LETTERS, {"count": 2, "codes": {"invalid": 2}},
             ["2", "invalid", "Retry dead"]),
            (Condition.RECALL_TIMEOUTS, {"timeouts": 7, "loads": 10},
             ["7 of the last 10", "recall_timeout_s"]),
        ]
        for condition, facts, words in table:
            with self.subTest(condition=condition.value):
                watch = alerts.Watch()
                alerts.observe(watch, {}, 0.0)
                raised = [n for at in (1.0, 100.0)
                          for n in alerts.observe(watch, {condition: facts}, at)]
                self.assertEqual(len(raised), 1)
                for word in words:
                    self.assertIn(word, raised[0].title + " " + raised[0].message)
                recovered = [n for at in (200.0, 300.0) for n in alerts.observe(watch, {}, at)]
                self.assertEqual(len(recovered), 1)
                self.assertTrue(recovered[0].recovered)
                self.assertTrue(recovered[0].title and recovered[0].message)

    def test_the_watch_runs_at_most_every_watch_every_s(self):
        self.assertTrue(alerts.due(self.watch, 0.0))
        self.assertFalse(alerts.due(self.watch, alerts.WATCH_EVERY_S - 0.1))
        self.assertTrue(alerts.due(self.watch, alerts.WATCH_EVERY_S))


class FindingsTest(unittest.TestCase):
    """Which conditions hold, read from the status document that health is built from."""

    def found(self, parts, **env):
        return alerts.findings(build_status(settings(**env), parts, NOW))

    def worker_with(self, kind, code):
        destination = settings().destination()
        return {"state": "circuit_open", "metrics": {},
                "circuits": {destination: {"kind": kind, "code": code, "open_until": NOW + 5,
                                           "failures": 1}}}

    def test_a_healthy_status_holds_nothing(self):
        self.assertEqual(self.found(StatusParts()), {})

    def test_circuits_say_unreachable_or_key_refused(self):
        found = self.found(StatusParts(worker=self.worker_with("unreachable", "connect_error")))
        self.assertEqual(found, {Condition.UNREACHABLE: {"code": "connect_error",
                                                         "api_url": URL}})
        found = self.found(StatusParts(worker=self.worker_with("auth", "unauthorized")))
        self.assertEqual(found, {Condition.KEY_REFUSED: {"code": "unauthorized"}})

    def test_a_check_whose_key_was_refused_says_key_refused(self):
        parts = StatusParts(api_check={"ok_at": None, "failed_at": NOW - 1, "code": "unauthorized",
                                       "auth": True})
        self.assertEqual(self.found(parts), {Condition.KEY_REFUSED: {"code": "unauthorized"}})

    def test_an_unusable_outbox_is_found_but_a_busy_one_is_not(self):
        self.assertEqual(self.found(StatusParts(outbox_problem="outbox_corrupt")),
                         {Condition.OUTBOX_UNUSABLE: {"code": "outbox_corrupt"}})
        self.assertEqual(self.found(StatusParts(outbox_problem="outbox_busy")), {})

    def test_dead_letters_are_found_with_their_count_and_codes(self):
        parts = StatusParts(queue_counts={"dead": 3}, dead_by_code={"invalid": 3})
        self.assertEqual(self.found(parts), {Condition.DEAD_LETTERS: {"count": 3,
                                                                      "codes": {"invalid": 3}}})

    def test_recall_timing_out_on_most_of_the_recent_turns_is_found(self):
        table = [(["timeout"] * 6 + ["fresh"] * 4, True), (["timeout"] * 5 + ["hit"] * 5, False),
                 (["timeout"] * 4, False), (["timeout"] * 5, True)]
        for recent, held in table:
            with self.subTest(recent=recent):
                found = self.found(StatusParts(recent_recalls=recent))
                self.assertEqual(Condition.RECALL_TIMEOUTS in found, held, found)
        found = self.found(StatusParts(recent_recalls=["timeout"] * 6 + ["error"] * 2))
        self.assertEqual(found[Condition.RECALL_TIMEOUTS], {"timeouts": 6, "loads": 8})

    def test_recall_timeouts_are_not_said_again_when_honcho_is_unreachable(self):
        parts = StatusParts(worker=self.worker_with("unreachable", "connect_timeout"),
                            recent_recalls=["timeout"] * 10)
        self.assertEqual(list(self.found(parts)), [Condition.UNREACHABLE])


class RecentLoadsTest(unittest.TestCase):
    def test_the_recall_cache_keeps_the_outcome_of_its_recent_waited_loads(self):
        cache = RecallCache(ttl_s=60.0, max_entries=8)

        def refuse(*args):
            return False  # no thread free: the turn gets no load in time

        def run_now(fn, *args):
            fn(*args)
            return True

        for n in range(RECENT_LOADS + 3):
            cache.get(("k", n), "s", ContextData, 0.0, refuse)
        cache.get(("k", "new"), "s", ContextData, 1.0, run_now)
        cache.get(("k", "new"), "s", ContextData, 1.0, run_now)
        self.assertEqual(list(cache.recent),
                         ["timeout"] * (RECENT_LOADS - 2) + ["fresh", "hit"])


class HubWatchTest(unittest.TestCase):
    """The Hub's watch: status read, conditions found, notices handed to the host's `notify`."""

    def setUp(self):
        self.path = temp_outbox_path(self)
        self.env = {"HONCHO_OUTBOX_PATH": self.path,
                    "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10]}
        self.shown = []
        self.box = Outbox(self.path)
        self.addCleanup(self.box.close)
        # The watch is the process's: each test starts with one that has seen nothing.
        alerts.WATCH.put(process_state(), alerts.Watch())

    def hub(self, enabled=True, **env):
        made = Hub(settings=lambda: settings(**{**self.env, **env}), enabled=lambda: enabled,
                   notify=self.shown.append)
        self.addCleanup(made.stop, 5.0)
        return made

    def dead_letter(self, n):
        self.box.enqueue_batches([[event(n)]])
        batch = lease(self.box, "test", 1)
        settle(self.box, "test", Settlement(dead=[(e.id, "invalid") for e in batch]))

    def test_a_new_dead_letter_reaches_notify(self):
        hub = self.hub()
        hub.watch_memory(0.0)
        self.dead_letter(1)
        hub.watch_memory(alerts.WATCH_EVERY_S)
        self.assertEqual([n.id for n in self.shown], ["honcho-memory-dead_letters"])

    def test_with_notifications_off_nothing_is_shown(self):
        hub = self.hub(HONCHO_NOTIFICATIONS="false")
        hub.watch_memory(0.0)
        self.dead_letter(1)
        hub.watch_memory(alerts.WATCH_EVERY_S)
        self.assertEqual(self.shown, [])

    def test_while_the_plugin_is_off_nothing_is_shown(self):
        hub = self.hub(enabled=False)
        hub.watch_memory(0.0)
        self.dead_letter(1)
        hub.watch_memory(alerts.WATCH_EVERY_S)
        self.assertEqual(self.shown, [])


class NoticeTextTest(unittest.TestCase):
    def test_titles_hold_no_markup_characters(self):
        """Agent Zero v1.7 shows a title as text and its message as HTML: the bridge escapes both,
        which leaves a title without & < > " ' as it is, in either rendering."""
        facts = {"code": "c", "api_url": URL, "count": 1, "codes": {}, "timeouts": 5, "loads": 5}
        for condition in Condition:
            watch = alerts.Watch()
            alerts.observe(watch, {}, 0.0)
            notices = [n for at, found in ((1.0, {condition: facts}), (100.0, {condition: facts}),
                                           (200.0, {}), (300.0, {}))
                       for n in alerts.observe(watch, found, at)]
            for notice in notices:
                with self.subTest(id=notice.id):
                    self.assertEqual(html.escape(notice.title), notice.title)


if __name__ == "__main__":
    unittest.main()
