"""bench/redact.py's timings: each printed beside its same-run baseline (a bare `str.lower()` over
the same text) and the difference (issue 27). Three runs: the keys and the arithmetic, no timing
asserted."""

import importlib.util
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_redact",
                                                      os.path.join(ROOT, "bench", "redact.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    return module


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
