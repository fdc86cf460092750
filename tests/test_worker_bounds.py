"""The delivery side's bounds: a drain without a worker thread ends at its deadline, a broken
outbox is logged once per change, delivery pauses (and says why) while the plugin is off or the API
URL unusable, and what the worker remembers per destination stays bounded (the scope registrar's
bounds: test_registrar.py). Real outbox, real SDK over the fake, injected clocks."""

import dataclasses
import os
import threading
import unittest

from delivery_helpers import Bench, with_api_url_problem

from honcho_hub.delivery.state import WorkerState
from honcho_hub.settings.config import build_settings

LATENCY_S = 0.2  # what each request costs on the injected monotonic clock
WAIT_S = 10.0  # bound of every wait on another thread; the tests never need that long


def slow_server(bench: Bench, latency_s: float = LATENCY_S) -> None:
    """Each request the fake answers moves the bench's monotonic clock on by `latency_s`."""
    lock = threading.Lock()

    def advance(request) -> None:
        with lock:
            bench.mono.advance(latency_s)

    bench.on_request = advance


class DrainDeadlineTest(unittest.TestCase):
    def test_a_drain_without_a_thread_leases_only_batches_that_can_finish_before_its_deadline(self):
        bench = Bench(self, concurrency=1)
        for chat in range(10):
            bench.say(f"dd{chat}", 1)
        slow_server(bench)
        started = bench.mono()
        moved = bench.worker.drain(1.0)
        self.assertLessEqual(bench.mono() - started, 1.0, "ended within its timeout")
        self.assertGreaterEqual(moved["delivered"], 1, "and used it")
        self.assertNotIn("leased", bench.states(), "nothing left on the wire")
        self.assertEqual(sum(len(bench.server_texts(f"dd{c}")) for c in range(10)),
                         moved["delivered"])

    def test_a_slow_drain_does_not_keep_a_later_shorter_one_from_delivering(self):
        bench = Bench(self, concurrency=1)
        bench.say("ds1", 1)
        slow_server(bench, latency_s=2.0)  # this batch takes 6 s (workspace, session, messages)
        self.assertEqual(bench.worker.drain(30.0)["delivered"], 1)
        texts = bench.say("ds2", 1)
        slow_server(bench)  # Honcho is fast again
        self.assertEqual(bench.worker.drain(5.0)["delivered"], 1)
        bench.assert_exactly_once("ds2", texts)

    def test_a_drain_without_a_thread_does_not_wait_for_a_request_on_the_wire_at_its_deadline(self):
        bench = Bench(self)
        texts = bench.say("dw", 2)
        hanging, answered, release = threading.Event(), threading.Event(), threading.Event()
        self.addCleanup(release.set)

        # the add-messages request is still being answered at the deadline
        def slow_add(request) -> None:
            if request.url.path.endswith("/messages"):
                hanging.set()
                bench.mono.advance(2.0)
                release.wait(WAIT_S)
                answered.set()

        bench.on_request = slow_add
        moved = bench.worker.drain(0.5)
        self.assertTrue(hanging.is_set() and not answered.is_set(),
                        "returned while the request was in flight")
        self.assertEqual(moved["delivered"], 0)
        self.assertEqual(bench.states(), {"leased": 2},
                         "left leased: it goes out again after its lease")
        release.set()
        # Honcho stored it meanwhile
        self.assertEqual(bench.fake.await_request(r"/messages$", 1, WAIT_S), 1)
        bench.on_request = None
        bench.clock.advance(bench.settings.lease_s + 1)
        bench.run_until_idle()
        bench.assert_exactly_once("dw", texts)  # asked Honcho first: not sent twice
        self.assertEqual(bench.adds("dw"), 1)


    def test_unsent_batches_are_pending_again_at_a_drains_deadline_and_sent_once_by_the_next(self):
        bench = Bench(self)
        texts = bench.say("dn", 2)
        creating, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        # the session is still being created at the deadline: nothing added
        def slow_session(request) -> None:
            if request.method == "POST" and request.url.path.endswith("/sessions"):
                creating.set()
                bench.mono.advance(2.0)
                release.wait(WAIT_S)

        bench.on_request = slow_session
        moved = bench.worker.drain(0.5)
        self.assertTrue(creating.is_set(), "the batch was leased and its send begun")
        self.assertEqual(moved["delivered"], 0)
        self.assertEqual(bench.states(), {"pending": 2},
                         "released at the deadline, not leased for lease_s")
        self.assertEqual([(attempts, code) for _, _, attempts, code, _ in bench.rows()],
                         [(0, None)] * 2, "no attempt burned, no error recorded")
        bench.on_request = None
        release.set()  # the abandoned send goes on: it must add nothing now
        self.assertEqual(bench.worker.drain(WAIT_S)["delivered"], 2,
                         "delivered at once, not after lease_s")
        bench.assert_exactly_once("dn", texts)
        self.assertEqual(bench.adds("dn"), 1)


class StepFailureLogTest(unittest.TestCase):
    def test_a_corrupt_outbox_is_logged_once_by_code_and_its_repair_once(self):
        bench = Bench(self)
        corrupt = os.path.join(os.path.dirname(bench.path), "corrupt.sqlite3")
        os.makedirs(os.path.dirname(corrupt), exist_ok=True)
        with open(corrupt, "wb") as handle:
            handle.write(b"this is not a database, " * 200)
        bench.settings = dataclasses.replace(bench.settings, outbox_path=corrupt)
        with self.assertLogs("honcho_hub.delivery.worker", "INFO") as logs:
            bench.worker.start()
            for _ in range(5):  # five polls of the thread
                bench.worker.drain(WAIT_S)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIsNone(logs.records[0].exc_info, "no traceback")
        self.assertRegex(logs.records[0].getMessage(), r"\(outbox_\w+\)")
        self.assertNotIn(corrupt, logs.output[0])
        self.assertEqual((bench.worker.state.snapshot()["state"],
                          bench.worker.state.snapshot()["reason"][:7]),
                         ("error", "outbox_"))
        os.remove(corrupt)  # repaired: the worker makes a new outbox there
        with self.assertLogs("honcho_hub.delivery.worker", "INFO") as logs:
            bench.worker.drain(WAIT_S)
            bench.worker.drain(WAIT_S)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("delivering again", logs.output[0])
        self.assertEqual(bench.worker.state.snapshot()["reason"], None)


class PausedTest(unittest.TestCase):
    def test_delivery_pauses_and_says_why_while_the_plugin_is_off_or_the_api_url_unusable(self):
        problem = "HONCHO_API_URL: the port is not a number"
        for cause, reason, detail in (("plugin_off", "plugin_disabled", None),
                                      ("api_url", "api_url_invalid", problem)):
            with self.subTest(cause=cause):
                bench = Bench(self)
                texts = bench.say("p1", 2)
                usable = bench.settings
                if cause == "plugin_off":
                    bench.enabled = False
                else:
                    bench.settings = with_api_url_problem(usable, problem)
                report = bench.worker.step()
                self.assertEqual((report.state, report.leased, bench.sent), ("paused", 0, []))
                snapshot = bench.worker.state.snapshot()
                self.assertEqual((snapshot["state"], snapshot["reason"], snapshot["detail"]),
                                 ("paused", reason, detail))
                self.assertEqual(bench.worker.drain(WAIT_S)["delivered"], 0)
                self.assertEqual(bench.sent, [], "a drain sends nothing either")
                bench.enabled, bench.settings = True, usable
                bench.run_until_idle()
                bench.assert_exactly_once("p1", texts)
                snapshot = bench.worker.state.snapshot()
                self.assertEqual((snapshot["state"], snapshot["reason"], snapshot["detail"]),
                                 ("idle", None, None))


class UnusableUrlCaptureTest(unittest.TestCase):
    def test_messages_captured_while_the_url_was_unusable_are_delivered_once_it_is_fixed(self):
        # no scheme, a bad port: unusable, never a fallback
        bench = Bench(self, api_url="honcho.test:99999")
        self.assertIsNotNone(bench.settings.api_url_problem)
        texts = bench.say("u1", 2)
        self.assertEqual((bench.worker.step().state, bench.sent), ("paused", []))
        # the user fixed the URL
        bench.settings = build_settings({"outbox_path": bench.path,
                                         "api_url": "https://honcho.test"}, bench.secrets, {})
        bench.run_until_idle()
        bench.assert_exactly_once("u1", texts)


class CircuitBoundTest(unittest.TestCase):
    def test_circuits_stay_bounded_as_destinations_come_and_go_keeping_the_newest(self):
        state = WorkerState(max_circuits=4)
        for n in range(10):
            circuit = state.circuit(f"https://h{n}.test#ws")
            if n % 2:
                circuit.kind, circuit.code, circuit.open_until = "unreachable", "unreachable", 1e12
            self.assertIs(state.circuit(f"https://h{n}.test#ws"), circuit,
                          "the current one is kept")
            self.assertLessEqual(len(state.circuits), 4)
        self.assertIn("https://h9.test#ws", state.snapshot()["circuits"])


if __name__ == "__main__":
    unittest.main()
