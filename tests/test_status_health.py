"""Health says only what is known: neutral until the API was reached, amber or red after a failed
attempt or check until a success, green after one."""

import asyncio
import dataclasses
import functools
import json
import logging
import os
import sys
import types
import unittest
import uuid

import httpx
from api_world import api_handler, api_world
from delivery_helpers import KEY as KEY_OF_BENCH
from delivery_helpers import Bench
from fake_honcho import FakeHoncho
from hub_testkit import StubAgent, StubContext
from outbox_helpers import enqueue, temp_outbox_path

from honcho_hub import hub
from honcho_hub.cli import main as cli
from honcho_hub.delivery import lifecycle
from honcho_hub.hub import Hub
from honcho_hub.ops import operator as operations
from honcho_hub.ops.status import StatusParts, build_status, gather_parts, status_text
from honcho_hub.runtime import process_state
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import memory_log
from honcho_hub.storage.memory_log import MemoryWrite, WriteKind
from honcho_hub.storage.outbox import NewEvent, Outbox

KEY = "hch-health-key-24682468"
NOW = 1_900_000_000.0


class HealthFromChecksTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        # A workspace of its own: what a check learned is remembered per process and destination.
        self.env = {"HONCHO_API_URL": "http://honcho.test", "HONCHO_MCP_URL": "http://honcho.test",
                    "HONCHO_API_KEY": KEY, "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10],
                    "HONCHO_OUTBOX_PATH": temp_outbox_path(self)}

    def settings(self, **env):
        return build_settings({}, {}, {**self.env, **env})

    def check(self, settings, transport=None):
        factory = functools.partial(httpx.Client, transport=transport or self.fake.transport())
        return operations.check(settings, http_client_factory=factory, wall=lambda: NOW)

    def status(self, settings, now=NOW + 1):
        return build_status(settings, hub.current().status_parts(settings), now)

    def test_before_any_request_health_is_neutral_and_the_cli_exits_0(self):
        status = self.status(self.settings())
        self.assertEqual((status["health"], status["health_reasons"]),
                         ("neutral", ["Honcho not yet reached"]))
        self.assertEqual(status["endpoints"]["api_reach"]["state"], "not_yet")
        self.assertEqual(cli.exit_code_for(status), cli.EXIT_OK)

    def test_hosted_honcho_without_a_key_is_red_however_its_host_is_spelled(self):
        for url in ("https://api.honcho.dev", "https://API.Honcho.Dev.",
                    "https://api\u3002honcho\u3002dev"):
            with self.subTest(url=url):
                status = build_status(build_settings({}, {}, {**self.env, "HONCHO_API_KEY": "",
                                                             "HONCHO_API_URL": url}),
                                      StatusParts(), NOW)
                self.assertIn("no API key: set HONCHO_API_KEY under Settings → Secrets",
                              status["health_reasons"])

    def test_an_unreachable_check_turns_health_amber_until_a_check_succeeds(self):
        settings = self.settings()

        def refuse(request):
            raise httpx.ConnectError("refused", request=request)

        self.check(settings, httpx.MockTransport(refuse))
        status = self.status(settings)
        self.assertEqual(status["health"], "amber")
        self.assertEqual(status["health_reasons"], ["last request to Honcho failed (unreachable)"])
        self.assertEqual(cli.exit_code_for(status), cli.EXIT_DEGRADED)
        self.check(settings)
        status = self.status(settings)
        self.assertEqual((status["health"], status["endpoints"]["api_reach"]["state"]),
                         ("green", "ok"))

    def test_a_refused_key_at_check_turns_health_red(self):
        settings = self.settings(HONCHO_API_KEY="wrong-key-0000000000")
        self.assertFalse(self.check(settings)["api"]["ok"])
        status = self.status(settings)
        self.assertEqual(status["health"], "red")
        self.assertRegex(status["health_reasons"][0],
                         r"^last request to Honcho failed \(auth_401\)$")


class HealthFromDeliveryTest(unittest.TestCase):
    settings = build_settings({}, {}, {"HONCHO_API_URL": "http://honcho.test",
                                       "HONCHO_API_KEY": KEY,
                                       "HONCHO_OUTBOX_PATH": "/tmp/never-opened/outbox.sqlite3"})

    def health(self, **metrics):
        parts = StatusParts(worker={"state": "idle", "metrics": metrics, "circuits": {}})
        status = build_status(self.settings, parts, NOW)
        return status["health"], status["endpoints"]["api_reach"]

    def test_messages_refused_for_want_of_a_journal_folder_turn_health_red(self):
        # Neither the outbox folder nor the per-user state folder could hold the capture journal.
        parts = StatusParts(worker={"state": "idle", "metrics": {}, "circuits": {}},
                            capture_counters={"journal_unavailable": 2})
        status = build_status(self.settings, parts, NOW)
        self.assertEqual(status["refusals"]["journal_unavailable"], 2)
        self.assertEqual(status["health"], "red")
        self.assertIn("messages refused: no folder for the capture journal",
                      status["health_reasons"])

    def test_a_delivered_batch_makes_health_green(self):
        health, reach = self.health(last_success_at=NOW - 5)
        self.assertEqual((health, reach["state"], reach["last_ok_age_s"]), ("green", "ok", 5.0))

    def test_a_failure_newer_than_the_last_success_is_amber_an_older_one_is_not(self):
        self.assertEqual(self.health(last_success_at=NOW - 9, last_error_at=NOW - 2,
                                     last_error_code="http_503")[0],
                         "amber")
        self.assertEqual(self.health(last_success_at=NOW - 2, last_error_at=NOW - 9,
                                     last_error_code="http_503")[0],
                         "green")


class HealthFromUnusableUrlTest(unittest.TestCase):
    BAD = {"HONCHO_API_URL": "https://ops:PWSECRET@honcho.internal:8000",
           "HONCHO_BASE_URL": "honcho.internal:8000",
           "HONCHO_MCP_URL": "https://mcp.internal/?token=TOKSECRET"}

    def test_an_unusable_url_is_red_naming_its_variable_never_its_value(self):
        for var, bad in self.BAD.items():
            with self.subTest(var=var):
                settings = build_settings({}, {"HONCHO_API_KEY": KEY}, {
                    var: bad, "HONCHO_OUTBOX_PATH": "/tmp/never-opened/outbox.sqlite3"})
                # A worker that delivered before: status must not stay green.
                parts = StatusParts(worker={"state": "idle",
                                            "metrics": {"last_success_at": NOW - 5},
                                            "circuits": {}})
                status = build_status(settings, parts, NOW)
                self.assertEqual(status["health"], "red")
                self.assertEqual(len([r for r in status["health_reasons"]
                                      if r.startswith(f"{var}: ")]), 1,
                                 status["health_reasons"])
                self.assertEqual(cli.exit_code_for(status), cli.EXIT_FAILED)
                text = json.dumps(status) + status_text(status)
                for part in ("PWSECRET", "TOKSECRET", "ops", "internal", KEY):
                    self.assertNotIn(part, text)
                field = "mcp_url" if var == "HONCHO_MCP_URL" else "api_url"
                # not the default it no longer falls back to
                self.assertIsNone(status["endpoints"][field])
                self.assertTrue(status["endpoints"][f"{field}_problem"].startswith(f"{var}: "))



class MemoryWritesStatusTest(unittest.TestCase):
    def test_status_shows_counts_latest_ids_and_times_of_the_tools_writes_never_their_text(self):
        path = temp_outbox_path(self)
        settings = build_settings({"outbox_path": path}, {}, {})
        empty = build_status(settings, hub.current().status_parts(settings), NOW)
        self.assertEqual(empty["memory_writes"], {"remembered": 0, "forgotten": 0, "latest": []})
        self.assertFalse(os.path.exists(path), "reading status creates no outbox")
        for cid, kind, at in (("c0001", WriteKind.REMEMBER, NOW - 30),
                              ("c0002", WriteKind.FORGET, NOW - 10)):
            box = Outbox(path, clock=lambda at=at: at)
            memory_log.record(box.db, MemoryWrite(cid, kind,
                                                  "Password Hunter2-Very-Secret, likes tea", "d",
                                                  "agent-zero", "user", "chat-1", None))
            box.close()
        status = build_status(settings, hub.current().status_parts(settings), NOW)
        self.assertEqual(status["memory_writes"], {"remembered": 1, "forgotten": 1, "latest": [
            {"id": "c0002", "kind": "forget", "age_s": 10.0},
            {"id": "c0001", "kind": "remember", "age_s": 30.0}]})
        text = status_text(status)
        self.assertIn("Memory tool: 1 remembered, 1 forgotten; latest forget c0002 10 s ago", text)
        self.assertNotIn("Hunter2", json.dumps(status) + text)
        self.assertNotIn("likes tea", json.dumps(status) + text)


class MaskedSettingsStatusTest(unittest.TestCase):
    """Where the host masks a setting's value (Agent Zero replaces a secret's value with its alias),
    status's text says the setting is kept in secrets and never shows the value."""

    def text(self, api_url, kept):
        settings = build_settings({"outbox_path": temp_outbox_path(self), "api_url": api_url,
                                   "workspace_id": "ws-kept", "user_peer_id": "dana"}, {}, {})
        status = build_status(settings, StatusParts(scope_id="a0-boats"), NOW)
        return status_text(status, masked=lambda value: any(k in value for k in kept))

    def test_each_masked_setting_is_named_as_kept_in_secrets(self):
        for api_url, hosted in (("http://honcho.lan:8000", "self-hosted"),
                                ("https://api.honcho.dev", "hosted")):
            with self.subTest(api_url=api_url):
                text = self.text(api_url, (api_url, "ws-kept", "boats"))
                self.assertIn(f"API URL set in secrets ({hosted}) · workspace set in secrets"
                              " · user dana · agent agent-zero", text)
                self.assertIn("scope set in secrets (project)", text)
                for value in (api_url, "ws-kept", "boats"):
                    self.assertNotIn(value, text)

    def test_nothing_masked_shows_every_value(self):
        text = self.text("http://honcho.lan:8000", ())
        self.assertIn("API http://honcho.lan:8000 · workspace ws-kept · user dana", text)
        self.assertIn("scope a0-boats (project)", text)


class SessionsStatusTest(unittest.TestCase):
    """The session strategy and observation preset are always shown; with the chat's session read
    from Honcho, its peers' flags as the server holds them, and whether they differ from the
    configured ones."""

    SEED = {"user": {"observe_me": True, "observe_others": True},
            "agent": {"observe_me": False, "observe_others": True}}
    DIRECTIONAL = {"user": {"observe_me": True, "observe_others": True},
                   "agent": {"observe_me": True, "observe_others": True}}

    def status(self, settings, session_id=None, session_peers=None):
        parts = gather_parts(settings, process_state(), session_id=session_id,
                             session_peers=session_peers)
        status = build_status(settings, parts, NOW)
        return status, status_text(status)

    @staticmethod
    def server(status):
        """What status says of the server's configuration: its flags by role, and whether they
        win."""
        observation = status["identity"]["observation"]
        return observation["server"], observation["server_wins"]

    def test_the_strategy_and_configured_flags_are_shown_without_a_request(self):
        cases = {("per-chat", "seed"): self.SEED, ("per-project", "directional"): self.DIRECTIONAL,
                 ("global", "custom"): {"user": {"observe_me": False, "observe_others": True},
                                        "agent": {"observe_me": False, "observe_others": False}}}
        for (strategy, preset), configured in cases.items():
            with self.subTest(strategy=strategy, observation=preset):
                settings = build_settings({"outbox_path": temp_outbox_path(self),
                                           "api_url": "http://honcho.test",
                                           "session_strategy": strategy, "observation": preset,
                                           "observe_user_me": False,
                                           "observe_agent_others": False}, {}, {})
                status, text = self.status(settings, "chat-c1")
                self.assertEqual(status["identity"]["session_strategy"], strategy)
                self.assertEqual(status["identity"]["observation"],
                                 {"preset": preset, "configured": configured, "server": None,
                                  "server_wins": False, "timed_out": False})
                self.assertIn(f"Sessions {strategy} · observation {preset}", text)
                self.assertNotIn("server", text)

    def test_the_servers_flags_are_shown_and_win_when_they_differ(self):
        bench = Bench(self, observation="seed")
        bench.say("c1", 1, text="Hunter2-Very-Secret likes tea")
        bench.run_until_idle()  # chat-c1 created under seed
        gateway = bench.gateway(bench.settings)
        self.addCleanup(gateway.close)
        cases = {"seed": (False, "as configured"),
                 "directional": (True, "the server's configuration wins")}
        for preset, (wins, said) in cases.items():
            with self.subTest(observation=preset):
                settings = dataclasses.replace(bench.settings, observation=preset)
                status, text = self.status(settings, "chat-c1", gateway.session_peer_flags)
                self.assertEqual(self.server(status), (self.SEED, wins))
                self.assertIn(said, text)
                self.assertIn("chat-c1 on the server: user me on, others on; "
                              "agent me off, others on", text)
                for private in ("Hunter2", "likes tea", bench.path, os.path.dirname(bench.path),
                                KEY_OF_BENCH):
                    self.assertNotIn(private, json.dumps(status) + text)

    def test_a_session_the_server_does_not_hold_yet_or_that_could_not_be_read(self):
        bench = Bench(self, observation="directional")
        gateway = bench.gateway(bench.settings)
        self.addCleanup(gateway.close)
        status, text = self.status(bench.settings, "chat-new", gateway.session_peer_flags)
        self.assertEqual(self.server(status), ({"user": None, "agent": None}, False))
        self.assertIn("chat-new is not on the server yet: created with these flags", text)
        bench.fake.fail(match=r"/config$", status=503)
        status, text = self.status(bench.settings, "chat-new", gateway.session_peer_flags)
        self.assertEqual(self.server(status), ({}, False))
        self.assertIn("chat-new on the server: not read", text)

    def test_a_peer_the_server_holds_with_its_defaults_wins_over_the_configured_flags(self):
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "http://honcho.test"}, {}, {})
        held = {"user": {"observe_me": None, "observe_others": None}, "agent-zero": None}
        status, text = self.status(settings, "chat-c1", lambda session, peers: held)
        self.assertEqual(self.server(status),
                         ({"user": {"observe_me": None, "observe_others": None}, "agent": None},
                          True))
        self.assertIn("user me default, others default; agent not in the session yet", text)

    def test_a_read_cut_short_shows_what_was_read(self):
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "http://honcho.test"}, {}, {})
        held = {"user": {"observe_me": True, "observe_others": False}}
        status, text = self.status(settings, "chat-c1", lambda session, peers: held)
        self.assertEqual(self.server(status),
                         ({"user": {"observe_me": True, "observe_others": False}}, True))
        self.assertIn("user me on, others off; agent not read — the server's configuration wins",
                      text)

    def test_a_failing_reader_leaves_status_whole(self):
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "http://honcho.test"}, {}, {})

        def broken(session, peers):
            raise RuntimeError("the reader broke")

        status, text = self.status(settings, "chat-c1", broken)
        self.assertEqual(self.server(status), ({}, False))
        self.assertIn("not read", text)


class LightStatusTest(unittest.TestCase):
    """The sidebar's collapsed line polls a light status (`light: true`): local state only, never a
    request to Honcho; the open panel's full status reads the chat's session and scope from Honcho.
    Through the status API handler as Agent Zero loads it, with requests counted at the fake
    Honcho."""

    CHAT = "ChatLite"

    def setUp(self):
        self.fake, self.server, self.host = api_world(self, KEY)
        self.handler = api_handler(self.host, "honcho_status")
        chat = StubAgent(0, StubContext(id=self.CHAT, project="Alpha"))
        chat.context.agent0 = chat  # as every AgentContext has
        # Agent Zero's AgentContext.get, which the handler asks for the chat the UI shows.
        sys.modules["agent"] = types.SimpleNamespace(AgentContext=types.SimpleNamespace(
            get={self.CHAT: chat.context}.get, all=lambda: [chat.context]))
        self.addCleanup(sys.modules.pop, "agent", None)
        box = Outbox(self.host.config["outbox_path"])
        enqueue(box, [NewEvent("ev_light_1", f"{self.server.url}#agent-zero", "agent-zero",
                               f"chat-{self.CHAT}", "user", "user", "hello", 1.0)])
        box.close()

    def status(self, body):
        answer = asyncio.run(self.handler().process(body, None))
        self.assertTrue(answer["ok"], answer)
        return answer["status"]

    def test_a_light_status_asks_honcho_nothing_a_full_one_reads_the_chats_session_and_scope(self):
        light = {"context": self.CHAT, "light": True}
        status = self.status(light)
        self.assertEqual(self.fake.requests, [])
        # What the collapsed line shows comes from local state.
        self.assertEqual((status["identity"]["session_id"], status["scope"]["current"],
                          status["queue"]["pending"]),
                         (f"chat-{self.CHAT}", "a0-alpha", 1))
        # the session was not read
        self.assertIsNone(status["identity"]["observation"]["server"])
        full = self.status({"context": self.CHAT})
        session = f"/v3/workspaces/agent-zero/sessions/chat-{self.CHAT}"
        paths = [path for _, path in self.fake.requests]
        self.assertIn(f"{session}/peers/user/config", paths)
        self.assertIn(f"{session}/peers/agent-zero/config", paths)
        # the scope's backfill
        self.assertIn("/v3/workspaces/agent-zero/scopes/a0-alpha/status", paths)
        self.assertIsNotNone(full["identity"]["observation"]["server"])
        seen = len(self.fake.requests)
        # recall's client now exists: the light status still asks nothing
        self.status(light)
        self.assertEqual(len(self.fake.requests), seen)

    def test_only_light_true_is_light(self):
        for value in (False, "true", 1, None):
            with self.subTest(light=value):
                before = len(self.fake.requests)
                self.status({"context": self.CHAT, "light": value})
                self.assertGreater(len(self.fake.requests), before)


class DebugSettingTest(unittest.TestCase):
    """`debug` / HONCHO_DEBUG: the plugin's loggers log at DEBUG while it is on, and get their level
    back."""

    LOGGERS = ("honcho_hub", "honcho_hub.adapters", "honcho_hub.delivery.worker")

    def setUp(self):
        self.path = temp_outbox_path(self)
        plugin = logging.getLogger("honcho_hub")
        self.addCleanup(plugin.setLevel, plugin.level)
        plugin.setLevel(logging.WARNING)  # as an operator's logging configuration might have set it
        self.addCleanup(self.load_off)

    def settings(self, plugin=None, env=None):
        return build_settings({"outbox_path": self.path, "api_url": "http://127.0.0.1:9",
                               **(plugin or {})}, {}, env or {})

    def load_off(self):
        the_hub = Hub()
        the_hub.capture(self.settings({"debug": False}))
        the_hub.stop()

    def levels(self):
        return [logging.getLogger(name).getEffectiveLevel() for name in self.LOGGERS]

    def worker_step(self, settings):
        the_hub = Hub(lambda: settings, lambda: False)  # paused: no traffic
        self.assertTrue(the_hub.load_delivery())
        worker = the_hub.ensure_worker()
        worker.drain(5)  # a step of the worker's own thread: it reads the settings
        worker.stop(10)

    def test_the_plugin_loggers_follow_the_debug_setting_wherever_settings_are_loaded(self):
        capture_hub = Hub()
        self.addCleanup(capture_hub.stop)
        loads = {"capture": capture_hub.capture, "worker step": self.worker_step}
        switches = {"setting": ({"debug": True}, {}, {"debug": False}, {}),
                    "HONCHO_DEBUG": ({}, {"HONCHO_DEBUG": "1"}, {}, {"HONCHO_DEBUG": "off"})}
        for where, load in loads.items():
            for switch, (on_plugin, on_env, off_plugin, off_env) in switches.items():
                with self.subTest(where=where, switch=switch):
                    load(self.settings(on_plugin, on_env))
                    self.assertEqual(self.levels(), [logging.DEBUG] * 3)
                    load(self.settings(off_plugin, off_env))
                    self.assertEqual(self.levels(), [logging.WARNING] * 3,
                                     "the level it had before")
                    self.assertEqual([w for w in lifecycle.plugin_workers()], [])


if __name__ == "__main__":
    unittest.main()
