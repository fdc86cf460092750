"""bench/a0_turn.py's JSON line: the keys issue 27 names, figures made from the samples as the
bench defines them (percentile differences, receipt shares, the recall deadline) and each target
checked against them.

The bench itself needs the real Agent Zero and a real Honcho (CI runs it as a smoke run); these
tests feed its summarising functions made-up samples.
"""

import unittest

from bench_testkit import load_bench

SCENARIO_KEYS = {"added_turn_ms_p50", "added_turn_ms_p95", "context_ms_p50", "query_aware_share",
                 "base_pack_share", "empty_pack_share", "turns"}


def bench():
    return load_bench("a0_turn")


def scenario(a0_turn, on_ms, off_ms, receipts, recall_ms=None, context_ms=(40.0,)):
    return a0_turn.scenario_summary(on_ms=list(on_ms), off_ms=list(off_ms),
                                    context_ms=list(context_ms), receipts=list(receipts),
                                    recall_hook_ms=list(recall_ms or [1.0] * len(on_ms)),
                                    deadline_ms=2500.0)


class ScenarioSummaryTest(unittest.TestCase):
    def test_a_scenario_carries_the_issues_keys(self) -> None:
        a0_turn = bench()
        summary = scenario(a0_turn, [110, 120], [100, 100], [("fresh", "fresh"), ("base", "base")])
        self.assertLessEqual(SCENARIO_KEYS, set(summary))

    def test_added_time_is_on_minus_off_per_percentile(self) -> None:
        a0_turn = bench()
        on = [100.0 + i for i in range(101)]  # p50 150, p95 195
        off = [90.0 + i / 2 for i in range(101)]  # p50 115, p95 137.5
        summary = scenario(a0_turn, on, off, [("fresh", "fresh")] * 101)
        self.assertAlmostEqual(summary["added_turn_ms_p50"], 35.0)
        self.assertAlmostEqual(summary["added_turn_ms_p95"], 57.5)
        self.assertEqual(summary["turns"], 202)

    def test_the_added_p50s_spread_is_zero_for_steady_turns_and_grows_with_their_noise(self):
        a0_turn = bench()
        steady = scenario(a0_turn, [110.0] * 20, [100.0] * 20, [("fresh", "fresh")] * 20)
        noisy = scenario(a0_turn, [110.0 + 40 * (i % 5) for i in range(20)],
                         [100.0 + 40 * (i % 3) for i in range(20)], [("fresh", "fresh")] * 20)
        self.assertEqual(steady["added_turn_ms_p50_spread"], 0.0)
        self.assertGreater(noisy["added_turn_ms_p50_spread"], 10.0)

    def test_pack_shares_come_from_the_receipts_of_the_turns_with_the_plugin_on(self) -> None:
        a0_turn = bench()
        receipts = [("fresh", "hit"), ("fresh", "fresh"), ("base", "base"), ("none", "timeout"),
                    ("stale", "reused"), None]  # None: the turn left no receipt
        summary = scenario(a0_turn, [1] * 6, [1] * 6, receipts)
        self.assertAlmostEqual(summary["query_aware_share"], 2 / 6, places=3)
        self.assertAlmostEqual(summary["base_pack_share"], 1 / 6, places=3)
        self.assertAlmostEqual(summary["empty_pack_share"], 2 / 6, places=3)

    def test_a_recall_hook_longer_than_the_deadline_counts_as_past_it(self) -> None:
        a0_turn = bench()
        summary = scenario(a0_turn, [1, 1, 1], [1, 1, 1], [("fresh", "fresh")] * 3,
                           recall_ms=[10.0, 2499.0, 2600.0])
        self.assertEqual(summary["turns_past_recall_deadline"], 1)


class LineTest(unittest.TestCase):
    def line(self, default_added=(50.0, 60.0), wait0_added=(3.0, 10.0), past=0):
        a0_turn = bench()

        def made(added):
            return {"added_turn_ms_p50": added[0], "added_turn_ms_p95": added[1],
                    "context_ms_p50": 40.0, "query_aware_share": 1.0, "base_pack_share": 0.0,
                    "empty_pack_share": 0.0, "turns": 4, "turns_past_recall_deadline": past}

        return a0_turn.bench_line({"default": made(default_added), "wait0": made(wait0_added)},
                                  delay_ms=200.0, load_avg=[3.2, 2.9, 2.1], hooks=None)

    def test_the_line_carries_both_scenarios_the_model_delay_and_the_load(self) -> None:
        line = self.line()
        self.assertLessEqual({"default", "wait0", "delay_ms", "load_avg", "targets"}, set(line))
        for name in ("default", "wait0"):
            self.assertLessEqual(SCENARIO_KEYS, set(line[name]))

    def test_each_target_is_checked_against_its_figure(self) -> None:
        met = self.line()["targets"]
        self.assertEqual({name: t["met"] for name, t in met.items()},
                         {"default_added_p50": True, "wait0_added_p50": True,
                          "wait0_added_p95": True, "no_turn_past_recall_deadline": True})
        self.assertEqual(met["default_added_p50"]["limit_ms"], 55.0)  # context p50 + 15
        missed = self.line(default_added=(56.0, 60.0), wait0_added=(5.5, 16.0), past=1)["targets"]
        self.assertEqual({name: t["met"] for name, t in missed.items()},
                         {"default_added_p50": False, "wait0_added_p50": False,
                          "wait0_added_p95": False, "no_turn_past_recall_deadline": False})


class HookSummaryTest(unittest.TestCase):
    def test_a_hook_is_reported_beside_its_empty_hook_baseline(self) -> None:
        a0_turn = bench()
        ours = [1000.0 + i for i in range(100)]  # microseconds
        empty = [20.0 + i / 10 for i in range(100)]
        summary = a0_turn.hook_summary(ours, empty)
        self.assertLessEqual({"p50_us", "p99_us", "baseline_p50_us", "baseline_p99_us",
                              "p99_over_baseline_us", "samples"}, set(summary))
        self.assertAlmostEqual(summary["p99_over_baseline_us"],
                               summary["p99_us"] - summary["baseline_p99_us"])


class HookBlockTest(unittest.TestCase):
    """The hook blocks come in bursts: the journal (`journal_capacity` messages) must drain between
    them, and a capture it refused must be counted, never mixed silently into the hook's figures."""

    def test_a_blocks_captures_are_counted_by_outcome_from_the_counters_it_moved(self) -> None:
        a0_turn = bench()
        before = {"accepted": 10, "queued": 10, "refused_journal_full": 1}
        after = {"accepted": 90, "accepted_in_memory": 4, "queued": 90, "handed_off": 3,
                 "refused_journal_full": 6, "refused_full": 1, "redaction_failed": 2}
        captures = a0_turn.capture_outcomes(before, after, messages=100)
        self.assertEqual(captures["accepted"], 84)  # the writer's queued/handed_off are not ours
        self.assertEqual(captures["refused"], 6)
        # every message the hooks did not accept: refused, failed, and 8 that moved no counter
        self.assertEqual(captures["not_accepted"], 16)
        self.assertEqual(captures["outcomes"], {"refused_journal_full": 5, "refused_full": 1,
                                                "redaction_failed": 2, "no_outcome": 8})

    def test_a_clean_block_counts_nothing_refused(self) -> None:
        a0_turn = bench()
        captures = a0_turn.capture_outcomes({}, {"accepted": 8}, messages=8)
        self.assertEqual((captures["accepted"], captures["refused"], captures["not_accepted"]),
                         (8, 0, 0))
        self.assertEqual(captures["outcomes"], {})

    def test_bursts_add_up_to_the_samples_and_each_fits_the_journal_with_room_to_spare(self):
        a0_turn = bench()
        for samples in (3, 40, 400, 1000):
            for capacity in (8, 256, 1024):
                bursts = a0_turn.bursts(samples, capacity)
                self.assertEqual(sum(bursts), samples)
                # two messages a sample (user, response) fill at most half the journal
                self.assertLessEqual(2 * max(bursts), max(2, capacity // 2), (samples, capacity))
        self.assertEqual(a0_turn.bursts(40, 256), [40])

    def test_waiting_for_the_drain_ends_when_the_journal_is_empty_or_at_the_bound(self) -> None:
        a0_turn = bench()
        now = [0.0]

        def sleep(seconds):
            now[0] += seconds

        left = iter([5, 3, 0])
        self.assertTrue(a0_turn.wait_drained(lambda: next(left), timeout_s=10.0,
                                             clock=lambda: now[0], sleep=sleep))
        now[0] = 0.0
        self.assertFalse(a0_turn.wait_drained(lambda: 7, timeout_s=10.0, clock=lambda: now[0],
                                              sleep=sleep))
        self.assertGreaterEqual(now[0], 10.0)

    def test_a_figure_from_a_block_that_refused_is_marked_and_its_target_not_judged(self) -> None:
        a0_turn = bench()
        clean = a0_turn.capture_outcomes({}, {"accepted": 8}, messages=8)
        refused = a0_turn.capture_outcomes({}, {"accepted": 6, "refused_journal_full": 2},
                                           messages=8)
        ours, empty = [300.0] * 4, [3.0] * 4
        hooks = {"full": {"user": {"400": a0_turn.hook_summary(ours, empty, clean)}},
                 "normal": {"user": {"400": a0_turn.hook_summary(ours, empty, refused)}}}
        self.assertTrue(hooks["full"]["user"]["400"]["clean"])
        self.assertFalse(hooks["normal"]["user"]["400"]["clean"])
        self.assertEqual(hooks["normal"]["user"]["400"]["captures"]["refused"], 2)
        checked = a0_turn.hook_targets(hooks)
        self.assertIs(checked["user_400_full_p99_over_baseline"]["met"], True)
        self.assertFalse(checked["user_400_normal_p99_over_baseline"]["clean"])
        self.assertIsNone(checked["user_400_normal_p99_over_baseline"]["met"])


if __name__ == "__main__":
    unittest.main()
