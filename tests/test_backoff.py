import unittest

import tenacity

from honcho_hub.backoff import wait_s


class WaitTest(unittest.TestCase):
    def test_a_strategy_is_read_at_an_attempt_number_as_tenacity_sleeps_by_it(self):
        doubling = tenacity.wait_exponential(multiplier=2.0, max=20.0)
        cases = [(0, 2.0),  # 0: as the first
                 (1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 20.0), (60, 20.0)]
        for attempt, seconds in cases:
            with self.subTest(attempt=attempt):
                self.assertEqual(wait_s(doubling, attempt), seconds)

    def test_a_jittered_sum_stays_within_its_bounds(self):
        jittered = (tenacity.wait_exponential(multiplier=0.05, max=2.0)
                    + tenacity.wait_random(0, 0.05))
        for attempt in range(1, 12):
            with self.subTest(attempt=attempt):
                floor = min(0.05 * 2 ** (attempt - 1), 2.0)
                self.assertTrue(floor <= wait_s(jittered, attempt) <= floor + 0.05)


if __name__ == "__main__":
    unittest.main()
