"""One deadline for every call a person or the agent waits on: the memory tool's verbs, the full
status, the card, the inspector, Test API + MCP and the recall load a turn stopped waiting for,
against a Honcho that answers slowly but within every read timeout.

In fake time (tests/trickle.py: each byte of an answer costs a step on a manual clock), each path
ends at its deadline, plus at most the one step that crossed it, with a "timed out" answer, and
ends the request itself (the answer's body is closed before it was read to the end; a request due
after the deadline is never sent). Over loopback HTTP against a server trickling in real time
(tests/loopback.py), the sidebar's full status and the check end at their deadlines and no thread
goes on reading or writing afterwards.
"""

import asyncio
import json
import threading
import unittest

import httpx
from api_world import api_handler, api_world
from fake_honcho import FakeHoncho
from idle import wait_idle
from outbox_helpers import ManualClock, temp_outbox_path
from trickle import Trickling

from honcho_hub import runtime
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.ops import inspector
from honcho_hub.ops import operator as operations
from honcho_hub.ops.inspector import Inspector
from honcho_hub.ops.status import gather_parts
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.tool.actions import ActionContext, card_view, run_action

KEY = "hch-deadline-key-97531"
SESSION = "chat-T0000001"
STEP_S = 1.0  # what one byte of an answer costs on the fake clock
# the longest a test waits for a path over real loopback HTTP (its deadline is under 1 s)
WAIT_S = 20.0


class TricklingBench:
    """The real SDK over the fake Honcho, each answer trickled on a manual clock; the settings' own
    deadlines."""

    def __init__(self, test, step_s=STEP_S, **plugin):
        self.fake = FakeHoncho(api_key=KEY)
        self.clock = ManualClock(1_000.0)
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(test), **plugin},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.trickling = Trickling(self.fake.transport(), self.clock, step_s)
        self.gateway = self.gateway_for(self.settings)
        test.addCleanup(self.gateway.close)
        self.actions = ActionContext(settings=self.settings, session_id=SESSION,
                                     gateway=self.gateway, monotonic=self.clock)

    def gateway_for(self, settings, timeout_s=None):
        return HonchoGateway.for_settings(
            settings, timeout_s, http_client_factory=lambda: httpx.Client(transport=self.trickling))

    def conclude(self, n):
        for i in range(n):
            self.fake.conclusions[f"c{i:04d}"] = {
                "id": f"c{i:04d}",
                "content": f"The user keeps sailing boat number {i} at the marina",
                "observer_id": "agent-zero", "observed_id": "user", "session_id": None,
                "created_at": "2026-01-01T00:00:00Z", "workspace_id": "agent-zero"}

    def elapsed(self, start):
        return self.clock() - start

    def paths(self):
        return [path for _, path in self.fake.requests]


class ToolVerbDeadlineTest(unittest.TestCase):
    def test_search_ends_at_two_sdk_timeouts_with_a_timed_out_answer(self):
        bench = TricklingBench(self, sdk_timeout_s=5)
        bench.conclude(5)
        start = bench.clock()
        result = run_action("search", {"query": "boats"}, bench.actions)
        self.assertEqual(result.ok, False)
        self.assertIn("timed out", result.text)
        self.assertLessEqual(bench.elapsed(start), 2 * 5 + STEP_S)
        self.assertTrue(bench.trickling.bodies[-1].cut, "the answer was closed before its end")

    def test_ask_ends_at_ask_timeout_s_every_request_of_it_counted_together(self):
        bench = TricklingBench(self, ask_timeout_s=5)
        bench.fake.dialectic_answer = "The user keeps two sailing boats at the marina. " * 4
        start = bench.clock()
        result = run_action("ask", {"query": "What does the user keep?"}, bench.actions)
        self.assertEqual(result.ok, False)
        self.assertIn("timed out", result.text)
        self.assertLessEqual(bench.elapsed(start), 5 + STEP_S)
        self.assertTrue(bench.trickling.bodies[-1].cut)

    def test_a_request_due_after_the_deadline_is_never_sent(self):
        # The profile's replacement reads the card first: that read uses the whole deadline, so
        # the write that would follow is not sent at all.
        bench = TricklingBench(self, sdk_timeout_s=5)
        bench.fake.cards[("agent-zero", "user")] = [
            "INSTRUCTION: reply in English, briefly and kindly"] * 3
        result = run_action("profile", {"facts": ["Keeps two boats"]}, bench.actions)
        self.assertIn("timed out", result.text)
        self.assertFalse(any(method == "PUT" for method, _ in bench.fake.requests),
                         bench.fake.requests)


class RecallLoadDeadlineTest(unittest.TestCase):
    def test_a_recall_load_its_turn_stopped_waiting_for_ends_at_two_sdk_timeouts(self):
        # The turn (here the tool's recall) waits recall_timeout_s; the load goes on filling the
        # cache for a repeat of the question, but no longer than the deadline of any other call.
        bench = TricklingBench(self, sdk_timeout_s=3)
        bench.fake.representations[("agent-zero", "user")] = (
            "The user keeps two sailing boats at the marina. " * 4)
        recaller = Recaller(lambda s: bench.gateway_for(s, s.recall_timeout_s),
                            monotonic=bench.clock)
        self.addCleanup(recaller.close)
        recaller.recall(bench.settings, SESSION, "which boats do I keep?", "{{memory}}", wait_s=0.0,
                        deliberate=True)
        self.assertTrue(wait_idle(WAIT_S, recaller))
        # Loads run side by side on one clock: each read at most the bytes its deadline holds,
        # and was cut.
        self.assertEqual([(body.cut, body.sent <= 2 * 3 / STEP_S + 1)
                          for body in bench.trickling.bodies],
                         [(True, True)] * len(bench.trickling.bodies))


class StatusDeadlineTest(unittest.TestCase):
    def test_the_full_statuss_honcho_reads_end_together_at_check_timeout_s(self):
        bench = TricklingBench(self, check_timeout_s=4)
        recall_gateway = bench.gateway_for(bench.settings, bench.settings.recall_timeout_s)
        self.addCleanup(recall_gateway.close)
        start = bench.clock()
        parts = gather_parts(bench.settings, runtime.process_state(), session_id=SESSION,
                             scope_id="a0-alpha",
                             scope_backfill=recall_gateway.scope_status,
                             session_peers=recall_gateway.session_peer_flags,
                             deadline_s=bench.settings.check_timeout_s, monotonic=bench.clock)
        self.assertLessEqual(bench.elapsed(start), 4 + STEP_S)
        self.assertEqual(parts.scope_problem, "scope status unavailable: timed_out")
        # not read: the deadline passed
        self.assertEqual((parts.session_peers, parts.honcho_timed_out), ({}, True))
        self.assertTrue(bench.trickling.bodies[-1].cut)


class CardDeadlineTest(unittest.TestCase):
    def test_the_sidebars_card_ends_at_two_sdk_timeouts(self):
        bench = TricklingBench(self, sdk_timeout_s=3)
        bench.fake.cards[("agent-zero", "user")] = [
            "ATTRIBUTE: keeps two sailing boats at the marina"] * 4
        start = bench.clock()
        self.assertEqual(card_view(bench.gateway, bench.settings, monotonic=bench.clock),
                         {"ok": False, "error": "timed_out"})
        self.assertLessEqual(bench.elapsed(start), 2 * 3 + STEP_S)
        self.assertTrue(bench.trickling.bodies[-1].cut)


class InspectorDeadlineTest(unittest.TestCase):
    def test_the_inspectors_view_ends_at_two_sdk_timeouts_for_all_its_parts(self):
        bench = TricklingBench(self, sdk_timeout_s=4, recall_enabled=False)
        bench.fake.cards[("agent-zero", "user")] = [
            "ATTRIBUTE: keeps two sailing boats at the marina"] * 4
        bench.conclude(3)
        ins = Inspector(bench.actions, recall=None, template="")  # type: ignore[arg-type]
        start = bench.clock()
        shown = inspector.view(ins)
        self.assertLessEqual(bench.elapsed(start), 2 * 4 + STEP_S)
        self.assertEqual((shown["card"], shown["conclusions"]),
                         ({"error": "timed_out"}, {"error": "timed_out"}))
        self.assertFalse(any("/conclusions/list" in path for path in bench.paths()),
                         "the listing was never sent")


class CheckDeadlineTest(unittest.TestCase):
    def test_the_api_and_the_mcp_check_each_end_at_check_timeout_s(self):
        bench = TricklingBench(self, check_timeout_s=3, mcp_url="https://mcp.honcho.test/mcp")
        honcho = bench.fake.transport()

        def answer(request):
            if request.url.host != "mcp.honcho.test":
                return honcho.handle_request(request)
            message = json.loads(request.content)
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": "2025-06-18",
                "serverInfo": {"name": "Honcho MCP Server", "version": "3.0.0"},
                "capabilities": {}}})
        trickling = Trickling(httpx.MockTransport(answer), bench.clock, STEP_S)
        start = bench.clock()
        result = operations.check(bench.settings,
                                  lambda **kw: httpx.Client(transport=trickling, **kw),
                                  monotonic=bench.clock)
        self.assertEqual((result["api"]["error"], result["mcp"]["error"]), ("timed_out", "timeout"))
        self.assertLessEqual(bench.elapsed(start), 2 * (3 + STEP_S))
        self.assertTrue(all(body.cut for body in trickling.bodies))


class TricklingServerTest(unittest.TestCase):
    """Over loopback HTTP, a Honcho whose answers come a byte every 20 ms (each read far within its
    timeout)."""

    def setUp(self):
        self.fake, self.server, self.host = api_world(self, KEY)
        self.server.close()  # the same fake, served again trickling
        from loopback import serve

        self.server = serve(self.fake, trickle_s=0.02)
        self.addCleanup(self.server.close)
        self.host.config.update(api_url=self.server.url, mcp_url=self.server.url,
                                check_timeout_s=0.5)

    def call_in_thread(self, name, body):
        """The handler's answer, from a thread of its own; fails (never hangs) when it takes over
        WAIT_S."""
        handler, answers = api_handler(self.host, name), []
        runner = threading.Thread(
            target=lambda: answers.append(asyncio.run(handler().process(body, None))),
            name=f"test-{name}")
        runner.start()
        runner.join(WAIT_S)
        self.assertFalse(runner.is_alive(), f"{name} still waiting on Honcho after {WAIT_S:.0f} s")
        return answers[0]

    def assert_no_thread_left(self, baseline):
        """Every thread started since `baseline` ends: none goes on reading from (or writing to)
        Honcho."""
        for thread in [t for t in threading.enumerate() if t not in baseline]:
            thread.join(WAIT_S)
            self.assertFalse(thread.is_alive(), f"{thread.name} is still running")

    def test_the_sidebars_full_status_times_out_and_leaves_no_reader(self):
        # builds the Hub's parts
        self.call_in_thread("honcho_status", {"context": "Ab3dE6gH", "light": True})
        baseline = set(threading.enumerate())
        status = self.call_in_thread("honcho_status", {"context": "Ab3dE6gH"})["status"]
        self.assertEqual((status["identity"]["observation"]["server"],
                          status["identity"]["observation"]["timed_out"]),
                         ({}, True))
        self.assert_no_thread_left(baseline)

    def test_test_api_and_mcp_times_out_and_leaves_no_reader(self):
        self.call_in_thread("honcho_status", {"light": True})
        baseline = set(threading.enumerate())
        result = self.call_in_thread("honcho_action", {"action": "check"})["result"]
        self.assertEqual(result["api"]["error"], "timed_out")
        self.assert_no_thread_left(baseline)


if __name__ == "__main__":
    unittest.main()
