"""bench/baseline.py: how the benches time a call beside its same-run baseline (issue 27): turn
about in mirrored order, and the three keys each figure is printed with."""

import unittest

from bench_testkit import load_bench


def baseline_module():
    return load_bench("baseline")


class AlternatedTest(unittest.TestCase):
    def test_ours_and_the_baseline_run_turn_about_in_mirrored_order(self) -> None:
        baseline = baseline_module()
        calls, now = [], [0]

        def clock():
            return now[0]

        def call(name, ns):
            def run():
                calls.append(name)
                now[0] += ns
            return run

        ours, base = baseline.alternated(call("ours", 3000), call("base", 1000), runs=4,
                                         clock=clock)
        self.assertEqual(calls, ["ours", "base", "base", "ours", "ours", "base", "base", "ours"])
        self.assertEqual(ours, [3.0] * 4)  # microseconds, each call's own
        self.assertEqual(base, [1.0] * 4)

    def test_whole_runs_go_forth_and_back(self) -> None:
        self.assertEqual(baseline_module().mirrored(["off", "on"]), ["off", "on", "on", "off"])


class BesideTest(unittest.TestCase):
    def test_a_figure_is_printed_with_its_baseline_and_the_difference(self) -> None:
        self.assertEqual(baseline_module().beside("hit_p50_us", 60.04, 12.0),
                         {"hit_p50_us": 60.0, "hit_p50_us_baseline": 12.0,
                          "hit_p50_us_over_baseline": 48.0})


if __name__ == "__main__":
    unittest.main()
