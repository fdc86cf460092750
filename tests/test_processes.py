"""Real worker processes draining one outbox, seen and coordinated through it: each appears in
status (pid, host, state, counters), a killed one goes stale and then expires, the
unreachable-server circuit one opens pauses the others until its open-until and a success anywhere
closes it, while an auth failure pauses only the process that met it.

Each worker runs in a process of its own (process_child.py) against one fake Honcho served over
loopback by this process; the test sets every worker's clocks at each step, so nothing waits for
time to pass."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import unittest

from fake_honcho import FakeHoncho
from hub_testkit import ROOT
from loopback import serve
from outbox_helpers import enqueue, event, temp_outbox_path

from honcho_hub.ops.status import build_status, gather_parts, status_text
from honcho_hub.runtime import ProcessState
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import Outbox

CHILD = os.path.join(ROOT, "tests", "process_child.py")
KEY = "hch-processes-key-97531"
T0 = 1_800_000_000.0


class HeldFake(FakeHoncho):
    """The fake Honcho, holding one session's add-messages requests until the test releases them;
    held before the fake takes its lock, so every other request is answered meanwhile."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.held_session: str | None = None
        self.holding, self.release = threading.Event(), threading.Event()

    def handle(self, method, path, query, body, headers):
        if (self.held_session is not None
                and path.endswith(f"/sessions/{self.held_session}/messages")):
            self.holding.set()
            self.release.wait(60)
        return super().handle(method, path, query, body, headers)


class Child:
    """A worker process (process_child.py), stepped at the times the test gives."""

    def __init__(self, test, path: str, url: str, key: str) -> None:
        self.process = subprocess.Popen([sys.executable, CHILD, path, url, key],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=tempfile.gettempdir())
        test.addCleanup(self.close)
        self.pid = self.process.pid
        self._owner: str | None = None

    def ready(self) -> str:
        """The worker's owner id, from the hello the process prints once it has imported the SDK."""
        if self._owner is None:
            self._owner = self._answer()["owner"]
        return self._owner

    owner = property(ready)

    def begin_step(self, now: float) -> None:
        self.ready()
        self._send({"step": now})

    def end_step(self) -> dict:
        return self._answer()

    def step(self, now: float) -> dict:
        self.begin_step(now)
        return self.end_step()

    def stop(self) -> dict:
        self.ready()
        self._send({"stop": True})
        answer = self._answer()
        self.process.wait(30)
        return answer

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self.process.stdin.close()
        self.process.stdout.close()

    def _send(self, command: dict) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"worker process {self.process.pid} ended without answering")
        return json.loads(line)


class Place:
    """One fake Honcho over loopback, one outbox, and what this (parent) process sees of them."""

    def __init__(self, test, fake: FakeHoncho | None = None) -> None:
        self.test = test
        self.fake = fake or FakeHoncho(api_key=KEY)
        self.server = serve(self.fake)
        test.addCleanup(self.server.close)
        self.path = temp_outbox_path(test)
        self.settings = build_settings({"outbox_path": self.path, "api_url": self.server.url},
                                       {"HONCHO_API_KEY": KEY}, {})

    def seed(self, session: str, n: int = 3) -> None:
        """Queue n messages of one chat for the place's destination."""
        box = Outbox(self.path)
        try:
            enqueue(box, [event(i, session, dest=self.settings.destination()) for i in range(n)])
        finally:
            box.close()

    def child(self, key: str = KEY) -> Child:
        return Child(self.test, self.path, self.server.url, key)

    def children(self, *keys: str) -> list[Child]:
        """Worker processes started together (they import the SDK side by side), one per key."""
        return [self.child(key) for key in keys]

    def status(self, now: float) -> dict:
        """The status this process shows (it runs no worker of its own), read at wall time `now`."""
        return build_status(self.settings, gather_parts(self.settings, ProcessState()), now)

    def workers(self, now: float) -> dict[int, dict]:
        return {w["pid"]: w for w in self.status(now)["processes"]["workers"]}

    def adds(self, session: str) -> int:
        """Add-messages requests that reached the server for this chat."""
        return (self.fake.count(f"/sessions/{session}/messages")
                - self.fake.count(f"/sessions/{session}/messages/"))

    def stored_owners(self) -> set[str]:
        conn = sqlite3.connect(self.path)
        try:
            return {row[0] for row in conn.execute("SELECT owner FROM worker_processes")}
        finally:
            conn.close()


class ProcessesInStatusTest(unittest.TestCase):
    def test_two_processes_draining_one_outbox_both_appear_in_status_until_one_stops(self):
        place = Place(self)
        place.seed("chat-a")
        place.seed("chat-b")
        first, second = place.children(KEY, KEY)
        self.assertEqual(first.step(T0)["delivered"], 6)
        self.assertEqual(second.step(T0 + 1)["leased"], 0)
        status = place.status(T0 + 3)
        workers = {w["pid"]: w for w in status["processes"]["workers"]}
        self.assertEqual(set(workers), {first.pid, second.pid})
        for pid, state, sent, beat_age in ((first.pid, "running", 6, 3.0),
                                           (second.pid, "idle", 0, 2.0)):
            with self.subTest(pid=pid):
                worker = workers[pid]
                self.assertEqual((worker["host"], worker["this_process"], worker["stale"]),
                                 (socket.gethostname(), False, False))
                self.assertEqual((worker["state"], worker["sent"], worker["beat_age_s"],
                                  worker["started_age_s"]),
                                 (state, sent, beat_age, beat_age))
                self.assertEqual((worker["circuit"], worker["failed"], worker["last_error_code"]),
                                 (None, 0, None))
        self.assertEqual(workers[first.pid]["last_success_age_s"], 3.0)
        self.assertEqual((status["processes"]["live"], status["processes"]["stale"]), (2, 0))
        self.assertIn(f"pid {first.pid}", status_text(status))
        self.assertNotIn(place.path, json.dumps(status))

        self.assertEqual(second.stop(), {"stopped": True})
        self.assertEqual(set(place.workers(T0 + 4)), {first.pid}, "a clean stop removes its row")

    def test_a_killed_process_goes_stale_then_hidden_and_the_next_prune_deletes_its_row(self):
        place = Place(self)
        place.seed("chat-a")
        killed, survivor = place.children(KEY, KEY)
        killed.step(T0)
        killed.kill()
        alive = place.workers(T0 + 1)[killed.pid]
        self.assertEqual((alive["stale"], alive["state"]), (False, "running"))
        stale_after = alive["stale_after_s"]
        self.assertEqual(place.workers(T0 + stale_after)[killed.pid]["stale"], False)
        stale = place.workers(T0 + stale_after + 1)[killed.pid]
        self.assertEqual((stale["stale"], stale["state"]), (True, "running"))
        self.assertEqual(place.status(T0 + stale_after + 1)["processes"]["stale"], 1)
        self.assertIn("stale", status_text(place.status(T0 + stale_after + 1)))
        two_days = T0 + 2 * 86_400
        self.assertNotIn(killed.pid, place.workers(two_days))
        self.assertIn(killed.owner, place.stored_owners(), "hidden, but kept until a prune")
        survivor.step(two_days)  # a worker's first step prunes
        self.assertEqual(place.stored_owners(), {survivor.owner})


class SharedCircuitTest(unittest.TestCase):
    def test_a_server_unreachable_to_one_process_pauses_the_others_till_the_shared_open_until(self):
        place = Place(self)
        place.seed("chat-a")
        place.fake.fail(match=r"/sessions/chat-a/messages$", kind="reset")
        first, second = place.children(KEY, KEY)
        failed = first.step(T0)
        self.assertEqual((failed["delivered"], failed["circuit"]["kind"]), (0, "unreachable"))
        open_until = failed["circuit"]["open_until"]
        self.assertGreater(open_until, T0 + 1)
        place.seed("chat-b")
        for now in (T0 + 1, open_until - 0.5):
            with self.subTest(now=now - T0):
                paused = second.step(now)
                self.assertEqual((paused["leased"], paused["state"]), (0, "circuit_open"))
                self.assertEqual((paused["circuit"]["kind"], paused["circuit"]["open_until"]),
                                 ("unreachable", open_until))
        self.assertEqual(place.adds("chat-b"), 0)
        status = place.status(T0 + 1)
        self.assertEqual(status["processes"]["shared_circuit"],
                         {"reason": "reset", "retry_in_s": round(open_until - (T0 + 1), 1),
                          "failures": 1})
        self.assertEqual(place.workers(T0 + 1)[first.pid]["circuit"]["kind"], "unreachable")
        self.assertIn("Honcho unreachable (reset)", status["health_reasons"])

        # due: one probe, then, once it succeeded, everything
        probed = second.step(open_until + 0.1)
        self.assertEqual((probed["delivered"], probed["circuit"]), (6, None))
        self.assertIsNone(place.status(open_until + 1)["processes"]["shared_circuit"])
        self.assertEqual(len(place.fake.messages), 6)

    def test_a_success_in_one_process_after_the_opening_closes_the_shared_circuit_for_all(self):
        place = Place(self, HeldFake(api_key=KEY))
        opener, other = place.children(KEY, KEY)
        place.seed("chat-b")
        place.fake.held_session = "chat-b"
        other.begin_step(T0 + 2)  # its batch is on the wire (held) while the other process fails
        self.assertTrue(place.fake.holding.wait(60))
        place.seed("chat-a")
        place.fake.fail(match=r"/sessions/chat-a/messages$", kind="reset")
        failed = opener.step(T0 + 1)
        self.assertEqual(failed["circuit"]["kind"], "unreachable")
        own_open_until = failed["circuit"]["open_until"]
        self.assertGreater(own_open_until, T0 + 3)
        self.assertIsNotNone(place.status(T0 + 1.5)["processes"]["shared_circuit"])
        place.fake.release.set()
        self.assertEqual(other.end_step()["delivered"], 3)  # at T0 + 2: after the opening at T0 + 1
        # its next step closes the shared circuit
        self.assertEqual(other.step(T0 + 2.5)["leased"], 0)
        self.assertIsNone(place.status(T0 + 2.5)["processes"]["shared_circuit"])

        place.seed("chat-c")
        # before its own open-until: it follows the closed shared circuit
        resumed = opener.step(T0 + 2.6)
        self.assertLess(T0 + 2.6, own_open_until)
        self.assertEqual((resumed["delivered"], resumed["circuit"]), (3, None))

    def test_an_auth_failure_in_one_process_does_not_pause_the_other(self):
        place = Place(self)
        place.seed("chat-a")
        place.seed("chat-b")
        stale_key, good_key = place.children("hch-stale-key-000000000", KEY)
        refused = stale_key.step(T0)
        self.assertEqual((refused["delivered"], refused["circuit"]["kind"]), (0, "auth"))
        sent = good_key.step(T0 + 1)
        self.assertEqual((sent["delivered"], sent["circuit"]), (6, None))
        status = place.status(T0 + 2)
        self.assertIsNone(status["processes"]["shared_circuit"])
        workers = {w["pid"]: w for w in status["processes"]["workers"]}
        self.assertEqual(workers[stale_key.pid]["circuit"]["kind"], "auth")
        self.assertEqual(workers[stale_key.pid]["last_error_code"], "auth_401")
        self.assertEqual((workers[good_key.pid]["circuit"], workers[good_key.pid]["sent"]),
                         (None, 6))


if __name__ == "__main__":
    unittest.main()
