"""Every fault a deployment sees, against a fake Honcho behind httpx.MockTransport. No sleeps."""

import email.utils
import json
import unittest

from delivery_helpers import KEY, Bench
from hub_testkit import checkout_text
from outbox_helpers import enqueue, hold_write_lock, release_lock

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.capture.writer import CaptureWriter
from honcho_hub.gateway.registrar import ScopeRegistrar
from honcho_hub.ops import operator as operations
from honcho_hub.recall.recaller import Recaller
from honcho_hub.storage.outbox import NewEvent, Outbox
from honcho_hub.tool.actions import ActionContext, run_action

TEMPLATE = checkout_text("prompts", "honcho.recall_block.md")


class HappyPathTest(unittest.TestCase):
    def test_sessions_arrive_in_order_with_capture_time_ids_and_observation_set_first(self):
        bench = Bench(self, batch_size=7)
        texts = {chat: bench.say(chat, 30) for chat in ("a1", "b2", "c3")}
        bench.say("a1", 2, role=Role.AGENT, text="reply")
        bench.run_until_idle()
        for chat, said in texts.items():
            self.assertEqual(bench.server_texts(chat)[:30], said)
        self.assertEqual(bench.server_texts("a1")[30:], ["reply a1 0", "reply a1 1"])
        self.assertEqual(bench.states(), {"delivered": 92})
        first = bench.fake.session_messages("chat-a1")[0]
        self.assertEqual(first["metadata"]["event_id"][:3], "ev_")
        # the manual clock's time
        self.assertTrue(first["created_at"].startswith("2027-01-15T08:00:00"))
        session = bench.fake.sessions[("agent-zero", "chat-a1")]
        self.assertEqual(session["peers_set_before_messages"],
                         {"user": {"observe_me": True, "observe_others": True},
                          "agent-zero": {"observe_me": False, "observe_others": True}})
        # 32 events in batches of 7
        self.assertEqual(bench.fake.count("/sessions/chat-a1/messages"), 5)

    def test_the_key_travels_only_as_a_bearer_header_to_the_configured_url(self):
        api, mcp = "https://honcho-key.test", "https://mcp-key.test"
        bench = Bench(self, api_url=api, mcp_url=mcp)
        # Every component that talks to Honcho, each through a client whose requests are recorded:
        bench.capture_service.capture(
            CaptureRequest("k1", Role.USER, "k-1", "I like tea", "a0-key"), bench.settings)
        bench.run_until_idle()  # delivery, with the session joining its scope first
        self.assertEqual(bench.states(), {"delivered": 1})
        self.assertTrue(ScopeRegistrar(bench.gateway).register(bench.settings, "chat-k2", "a0-key"))
        recaller = Recaller(lambda s: bench.gateway(s, s.recall_timeout_s))
        self.addCleanup(recaller.close)
        self.assertEqual(recaller.recall(bench.settings, "chat-k1", "what do I drink?", TEMPLATE,
                                         "a0-key").source, "fresh")
        ctx = ActionContext(settings=bench.settings, session_id="chat-k1",
                            gateway=bench.gateway(bench.settings),
                            recall=lambda q, scope: recaller.recall(bench.settings, "chat-k1", q,
                                                                    TEMPLATE, scope).block)
        for action, args in (("recall", {"query": "tea again please"}),
                             ("search", {"query": "tea"}),
                             ("search", {"query": "tea", "target": "workspace", "scope": "a0-key"}),
                             ("ask", {"query": "What does the user drink?"}),
                             ("remember", {"content": "Likes tea"}),
                             ("dream", {})):
            self.assertTrue(run_action(action, args, ctx).ok, action)
        check = operations.check(bench.settings, http_client_factory=bench.http_client)
        self.assertTrue(check["api"]["ok"], check)
        paths = [request.url.path for request in bench.sent]
        for fragment in ("/sessions/chat-k1/messages", "/scopes/a0-key/sessions", "/context",
                         "/chat", "/conclusions", "/search", "/schedule_dream"):
            self.assertTrue(any(fragment in path for path in paths), fragment)
        # the MCP check went out
        self.assertIn("mcp-key.test", {request.url.host for request in bench.sent})
        for request in bench.sent:
            with self.subTest(request=f"{request.method} {request.url}"):
                headers = {k.lower(): v for k, v in request.headers.items()}
                bearer = headers.pop("authorization", None)
                self.assertNotIn(KEY, str(request.url) + json.dumps(headers)
                                 + request.content.decode("utf-8", "replace"))
                # another host than the API's: the MCP check has no key
                if request.url.host == "mcp-key.test":
                    self.assertEqual((request.url.scheme, request.url.path, bearer),
                                     ("https", "/", None))
                else:
                    self.assertTrue(str(request.url).startswith(api + "/"))
                    self.assertEqual(bearer, f"Bearer {KEY}")


class ServerErrorTest(unittest.TestCase):
    def test_5xx_bursts_back_off_burn_attempts_and_deliver_once(self):
        bench = Bench(self)
        texts = bench.say("s1", 3)
        for status in (500, 502, 503):
            bench.fake.fail(status=status)
        for expected_attempts in (1, 2, 3):
            bench.worker.step()
            rows = bench.rows()
            self.assertEqual({r[2] for r in rows}, {expected_attempts})
            self.assertGreater(rows[0][4], bench.clock.now - 1)  # backoff: not before now
            bench.clock.advance(3600)
        bench.run_until_idle()
        bench.assert_exactly_once("s1", texts)

    def test_exhausted_attempts_dead_letter(self):
        bench = Bench(self, max_attempts=3)
        bench.say("s2", 2)
        bench.fake.fail(status=503, times=10)
        for _ in range(3):
            bench.worker.step()
            bench.clock.advance(3600)
        self.assertEqual(bench.states(), {"dead": 2})
        self.assertEqual({r[3] for r in bench.rows()}, {"http_503"})
        self.assertEqual(bench.fake.session_messages("chat-s2"), [])

    def test_a_5xx_after_the_server_stored_the_batch_is_reconciled_not_resent(self):
        bench = Bench(self)
        texts = bench.say("s3", 4)
        bench.fake.fail(status=502, after_store=True)
        bench.worker.step()
        bench.clock.advance(3600)
        bench.run_until_idle()
        bench.assert_exactly_once("s3", texts)
        self.assertEqual(bench.worker.state.metrics.reconciled, 4)


class RateLimitTest(unittest.TestCase):
    def test_429_honours_retry_after_in_seconds_and_as_a_date_without_burning_attempts(self):
        for header, wait in (("120", 120.0), (None, None)):
            with self.subTest(header=header or "http-date"):
                bench = Bench(self)
                texts = bench.say("r1", 2)
                if header is None:  # the SDK turns an HTTP date into seconds from the real clock
                    import time
                    header = email.utils.formatdate(time.time() + 300, usegmt=True)
                    wait = 300.0
                bench.fake.fail(status=429, retry_after=header)
                bench.worker.step()
                rows = bench.rows()
                self.assertEqual({r[2] for r in rows}, {0})
                self.assertAlmostEqual(rows[0][4], bench.clock.now + wait, delta=5)
                bench.worker.step()
                self.assertEqual(bench.server_texts("r1"), [])  # not before Retry-After
                bench.clock.advance(wait + 1)
                bench.run_until_idle()
                bench.assert_exactly_once("r1", texts)

    def test_retry_after_is_capped(self):
        bench = Bench(self, retry_after_cap_s=60)
        bench.say("r2", 1)
        bench.fake.fail(status=429, retry_after="86400")
        bench.worker.step()
        self.assertAlmostEqual(bench.rows()[0][4], bench.clock.now + 60, delta=0.01)


class UnreachableTest(unittest.TestCase):
    def test_a_connection_reset_opens_the_circuit_without_burning_attempts(self):
        bench = Bench(self)
        texts = bench.say("u1", 3)
        bench.fake.fail(kind="reset")
        bench.worker.step()
        self.assertEqual(
            bench.worker.state.snapshot()["circuits"]["https://honcho.test#agent-zero"]["kind"],
            "unreachable")
        self.assertEqual({r[2] for r in bench.rows()}, {0})
        self.assertEqual(bench.worker.step().state, "circuit_open")
        bench.clock.advance(600)
        bench.run_until_idle()
        bench.assert_exactly_once("u1", texts)
        self.assertEqual(bench.worker.state.snapshot()["circuits"], {})

    def test_a_read_timeout_after_the_server_stored_the_batch_leaves_no_duplicate(self):
        bench = Bench(self)
        texts = bench.say("u2", 5)
        bench.fake.fail(kind="timeout", after_store=True)
        bench.worker.step()
        self.assertEqual(len(bench.server_texts("u2")), 5)  # stored, but the client never heard
        self.assertEqual({r[3] for r in bench.rows()}, {"timeout"})
        bench.clock.advance(600)
        bench.run_until_idle()
        bench.assert_exactly_once("u2", texts)

    def test_a_one_hour_outage_dead_letters_nothing_and_everything_arrives_after(self):
        bench = Bench(self)
        texts = bench.say("u3", 10)
        bench.fake.fail(kind="connect", times=10_000)
        outage_end = bench.clock.now + 3600
        steps_with_traffic = 0
        while bench.clock.now < outage_end:
            if bench.worker.step().leased:
                steps_with_traffic += 1
            bench.clock.advance(30)
            texts += bench.say("u3", 1, text="during outage") if steps_with_traffic == 3 else []
        self.assertNotIn("dead", bench.states())
        self.assertEqual({r[2] for r in bench.rows()}, {0})
        self.assertLess(steps_with_traffic, 40)  # the circuit backs off instead of hammering
        bench.fake.faults.clear()
        bench.clock.advance(600)
        bench.run_until_idle()
        bench.assert_exactly_once("u3", texts)


class AuthTest(unittest.TestCase):
    def test_401_opens_the_auth_circuit_until_a_fixed_key_is_read_again(self):
        bench = Bench(self, auth_probe_interval_s=60)
        texts = bench.say("k2", 3)
        bench.fake.api_key = "rotated-key-987654321"
        bench.worker.step()
        snapshot = bench.worker.state.snapshot()
        self.assertEqual(snapshot["circuits"]["https://honcho.test#agent-zero"]["code"], "auth_401")
        self.assertEqual(bench.worker.step().state, "circuit_open")
        requests = len(bench.fake.requests)
        bench.clock.advance(61)
        bench.worker.step()  # one probe, still the old key
        self.assertEqual(len(bench.fake.requests), requests + 1)
        bench.secrets["HONCHO_API_KEY"] = "rotated-key-987654321"  # fixed under Settings → Secrets
        bench.clock.advance(61)
        bench.run_until_idle()
        bench.assert_exactly_once("k2", texts)
        self.assertEqual({r[2] for r in bench.rows()}, {0})
        self.assertNotIn(KEY, repr(snapshot))

    def test_403_is_an_auth_circuit_and_dead_letters_nothing(self):
        bench = Bench(self)
        bench.say("k3", 2)
        bench.fake.fail(status=403, times=5)
        for _ in range(5):
            bench.worker.step()
            bench.clock.advance(61)
        self.assertEqual(bench.states(), {"pending": 2})
        self.assertEqual(bench.worker.state.metrics.last_error_code, "auth_403")


class PermanentTest(unittest.TestCase):
    def test_one_bad_event_in_the_middle_is_isolated_and_the_rest_arrive_in_order(self):
        bench = Bench(self, batch_size=20)
        texts = (bench.say("p1", 9) + bench.say("p1", 1, text="POISON")
                 + bench.say("p1", 10, text="after"))
        bench.fake.reject_marker = "POISON"
        bench.run_until_idle()
        self.assertEqual(bench.server_texts("p1"), [t for t in texts if "POISON" not in t])
        dead = [r for r in bench.rows() if r[1] == "dead"]
        self.assertEqual([(r[3], r[2]) for r in dead], [("http_422", 0)])
        self.assertEqual(bench.states(), {"delivered": 19, "dead": 1})

    def test_a_client_side_validation_error_is_permanent_and_costs_no_request(self):
        bench = Bench(self)
        texts = bench.say("p2", 1)
        # as an older version might have queued it
        oversized = NewEvent("ev_oversized", bench.settings.destination(), "agent-zero", "chat-p2",
                             "user", "user", "x" * 30_000, bench.clock.now)
        box = Outbox(bench.path, clock=bench.clock)
        enqueue(box, [oversized])
        box.close()
        texts += bench.say("p2", 1, text="after")
        bench.run_until_idle()
        self.assertEqual(bench.server_texts("p2"), texts)
        self.assertEqual([r[3] for r in bench.rows() if r[1] == "dead"], ["invalid"])
        self.assertFalse(any("x" * 30_000 == m["content"] for m in bench.fake.messages))
        bodies = [request.content.decode() for request in bench.sent
                  if request.url.path.endswith("/messages")]
        self.assertEqual(len(bodies), 2)  # the two good events; none for the oversized one
        self.assertFalse(any("x" * 25_001 in body for body in bodies))


class HandoffTest(unittest.TestCase):
    def test_what_was_handed_off_reaches_the_outbox_by_the_writer_then_honcho_in_order(self):
        bench = Bench(self, capture_wait_ms=10)  # each try meets the lock: it gives up after 10 ms
        writer = CaptureWriter(lambda: bench.capture_service, lambda: bench.settings,
                               monotonic=bench.mono)
        texts = bench.say("h1", 1)
        child = hold_write_lock(bench.path)  # another process holds the outbox: capture hands off
        try:
            for n in range(3):
                outcome = bench.capture_service.capture(
                    CaptureRequest("h1", Role.USER, f"late-{n}", f"late {n}"), bench.settings)
                self.assertEqual(outcome.value, "handed_off")
                texts.append(f"late {n}")
            retry_s = writer.step(woken=True)  # woken by the capture: the outbox is still held
            self.assertIsNotNone(retry_s)
            self.assertEqual(bench.capture_service.backlog(), 3)
        finally:
            release_lock(child)
        bench.run_until_idle()
        # the worker sends what the outbox holds
        self.assertEqual(bench.server_texts("h1"), texts[:1])
        bench.mono.advance(retry_s)
        self.assertIsNone(writer.step())  # the retry is due: it moves all three, nothing waits
        self.assertEqual(bench.capture_service.backlog(), 0)
        bench.run_until_idle()
        bench.assert_exactly_once("h1", texts)


class PauseTest(unittest.TestCase):
    def test_a_disabled_plugin_pauses_delivery_and_enabling_resumes_it(self):
        bench = Bench(self)
        texts = bench.say("d1", 2)
        bench.enabled = False
        self.assertEqual(bench.worker.step().state, "paused")
        self.assertEqual(bench.fake.requests, [])
        bench.enabled = True
        bench.run_until_idle()
        bench.assert_exactly_once("d1", texts)


if __name__ == "__main__":
    unittest.main()
