"""bench/faults.py's same-run baselines (issue 27): the same events sent bare through the same
proxy with no faults, half before the measured drain and half after it, so that a drift of the
machine's load falls on both; the drain is printed beside that baseline and the difference.
Made-up seconds: no timing run."""

import unittest

from bench_testkit import load_bench


def bench():
    return load_bench("faults")


class BracketTest(unittest.TestCase):
    def test_the_baselines_halves_add_up_to_the_events(self) -> None:
        faults = bench()
        for events in (1, 2, 7, 10_000):
            before, after = faults.halves(events)
            self.assertEqual(before + after, events)
            self.assertLessEqual(abs(before - after), 1)

    def test_a_drain_is_printed_beside_the_sum_of_its_baselines_halves(self) -> None:
        figures = bench().bracketed("drain_s", 12.5, before_s=1.25, after_s=1.5)
        self.assertEqual(figures, {"drain_s": 12.5, "drain_s_baseline": 2.75,
                                   "drain_s_over_baseline": 9.75,
                                   "drain_s_baseline_halves": [1.25, 1.5]})


if __name__ == "__main__":
    unittest.main()
