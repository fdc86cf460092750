"""bench/deadlines.py's figures for one path: its wait beside a bare read of the same trickling
server abandoned at the same deadline (issue 27's same-run baseline), the difference, and how far
each went past the deadline. Made-up waits: no timing asserted."""

import unittest

from bench_testkit import load_bench


def bench():
    return load_bench("deadlines")


class PathFiguresTest(unittest.TestCase):
    def test_a_paths_wait_is_reported_beside_the_bare_read_and_past_its_deadline(self) -> None:
        figures = bench().path_figures(deadline_s=2.0, wait_ms=2031.24, answer="timed_out",
                                       baseline_ms=2004.0)
        self.assertEqual(figures, {
            "deadline_s": 2.0, "wait_ms": 2031.2, "answer": "timed_out",
            "wait_ms_baseline": 2004.0, "wait_ms_over_baseline": 27.2,
            "over_deadline_ms": 31.2, "over_deadline_ms_baseline": 4.0})

    def test_the_bare_read_asks_the_same_server_for_a_long_answer_with_the_key(self) -> None:
        deadlines = bench()
        request = deadlines.bare_request("127.0.0.1:4321").decode()
        self.assertTrue(request.startswith("GET /v3/workspaces/agent-zero/peers/agent-zero/card"))
        self.assertIn(f"Authorization: Bearer {deadlines.KEY}\r\n", request)
        self.assertTrue(request.endswith("\r\n\r\n"))


if __name__ == "__main__":
    unittest.main()
