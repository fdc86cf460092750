"""The worker's on_delivered callback: once per batch of a session that was delivered or found
already held by Honcho, with its destination and session; never for a batch that failed; a callback
that raises changes nothing the worker does."""

import collections
import logging
import unittest

from delivery_helpers import Bench

DEST = "https://honcho.test#agent-zero"


class OnDeliveredTest(unittest.TestCase):
    def bench(self, callback, **overrides):
        return Bench(self, worker_options={"on_delivered": callback}, **overrides)

    def test_called_once_per_delivered_batch_with_its_session(self):
        calls = []
        bench = self.bench(lambda destination, session: calls.append((destination, session)),
                           batch_size=2)
        bench.say("a", 3)
        bench.say("b", 1)
        bench.run_until_idle()
        self.assertEqual(len(bench.server_texts("a")) + len(bench.server_texts("b")), 4)
        # chat a in two batches (2 + 1), chat b in one
        self.assertEqual(collections.Counter(calls), {(DEST, "chat-a"): 2, (DEST, "chat-b"): 1})
        bench.worker.step()
        self.assertEqual(len(calls), 3, "no call while nothing is delivered")

    def test_a_batch_found_already_held_counts_as_delivered_and_a_failed_one_is_not_reported(self):
        calls = []
        bench = self.bench(lambda destination, session: calls.append((destination, session)))
        texts = bench.say("r", 2)
        bench.fake.fail(kind="reset", after_store=True)  # stored, but the answer never came
        bench.worker.step()
        self.assertEqual(calls, [])
        bench.clock.advance(600)
        bench.run_until_idle()
        bench.assert_exactly_once("r", texts)
        self.assertEqual(bench.adds("r"), 1, "reconciled, not sent again")
        self.assertEqual(calls, [(DEST, "chat-r")])

    def test_a_callback_that_raises_is_logged_at_debug_and_delivery_goes_on(self):
        def broken(destination, session):
            raise RuntimeError("recall is not ready")

        bench = self.bench(broken)
        texts = bench.say("x", 2)
        with self.assertLogs("honcho_hub.delivery.worker", logging.DEBUG) as logs:
            report = bench.worker.step()
        self.assertEqual(report.delivered, 2)
        bench.assert_exactly_once("x", texts)
        self.assertEqual(bench.states(), {"delivered": 2})
        failures = [r for r in logs.records if "on_delivered" in r.getMessage()]
        self.assertEqual([(r.levelno, r.getMessage()) for r in failures],
                         [(logging.DEBUG,
                           "honcho worker: the on_delivered callback failed (RuntimeError)")])


if __name__ == "__main__":
    unittest.main()
