"""bench/controls.py's turn latency (issue 27's same-run baselines): the dialectic settings' runs of
bench/turn.py go forth and back with the dialectic off between them (off, default, heaviest,
heaviest, default, off), each half the turns; a setting's figure is the mean of its two runs, and
the off runs are the baseline its difference is taken from. Made-up run lines: no timing run."""

import unittest

from bench_testkit import load_bench


def bench():
    return load_bench("controls")


def run(p50, p99=10.0, share=0.0, loop=(2.0, 1.5)):
    return {"latency_ms": 56.0, "added_turn_ms_p50": p50, "added_turn_ms_p99": p99,
            "dialectic_note_share": share, "loop_block_ms_p99": loop[0],
            "loop_block_ms_p99_baseline": loop[1]}


class LatencyFiguresTest(unittest.TestCase):
    def test_the_runs_go_forth_and_back(self) -> None:
        self.assertEqual(bench().run_order(), ["off", "default", "heaviest", "heaviest",
                                               "default", "off"])

    def test_a_settings_figures_are_the_mean_of_its_runs_beside_the_off_runs(self) -> None:
        controls = bench()
        runs = [("off", run(30.0)), ("default", run(40.0, share=0.5)),
                ("heaviest", run(50.0)), ("heaviest", run(54.0)),
                ("default", run(44.0, share=0.7)), ("off", run(32.0, loop=(3.0, 2.5)))]
        figures = controls.latency_figures(runs)
        self.assertEqual(figures["added_turn_ms_p50_dialectic_off"], 31.0)
        self.assertEqual(figures["added_turn_ms_p50_dialectic_default"], 42.0)
        self.assertEqual(figures["added_turn_ms_p50_dialectic_default_baseline"], 31.0)
        self.assertEqual(figures["added_turn_ms_p50_dialectic_default_over_baseline"], 11.0)
        self.assertEqual(figures["dialectic_added_ms_p50_heaviest"], 21.0)  # the older key
        self.assertEqual(figures["dialectic_note_share_default"], 0.6)
        self.assertEqual(figures["loop_block_ms_p99_dialectic_off"], 2.5)
        self.assertEqual(figures["loop_block_ms_p99_dialectic_off_baseline"], 2.0)
        self.assertEqual(figures["loop_block_ms_p99_dialectic_off_over_baseline"], 0.5)
        self.assertEqual(figures["latency_ms"], 56.0)


if __name__ == "__main__":
    unittest.main()
