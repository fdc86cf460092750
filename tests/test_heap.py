"""Giving the heap's freed memory back to the system after the delivery worker's prune (issue 27:
an hour's soak grew its RSS while Python's heap stayed flat; glibc kept the freed memory)."""

import platform
import unittest

from delivery_helpers import Bench

from honcho_hub import heap
from honcho_hub.delivery.worker import PRUNE_EVERY_S


class GiveBackTest(unittest.TestCase):
    def test_it_says_it_trimmed_on_glibc_and_that_nothing_was_tried_elsewhere(self):
        gave_back = heap.give_back_freed_memory()
        self.assertIs(gave_back, platform.libc_ver()[0] == "glibc")

    def test_the_worker_gives_memory_back_after_each_prune_and_only_then(self):
        given_back: list[float] = []
        bench = Bench(self, worker_options={
            "give_back_memory": lambda: given_back.append(bench.mono()) or True})
        bench.worker.step()  # the first step prunes
        bench.worker.step()
        self.assertEqual(given_back, [1000.0])
        bench.mono.advance(PRUNE_EVERY_S)
        bench.worker.step()
        self.assertEqual(given_back, [1000.0, 1000.0 + PRUNE_EVERY_S])


if __name__ == "__main__":
    unittest.main()
