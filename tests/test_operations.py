"""Operator verbs through the command line and the API handlers: success, Honcho down, 401, bad
input."""

import asyncio
import hashlib
import io
import json
import os
import time
import unittest

from api_world import api_handler, api_world
from delivery_helpers import with_api_url_problem
from fake_honcho import FakeHoncho
from hub_testkit import release_restart
from loopback import serve
from mcp_fake import McpFake
from outbox_helpers import (
    circuit_row,
    enqueue,
    lease,
    process_row,
    put_row,
    settle,
    temp_outbox_path,
)

from honcho_hub import hub
from honcho_hub.capture.service import CaptureRequest, CaptureService, Outcome, Role
from honcho_hub.cli import main as cli
from honcho_hub.delivery import lifecycle
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.ops import operator as operations
from honcho_hub.ops.status import build_status
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import memory_log
from honcho_hub.storage.outbox import NewEvent, Outbox, Settlement

KEY = "hch-ops-key-1357913579"
SECRET_TEXT = "my password=Hunter2-Very-Secret and ghp_" + "Q1w2E3r4T5" * 4


class CliCase(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.server = serve(self.fake)
        self.addCleanup(self.server.close)
        self.path = temp_outbox_path(self)
        self.env = {"HONCHO_API_URL": self.server.url, "HONCHO_MCP_URL": self.server.url,
                    "HONCHO_API_KEY": KEY, "HONCHO_OUTBOX_PATH": self.path,
                    "HOME": os.path.dirname(self.path)}

    def cli(self, *argv, env=None):
        out = io.StringIO()
        code = cli.main(list(argv), environ=env or self.env, out=out)
        return code, out.getvalue()

    def settings(self):
        return build_settings({}, {}, self.env)

    def queue(self, n=3, chat="ops1", text="hello"):
        service = CaptureService(self.settings())
        for i in range(n):
            service.capture(CaptureRequest(chat, Role.USER, f"{chat}-{i}", f"{text} {i}"),
                            self.settings())
        service.close()

    def down(self):
        self.server.close()  # nothing listens any more: connection refused

    def mcp_server(self):
        """A fake MCP server on the API's host, which requires the key, set as the MCP URL."""
        mcp = McpFake(key=KEY)
        self.addCleanup(mcp.close)
        self.env["HONCHO_MCP_URL"] = mcp.url
        return mcp


class CheckTest(CliCase):
    def test_api_and_mcp_ok(self):
        self.mcp_server()
        code, out = self.cli("check", "--json")
        result = json.loads(out)
        self.assertEqual(code, 0)
        self.assertTrue(result["api"]["ok"] and result["mcp"]["ok"])
        self.assertIsInstance(result["api"]["latency_ms"], float)
        self.assertEqual((result["mcp"]["state"], result["mcp"]["tool_count"]), ("ready", 31))

    def test_an_mcp_url_that_is_no_mcp_server_is_degraded(self):
        code, out = self.cli("check", "--json")  # the MCP URL is the API's: it has no MCP endpoint
        self.assertEqual((code, json.loads(out)["mcp"]["error"]), (3, "http_404"))

    def test_honcho_down_and_401(self):
        code, out = self.cli("check", env={**self.env, "HONCHO_API_KEY": "wrong-key-000000"})
        self.assertEqual(code, 1)
        self.assertIn("auth_401", out)
        self.down()
        code, out = self.cli("check", "--json")
        self.assertEqual((code, json.loads(out)["api"]["error"]), (1, "unreachable"))

    def test_the_mcp_check_carries_the_key_only_as_a_bearer_header(self):
        # On the API's host: the key may go (tests/test_mcp_check.py: when not).
        mcp = self.mcp_server()
        self.cli("check")
        # initialize, initialized, two pages of tools, the session's end
        self.assertEqual(len(mcp.seen), 5)
        for request in mcp.seen:
            headers = dict(request["headers"])
            self.assertEqual(headers.pop("authorization"), f"Bearer {KEY}")
            self.assertNotIn(KEY, request["path"] + json.dumps(headers) + request["body"])
        self.assertTrue(self.server.seen)  # the API check went out too, with the key
        self.assertTrue(all(r["headers"].get("authorization") == f"Bearer {KEY}"
                            for r in self.server.seen))


class DrainAndDeadTest(CliCase):
    def test_drain_delivers_and_reports(self):
        self.queue(4)
        code, out = self.cli("drain", "--json", "--timeout", "30")
        self.assertEqual((code, json.loads(out)["delivered"], json.loads(out)["pending"]),
                         (0, 4, 0))
        self.assertEqual(len(self.fake.session_messages("chat-ops1")), 4)

    def test_drain_delivers_a_message_still_waiting_in_the_capture_journal(self):
        # Accepted a moment ago: the capture writer has not moved it into the outbox yet.
        self.addCleanup(hub.shutdown)
        settings = self.settings()
        service = hub.current().capture(settings)
        self.assertEqual(service.accept(CaptureRequest("ops3", Role.USER, "j-1",
                                                       "typed just before"), settings),
                         Outcome.ACCEPTED)
        self.assertEqual(len(service.journal), 1)
        result = operations.drain(settings, 10, worker=None,
                                  flush_capture=hub.current().flush_capture)
        self.assertEqual((result["delivered"], result["pending"]), (1, 0), result)
        self.assertEqual([m["content"] for m in self.fake.session_messages("chat-ops3")],
                         ["typed just before"])

    def test_drain_with_honcho_down_or_401_leaves_events_pending(self):
        self.queue(2)
        code, out = self.cli("drain", "--json", "--timeout", "5",
                             env={**self.env, "HONCHO_API_KEY": "bad-key-00000"})
        self.assertEqual((code, json.loads(out)["pending"]), (3, 2))
        self.down()
        code, out = self.cli("drain", "--timeout", "5")
        self.assertEqual(code, 3)
        self.assertIn("2 still pending", out)

    def test_dead_letters_are_listed_without_content_and_retried_at_most_100(self):
        self.queue(3, text=SECRET_TEXT)
        self.queue(100, chat="ops2")
        box = Outbox(self.path)
        for _chat in ("ops1", "ops2"):  # one lease of 100 per chat
            settle(box, "t", Settlement(dead=[(e.id, "http_422") for e in lease(box, "t", 100)]))
        self.assertEqual(box.stats()["counts"]["dead"], 103)
        box.close()
        code, out = self.cli("dead", "--json")
        dead = json.loads(out)["dead"]
        self.assertEqual((code, len(dead)), (0, 100))
        self.assertEqual(set(dead[0]),
                         {"id", "session_id", "error_code", "attempts", "dead_since"})
        self.assertNotIn("Hunter2", out)
        code, out = self.cli("retry-dead", "--json", "--limit", "500")
        self.assertEqual((code, json.loads(out)["requeued"]), (0, 100))
        code, out = self.cli("retry-dead", "--json")
        self.assertEqual((code, json.loads(out)["requeued"]), (0, 3))

    def test_drain_without_a_worker_returns_at_its_timeout_and_leaves_a_held_request_leased(self):
        self.queue(2)
        # the server holds the add-messages request without answering
        self.fake.fail(kind="timeout")
        settings = build_settings({"sdk_timeout_s": 5}, {}, self.env)
        result = operations.drain(settings, 0.5, worker=None,
                                  flush_capture=hub.current().flush_capture)
        self.assertEqual((result["delivered"], result["pending"]), (0, 0))
        box = Outbox(self.path)
        self.assertEqual(box.stats()["counts"]["leased"], 2,
                         "not waited for: it goes out again after its lease")
        box.close()

    def test_drain_sends_nothing_and_says_why_while_the_plugin_is_off_or_the_api_url_unusable(self):
        self.queue(2)
        problem = "HONCHO_API_URL: the port is not a number"
        # as Agent Zero's, switched off
        paused_worker = DeliveryWorker(self.settings, enabled=lambda: False)
        paused_worker.start()
        self.addCleanup(paused_worker.stop, 10)
        cases = (("plugin off, no worker running", None, {"enabled": lambda: False},
                  "plugin_disabled"),
                 ("plugin off, a worker running", paused_worker, {"enabled": lambda: False},
                  "plugin_disabled"),
                 ("api url unusable", None, {}, "api_url_invalid"))
        for name, worker, options, reason in cases:
            with self.subTest(name):
                settings = (self.settings() if reason != "api_url_invalid"
                            else with_api_url_problem(self.settings(), problem))
                result = operations.drain(settings, 5, worker=worker,
                                          flush_capture=hub.current().flush_capture, **options)
                self.assertEqual(result, {"delivered": 0, "dead": 0, "retried": 0, "paused": reason,
                                          "pending": 2})
                self.assertEqual(self.fake.messages, [])

    def test_bad_input_is_a_usage_error(self):
        for argv in (["retry-dead", "--limit", "many"], ["drain", "--timeout", "soon"], ["fly"],
                     []):
            with self.subTest(argv=argv):
                with self.assertRaises(SystemExit) as caught:
                    self.cli(*argv)
                self.assertEqual(caught.exception.code, 2)

    def test_nothing_queued_yet_creates_no_outbox(self):
        for argv in (["dead"], ["retry-dead"], ["status"]):
            self.cli(*argv)
        self.assertFalse(os.path.exists(self.path))


class UntrustedRowsTest(CliCase):
    def test_status_and_drain_exit_cleanly_over_rows_of_other_processes_that_do_not_parse(self):
        self.queue(3)
        now = time.time()
        put_row(self.path, "shared_circuits", circuit_row(self.settings().destination(), now,
                                                          open_until="soon", failures=b"\x00"))
        put_row(self.path, "worker_processes",
                {**process_row("other", 4242, now), "beat_at": "late", "sent": b"\x01"})
        code, out = self.cli("status", "--json")
        shown = json.loads(out)["processes"]
        self.assertEqual((code, shown["workers"], shown["shared_circuit"]), (0, [], None))
        code, out = self.cli("drain", "--timeout", "30")
        self.assertEqual((code, out), (0, "delivered 3, dead-lettered 0, 0 still pending\n"))
        self.assertEqual(len(self.fake.session_messages("chat-ops1")), 3)


class WakeTest(unittest.TestCase):
    """Wake worker: nudges the running worker, or starts one as the capture hooks would."""

    def setUp(self):
        self.hub = hub.current()
        self.assertTrue(self.hub.load_delivery())
        self.settings = build_settings({"outbox_path": temp_outbox_path(self),
                                        "api_url": "http://127.0.0.1:9"}, {}, {})
        self.addCleanup(lambda: [w.stop(10) for w in lifecycle.plugin_workers()])
        self.addCleanup(self.hub.reconfigure, self.hub.settings, self.hub.enabled)
        self.addCleanup(release_restart)
        [w.stop(10) for w in lifecycle.plugin_workers()]  # no worker runs: the Hub has none
        self.assertIsNone(self.hub.worker())

    def wake(self) -> dict:
        """The wake verb on the Hub's parts, as the sidebar's handler passes them."""
        return operations.wake(self.hub.settings(), self.hub.worker(), self.hub.start_worker_now,
                               self.hub.enabled)

    def test_wake_starts_a_worker_when_none_runs_and_says_whether_it_is_paused(self):
        unusable = with_api_url_problem(self.settings, "HONCHO_API_URL: the port is not a number")
        cases = (("plugin on", self.settings, lambda: True, None),
                 ("plugin switched off", self.settings, lambda: False, "plugin_disabled"),
                 ("api url unusable", unusable, lambda: True, "api_url_invalid"))
        for name, settings, enabled, paused in cases:
            with self.subTest(name):
                [w.stop(10) for w in lifecycle.plugin_workers()]
                # the default argument outlives the iteration
                self.hub.reconfigure(settings=lambda settings=settings: settings, enabled=enabled)
                result = self.wake()
                self.assertEqual(result, {"woken": False, "started": True, "held": False,
                                          "paused": paused})
                worker = self.hub.worker()
                self.assertIsNotNone(worker)
                self.assertEqual(lifecycle.plugin_workers(), [worker])
                again = self.wake()
                self.assertEqual(again, {"woken": True, "started": False, "held": False,
                                         "paused": paused})
                self.assertIs(self.hub.worker(), worker,
                              "the running worker is woken, not replaced")

    def test_wake_starts_nothing_while_an_update_or_uninstall_holds_the_workers(self):
        lifecycle.hold_restart(120.0, "pre_update")
        self.hub.reconfigure(settings=lambda: self.settings, enabled=lambda: True)
        result = self.wake()
        self.assertEqual(result, {"woken": False, "started": False, "held": True, "paused": None})
        self.assertEqual(lifecycle.plugin_workers(), [])


class StatusTest(CliCase):
    def test_status_json_is_stable_and_exit_codes_follow_health(self):
        code, out = self.cli("status", "--json")
        status = json.loads(out)
        self.assertEqual(code, 0)
        self.assertEqual(sorted(status), ["capture", "chats", "code", "endpoints", "health",
                                          "health_reasons", "identity", "memory_expiry",
                                          "memory_writes",
                                          "processes", "queue", "recall", "refusals", "scope",
                                          "upgrade", "worker"])
        self.queue(1)
        box = Outbox(self.path)
        settle(box, "t", Settlement(dead=[(e.id, "http_422") for e in lease(box, "t", 1)]))
        box.close()
        self.assertEqual(self.cli("status")[0], 3)  # amber: a dead letter
        hosted = {k: v for k, v in self.env.items()
                  if k not in ("HONCHO_API_URL", "HONCHO_API_KEY")}
        self.assertEqual(self.cli("status", env=hosted)[0], 1)  # red: hosted Honcho without a key

    def test_no_field_of_status_holds_a_credential_its_digest_content_or_the_path(self):
        self.queue(3, text=SECRET_TEXT)
        settings = self.settings()
        memory_log.keep(settings, memory_log.MemoryWrite("c0001", memory_log.WriteKind.FORGET,
                                                         SECRET_TEXT, settings.destination(),
                                                         "agent-zero", "user", "chat-ops1",
                                                         "a0-alpha"))
        parts = hub.current().status_parts(settings, "chat-ops1", "a0-alpha")
        status = build_status(settings, parts, time.time())
        forbidden = [KEY, KEY[:8], KEY[-8:], hashlib.sha256(KEY.encode()).hexdigest(),
                     hashlib.sha256(KEY.encode()).hexdigest()[:12], "Hunter2", "Q1w2E3r4T5",
                     "hello", self.path, os.path.basename(self.path), os.path.dirname(self.path)]
        for path, value in _leaves(status):
            for secret in forbidden:
                with self.subTest(field=path):
                    self.assertNotIn(secret, str(value))
        self.assertEqual(status["queue"]["pending"], 3)
        self.assertEqual(status["memory_writes"]["forgotten"], 1)


    def test_the_status_of_a_chat_shows_the_flags_its_session_holds_on_the_server(self):
        settings = self.settings()  # seed: the agent is not observed
        gateway = hub.current().tool_gateway(build_settings({"observation": "directional"}, {},
                                                            self.env))
        gateway.ensure_known("chat-ops1")  # the session was created earlier under directional
        status = build_status(settings,
                              hub.current().status_parts(settings, "chat-ops1", backfill=True),
                              time.time())
        observation = status["identity"]["observation"]
        self.assertEqual(observation["server"]["agent"],
                         {"observe_me": True, "observe_others": True})
        self.assertTrue(observation["server_wins"])
        # the light status reads nothing
        self.assertIsNone(build_status(settings, hub.current().status_parts(settings, "chat-ops1"),
                                       time.time())["identity"]["observation"]["server"])

class CacheAndDemoTest(CliCase):
    def test_clear_cache_reaches_a_recaller_in_another_process_through_the_marker(self):
        settings = self.settings()
        self.fake.representations[("agent-zero", "user")] = "Likes tea."
        other = Recaller()  # as Agent Zero's process would hold
        self.addCleanup(other.close)
        template = "<honcho_memory>{{sections}}</honcho_memory>"
        self.assertEqual(other.recall(settings, "chat-x", "what drink", template).source, "fresh")
        self.assertEqual(other.recall(settings, "chat-x", "what drink", template).source, "hit")
        # The marker lives beside an outbox, where Agent Zero's capture made one.
        Outbox(self.path).close()
        code, out = self.cli("clear-cache", "--json")
        self.assertEqual(code, 0)
        self.assertEqual(other.recall(settings, "chat-x", "what drink", template).source, "fresh")

    def test_demo_end_to_end_and_with_honcho_down(self):
        self.fake.representations[("demo-agent", "demo-user")] = "The user plans a trip to Lisbon."
        code, out = self.cli("demo")
        self.assertEqual(code, 0, out)
        self.assertIn("Delivered 6 messages", out)
        self.assertIn("[REDACTED:github_token]", out)
        self.assertIn("trip to Lisbon", out)
        self.assertNotIn(KEY, out)
        self.assertEqual({m["workspace_id"] for m in self.fake.messages}, {"honcho-hub-demo"})
        self.assertFalse(os.path.exists(self.path))  # the user's outbox was not touched
        self.down()
        code, out = self.cli("demo")
        self.assertEqual(code, 3)
        self.assertIn("6 are safely queued", out)


class ApiHandlersTest(unittest.TestCase):
    def setUp(self):
        self.fake, self.server, self.host = api_world(self, KEY)
        self.host.config.update(mcp_url=self.server.url)
        self.handlers = {name: api_handler(self.host, name)
                         for name in ("honcho_status", "honcho_action")}

    def call(self, name, body):
        return asyncio.run(self.handlers[name]().process(body, None))

    def test_auth_and_csrf_are_required(self):
        for handler in self.handlers.values():
            self.assertTrue(handler.requires_auth() and handler.requires_csrf())

    def test_status_and_every_action(self):
        mcp = McpFake(key=KEY)
        self.addCleanup(mcp.close)
        self.host.config.update(mcp_url=mcp.url)
        destination = f"{self.server.url}#agent-zero"
        box = Outbox(self.host.config["outbox_path"])
        enqueue(box, [NewEvent(f"ev_api_{i}", destination, "agent-zero", f"chat-api{i % 2}",
                               "user", "user", f"hello {i}", float(i)) for i in range(4)])
        # chat-api0's head
        settle(box, "t", Settlement(dead=[(e.id, "http_422") for e in lease(box, "t", 1)]))
        box.close()
        status = self.call("honcho_status", {"context": "Ab3dE6gH"})
        self.assertTrue(status["ok"])
        self.assertEqual(status["status"]["identity"]["session_id"], "chat-Ab3dE6gH")
        self.assertNotIn(KEY, json.dumps(status))
        answers = {}
        for action in ("check", "wake", "drain", "retry_dead", "clear_cache"):
            with self.subTest(action=action):
                answer = answers[action] = self.call("honcho_action", {"action": action})
                self.assertEqual((answer["ok"], answer["action"]), (True, action), answer)
                self.assertNotIn("error", answer["result"])
                # before retry_dead requeues the dead head for the running worker
                if action == "drain":
                    self.assertEqual(len(self.fake.messages), 3)
        self.assertEqual((answers["check"]["result"]["api"]["ok"],
                          answers["check"]["result"]["mcp"]["ok"]),
                         (True, True))
        self.assertEqual(answers["wake"]["result"],
                         {"woken": False, "started": True, "held": False, "paused": None})
        # the started worker may have sent them first
        self.assertEqual(answers["drain"]["result"]["pending"], 0)
        self.assertEqual(answers["retry_dead"]["result"]["requeued"], 1)
        self.assertIsInstance(answers["clear_cache"]["result"]["cleared"], int)

    def test_unknown_or_malformed_bodies_get_a_structured_error(self):
        for body in ({"action": "explode"}, {}, None, [], "drain", {"action": ["drain"]}):
            with self.subTest(body=repr(body)):
                answer = self.call("honcho_action", body)
                self.assertEqual(answer["ok"], False)
                self.assertIn("unknown action", answer["error"])
        self.assertTrue(self.call("honcho_status", None)["ok"])

    def test_honcho_down_and_401_are_reported_not_raised(self):
        self.host.secrets = {"HONCHO_API_KEY": "wrong-key-1234567"}
        check = self.call("honcho_action", {"action": "check"})
        self.assertEqual(check["result"]["api"]["error"], "auth_401")
        self.server.close()
        check = self.call("honcho_action", {"action": "check"})
        self.assertEqual(check["result"]["api"]["error"], "unreachable")


def _leaves(value, path="status"):
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _leaves(child, f"{path}.{key}")
            yield f"{path}.{key} (key)", key
    elif isinstance(value, list):
        for n, child in enumerate(value):
            yield from _leaves(child, f"{path}[{n}]")
    else:
        yield path, value


if __name__ == "__main__":
    unittest.main()
