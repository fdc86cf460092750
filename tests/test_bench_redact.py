"""bench/redact.py's timings: each printed beside its same-run baseline (a bare `str.lower()` over
the same text) and the difference (issue 27). Three runs: the keys and the arithmetic, no timing
asserted."""

import unittest

from bench_testkit import load_bench


def bench():
    return load_bench("redact")


class RedactTimingTest(unittest.TestCase):
    def test_a_timing_comes_with_its_baseline_and_the_difference(self) -> None:
        figures = bench().p50_us("p50_us_400_chars", "a message of no secret " * 16, runs=3)
        self.assertEqual(set(figures), {"p50_us_400_chars", "p50_us_400_chars_baseline",
                                        "p50_us_400_chars_over_baseline"})
        self.assertAlmostEqual(figures["p50_us_400_chars_over_baseline"],
                               figures["p50_us_400_chars"] - figures["p50_us_400_chars_baseline"],
                               places=1)


if __name__ == "__main__":
    unittest.main()
