"""The worker as a thread and as processes: drain, stop, restarts, leaks, kill -9, four drainers."""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from delivery_helpers import Bench
from hub_testkit import ROOT
from loopback import ServerProcess, serve
from outbox_helpers import ManualClock, temp_outbox_path

from honcho_hub.delivery import lifecycle
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.hub import Hub
from honcho_hub.prompt_window import PromptWindow
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import NewEvent, Outbox

CHILD = os.path.join(ROOT, "tests", "worker_child.py")
CHILD_KEY = "loopback-test-key"


class ThreadLifecycleTest(unittest.TestCase):
    def test_drain_from_another_thread_returns_what_moved(self):
        bench = Bench(self)
        bench.enabled = False  # the thread's own first steps move nothing
        bench.worker.start()
        bench.say("t1", 25)
        bench.enabled = True
        moved = bench.worker.drain(30)
        self.assertEqual(moved["delivered"], 25)
        self.assertEqual(len(bench.server_texts("t1")), 25)
        self.assertTrue(bench.worker.stop(10))
        self.assertTrue(bench.worker.stop(10))  # idempotent
        self.assertEqual(bench.worker.state.state, "stopped")

    def test_the_thread_steps_once_the_prompt_window_is_closed_by_the_model_call(self):
        bench = Bench(self)
        # Its clock stands still: held until the model call. It wakes the worker, as the Hub's does.
        window = PromptWindow(monotonic=ManualClock(0.0), on_close=lambda: worker.wake())
        window.opened()  # the user's message: Agent Zero builds the turn's prompt now
        worker = DeliveryWorker(lambda: bench.settings, clock=bench.clock,
                                gateway_factory=bench.gateway, held_s=window.held_s)
        self.addCleanup(worker.stop, 10)
        bench.say("t9", 2)
        worker.start()
        self.assertEqual(worker.drain(0.3)["delivered"], 0)  # not one step while held
        self.assertEqual(bench.server_texts("t9"), [])
        window.model_called()
        self.assertEqual(worker.drain(30)["delivered"], 2)

    def test_drain_without_a_thread_runs_steps_inline_and_respects_its_deadline(self):
        bench = Bench(self)
        bench.say("t2", 3)
        self.assertEqual(bench.worker.drain(0), {"delivered": 0, "dead": 0, "retried": 0})
        self.assertEqual(bench.worker.drain(30)["delivered"], 3)

    def test_start_stop_50_times_leaves_threads_and_file_handles_at_baseline(self):
        bench = Bench(self)
        bench.say("t3", 1)
        bench.worker.step()  # warm imports and the first client outside the measurement
        bench.worker.stop(5)
        threads, handles = threading.active_count(), len(os.listdir("/proc/self/fd"))
        for _ in range(50):
            worker = DeliveryWorker(lambda: bench.settings, gateway_factory=bench.gateway,
                                    clock=bench.clock)
            worker.start()
            bench.say("t3", 1)
            worker.wake()
            worker.drain(10)
            self.assertTrue(worker.stop(10))
        self.assertEqual(threading.active_count(), threads)
        self.assertEqual(len(os.listdir("/proc/self/fd")), handles)
        self.assertEqual(len(bench.server_texts("t3")), 51)


class OlderRegistrar(threading.Thread):
    """A scope registrar as an older version of the plugin left it running: its drain answers a
    count, not what moved by outcome. A stand-in for a thread of code that is gone, not for ours."""

    def __init__(self) -> None:
        super().__init__(name="honcho-hub-scopes-older", daemon=True)
        setattr(self, lifecycle.WORKER_MARKER, True)
        self._stop_asked = threading.Event()

    def run(self) -> None:
        self._stop_asked.wait()

    def drain(self, timeout_s: float) -> int:
        return 0

    def stop(self, timeout_s: float) -> bool:
        self._stop_asked.set()
        self.join(timeout_s)
        return not self.is_alive()


class StopWorkersTest(unittest.TestCase):
    def test_a_thread_whose_drain_answers_another_shape_is_still_stopped(self):
        older = OlderRegistrar()
        older.start()
        self.addCleanup(older.stop, 10)
        report = lifecycle.stop_workers(drain_s=1.0)
        self.assertFalse(older.is_alive())
        self.assertEqual((report["workers"], report["stopped"]), (1, 1))


class EnsureWorkerTest(unittest.TestCase):
    def setUp(self):
        self.bench = Bench(self)
        self.hub = Hub(lambda: self.bench.settings, lambda: False)  # paused: no traffic
        # off the loop, as the first call's background start does
        self.assertTrue(self.hub.load_delivery())
        self.addCleanup(lambda: [w.stop(10) for w in lifecycle.plugin_workers()])

    def ensure(self):
        return self.hub.ensure_worker()

    def test_one_worker_per_process_and_it_comes_back_after_a_stop(self):
        first = self.ensure()
        self.assertIs(self.ensure(), first)
        self.assertEqual(len(lifecycle.plugin_workers()), 1)
        lifecycle.stop_workers(drain_s=0)
        second = self.ensure()
        self.assertIsNot(second, first)
        self.assertTrue(second.is_alive())
        self.assertEqual(len(lifecycle.plugin_workers()), 1)

    def test_pre_update_drains_the_real_worker_then_stops_it(self):
        self.bench.say("pu", 3)
        self.bench.enabled = False
        self.bench.worker.start()
        # the thread's own first step is over (paused): the drain below moves all
        self.bench.worker.drain(10)
        self.bench.enabled = True
        report = lifecycle.stop_workers(drain_s=5.0)
        self.assertEqual((report["drained"], report["stopped"]), (3, report["workers"]))
        self.assertFalse(self.bench.worker.is_alive())
        self.assertEqual(len(self.bench.server_texts("pu")), 3)

    def test_a_worker_of_this_generation_is_adopted_after_module_globals_reset(self):
        first = self.ensure()
        # as after a re-import of the plugin
        self.hub = Hub(lambda: self.bench.settings, lambda: False)
        self.assertIs(self.ensure(), first)

    def test_a_worker_of_an_older_generation_is_stopped_before_a_new_one_starts(self):
        # another class object, as a re-imported module makes
        class OlderGeneration(DeliveryWorker):
            pass
        old = OlderGeneration(lambda: self.bench.settings, enabled=lambda: False)
        old.start()
        self.assertIsNone(self.ensure())  # asked to stop; never two at once
        old.join(10)
        new = self.ensure()
        self.assertIs(type(new), DeliveryWorker)
        self.assertEqual(lifecycle.plugin_workers(), [new])


class RegistrarAndWorkerTest(unittest.TestCase):
    def test_this_generations_busy_scope_registrar_neither_stops_nor_delays_the_worker(self):
        server = serve()
        # the registrar's first request is held until the server closes
        server.fake.fail(r".", kind="timeout")
        settings = build_settings({"outbox_path": temp_outbox_path(self), "api_url": server.url},
                                  {}, {})
        self.addCleanup(lambda: [w.stop(10) for w in lifecycle.plugin_workers()])
        the_hub = Hub(lambda: settings, lambda: False)
        registrar = the_hub.registrar()  # this generation's registrar, ...
        self.addCleanup(registrar.stop, 10)
        self.addCleanup(server.close)  # runs before the stop above: the held request ends
        self.assertTrue(the_hub.load_delivery())
        self.assertTrue(registrar.submit(settings, "chat-busy", "a0-busy"))
        self.assertEqual(server.fake.await_request(r".", 1, 10), 1)  # ... busy with a registration

        worker = the_hub.ensure_worker()
        self.assertIsInstance(worker, DeliveryWorker,
                              "started at once, not after the registrar ended")
        server.close()
        self.assertTrue(registrar.submit(settings, "chat-next", "a0-busy"),
                        "the registrar still takes work")
        self.assertIs(the_hub.registrar(), registrar, "and is the same, running thread")


def seed(path: str, api_url: str, sessions: int, per_session: int) -> None:
    """Queue per_session messages in each of `sessions` chats, interleaved in capture order."""
    box = Outbox(path, max_rows=100_000)
    box.enqueue_batches([[NewEvent(f"ev_{s}_{i}", f"{api_url}#agent-zero", "agent-zero",
                                   f"chat-{s}", "user", "user", f"{s}:{i}", time.time())]
                         for i in range(per_session) for s in range(sessions)])
    box.close()


class ProcessesTest(unittest.TestCase):
    def fake_honcho(self) -> ServerProcess:
        """The fake Honcho in a process of its own: one state for every worker process."""
        server = ServerProcess(CHILD_KEY)
        self.addCleanup(server.close)
        return server

    def test_a_step_that_begins_while_the_process_exits_ends_the_worker_quietly(self):
        path = temp_outbox_path(self)
        seed(path, "http://127.0.0.1:9", 1, 2)  # ready events: the step leases and would send them
        child = subprocess.run([sys.executable, CHILD, "exit", path, "http://127.0.0.1:9"],
                               capture_output=True, text=True, timeout=60,
                               cwd=tempfile.gettempdir())
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(json.loads(child.stdout), {"stopped": True})
        self.assertNotIn("Traceback", child.stderr)

    def test_a_killed_processs_lease_is_delivered_by_another_after_expiry_exactly_once(self):
        # Killed while the request hangs before the server stored it, and after (the batch is
        # held, the answer never came): either way the survivor delivers every event once.
        for stored_first in (False, True):
            with self.subTest(server_stored_the_batch=stored_first):
                server, path = self.fake_honcho(), temp_outbox_path(self)
                seed(path, server.url, 1, 5)
                server.control("/_fake/fail", {"match": "/messages$", "kind": "timeout",
                                               "after_store": stored_first})
                child = subprocess.Popen([sys.executable, CHILD, "hang", path, server.url],
                                         cwd=tempfile.gettempdir())
                seen = server.control("/_fake/await", {"match": "/messages$", "count": 1,
                                                       "timeout": 60})["seen"]
                self.assertEqual(seen, 1)
                os.kill(child.pid, signal.SIGKILL)
                child.wait(30)
                self.assertEqual(Outbox(path).stats()["counts"]["leased"], 5)
                settings = build_settings({"outbox_path": path, "api_url": server.url},
                                          {"HONCHO_API_KEY": CHILD_KEY}, {})
                # Bound as defaults: the survivor outlives this iteration (stopped at cleanup).
                # `later`: the lease has expired by then
                later = lambda lease_s=settings.lease_s: time.time() + lease_s + 1  # noqa: E731
                survivor = DeliveryWorker(lambda settings=settings: settings, clock=later,
                                          rng=random.Random(3))
                self.addCleanup(survivor.stop, 10)
                self.assertEqual(survivor.drain(60)["delivered"], 5)
                stored = [m["content"] for m in server.control("/_fake/messages")]
                self.assertEqual(stored, [f"0:{i}" for i in range(5)])

    def test_four_processes_drain_one_outbox_exactly_once_in_order(self):
        server, path = self.fake_honcho(), temp_outbox_path(self)
        seed(path, server.url, 20, 20)
        children = [subprocess.Popen([sys.executable, CHILD, "drain", path, server.url, "120"],
                                     stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
                    for _ in range(4)]
        moved = [json.loads(child.communicate(timeout=300)[0]) for child in children]
        self.assertEqual(sum(m["delivered"] for m in moved), 400)
        stored = server.control("/_fake/messages")
        ids = [m["metadata"]["event_id"] for m in stored]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertEqual(len(ids), 400)
        for s in range(20):
            contents = [m["content"] for m in stored if m["session_id"] == f"chat-{s}"]
            self.assertEqual(contents, [f"{s}:{i}" for i in range(20)])


if __name__ == "__main__":
    unittest.main()
