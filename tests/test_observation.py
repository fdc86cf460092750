"""Observation presets take effect: sessions are created with the configured peers' flags, every
cached gateway is rebuilt when they change, and the server's own configuration of a session can be
read back.

Real honcho.Honcho over the fake (its session records keep the peer configuration set before the
first message); real outbox, capture and worker through the delivery bench."""

import dataclasses
import unittest

import httpx
from delivery_helpers import KEY, Bench, with_api_url_problem
from fake_honcho import FakeHoncho
from honcho.api_types import MessageCreateParams
from outbox_helpers import temp_outbox_path

from honcho_hub.capture.service import Role
from honcho_hub.gateway.gateway import OBSERVATION, HonchoGateway, Message
from honcho_hub.gateway.registrar import ScopeRegistrar
from honcho_hub.hub import Hub
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.spec import OBSERVATION_PRESETS

USER, AGENT = "user", "agent-zero"  # the default peer ids


def flags(me: bool, others: bool) -> dict:
    return {"observe_me": me, "observe_others": others}


# preset (and custom flags) -> the peer configuration each configured peer is created with
PRESETS = {
    "seed": ({}, {USER: flags(True, True), AGENT: flags(False, True)}),
    "directional": ({}, {USER: flags(True, True), AGENT: flags(True, True)}),
    "unified": ({}, {USER: flags(True, False), AGENT: flags(False, True)}),
    "custom": ({"observe_user_me": False, "observe_user_others": True, "observe_agent_me": True,
                "observe_agent_others": False},
               {USER: flags(False, True), AGENT: flags(True, False)}),
}


def created_with(fake: FakeHoncho, session_id: str) -> dict:
    """The peers' configuration the session held before its first message."""
    return fake.sessions[("agent-zero", session_id)]["peers_set_before_messages"]


class PresetTest(unittest.TestCase):
    def test_a_sessions_peers_are_created_with_the_configured_presets_flags(self):
        for preset, (custom, expected) in PRESETS.items():
            with self.subTest(observation=preset):
                bench = Bench(self, observation=preset, **custom)
                bench.say("c1", 1)
                bench.say("c1", 1, role=Role.AGENT)
                bench.run_until_idle()
                self.assertEqual(created_with(bench.fake, "chat-c1"), expected)
                self.assertEqual(len(bench.server_texts("c1")), 2)

    def test_custom_flags_are_ignored_under_a_preset(self):
        bench = Bench(self, observation="directional", observe_user_me=False,
                      observe_agent_others=False)
        bench.say("c1", 1)
        bench.run_until_idle()
        self.assertEqual(created_with(bench.fake, "chat-c1"), PRESETS["directional"][1])

    def test_a_peer_first_seen_in_a_message_joins_with_its_roles_flags(self):
        fake = FakeHoncho(api_key=KEY)
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "https://honcho.test",
                                   "observation": "directional"}, {"HONCHO_API_KEY": KEY}, {})
        gateway = HonchoGateway.for_settings(settings, http_client_factory=lambda: httpx.Client(
            transport=fake.transport()))
        self.addCleanup(gateway.close)
        gateway.send([Message("ev_1", "chat-c1", USER, "user", "hi", 1_700_000_000.0)])
        gateway.send([Message("ev_2", "chat-c1", "former-agent", "agent", "an older agent's reply",
                              1_700_000_001.0)])
        self.assertEqual(fake.sessions[("agent-zero", "chat-c1")]["peers"]["former-agent"],
                         flags(True, True))

    def test_a_gateway_built_without_settings_creates_sessions_with_the_seed_flags(self):
        self.assertEqual(OBSERVATION, {role: flags(*pair)
                                       for role, pair in OBSERVATION_PRESETS["seed"].items()})
        fake = FakeHoncho(api_key=KEY)
        gateway = HonchoGateway(
            "https://honcho.test", "agent-zero", lambda: KEY, 5.0,
            http_client_factory=lambda: httpx.Client(transport=fake.transport()),
            peer_roles={USER: "user", AGENT: "agent"})
        self.addCleanup(gateway.close)
        gateway.send([Message("ev_1", "chat-c1", USER, "user", "hi", 1_700_000_000.0)])
        self.assertEqual(created_with(fake, "chat-c1"), PRESETS["seed"][1])


class RebuildOnChangeTest(unittest.TestCase):
    """A change of preset or flags reaches sessions created afterwards, wherever the gateway is
    cached."""

    CHANGES = {"observation": {"observation": "directional"},
               "a custom flag": {"observation": "custom", "observe_agent_me": True}}

    def test_the_worker_creates_later_sessions_with_the_new_flags(self):
        for name, change in self.CHANGES.items():
            with self.subTest(change=name):
                bench = Bench(self)
                bench.say("before", 1)
                bench.run_until_idle()
                bench.settings = dataclasses.replace(bench.settings, **change)
                bench.say("after", 1)
                bench.run_until_idle()
                self.assertEqual(created_with(bench.fake, "chat-before")[AGENT], flags(False, True))
                self.assertEqual(created_with(bench.fake, "chat-after")[AGENT], flags(True, True))

    def test_the_scope_registrar_creates_later_sessions_with_the_new_flags(self):
        bench = Bench(self)
        registrar = ScopeRegistrar(bench.gateway)
        self.addCleanup(registrar.stop)
        self.assertTrue(registrar.register(bench.settings, "chat-before", "a0-alpha"))
        for name, change in self.CHANGES.items():
            with self.subTest(change=name):
                session = f"chat-after-{len(name)}"
                self.assertTrue(registrar.register(
                    dataclasses.replace(bench.settings, **change), session, "a0-alpha"))
                self.assertEqual(created_with(bench.fake, session)[AGENT], flags(True, True))
        self.assertEqual(created_with(bench.fake, "chat-before")[AGENT], flags(False, True))

    def test_the_tools_and_recalls_gateways_are_rebuilt(self):
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "https://honcho.test"}, {}, {})
        the_hub = Hub(lambda: settings)
        self.addCleanup(the_hub.stop)
        recaller = Recaller(threads=1)
        self.addCleanup(recaller.close)
        for name, change in self.CHANGES.items():
            with self.subTest(change=name):
                changed = dataclasses.replace(settings, **change)
                self.assertIs(the_hub.tool_gateway(settings), the_hub.tool_gateway(settings))
                self.assertIsNot(the_hub.tool_gateway(changed), the_hub.tool_gateway(settings))
                before = recaller.gateway(settings)
                self.assertIs(recaller.gateway(settings), before)
                self.assertIsNot(recaller.gateway(changed), before)


class SessionPeerFlagsTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.settings = build_settings({"outbox_path": temp_outbox_path(self),
                                        "api_url": "https://honcho.test"},
                                       {"HONCHO_API_KEY": KEY}, {})

    def gateway(self, settings=None):
        gateway = HonchoGateway.for_settings(
            settings or self.settings,
            http_client_factory=lambda: httpx.Client(transport=self.fake.transport()))
        self.addCleanup(gateway.close)
        return gateway

    def test_the_servers_configuration_of_each_peer_is_read(self):
        # Created under another preset: what the server holds, not what this gateway would send,
        # is read.
        directional = self.gateway(dataclasses.replace(self.settings, observation="directional"))
        directional.send([Message("ev_1", "chat-c1", USER, "user", "hi", 1_700_000_000.0)])
        self.assertEqual(self.gateway().session_peer_flags("chat-c1", [USER, AGENT]),
                         {USER: flags(True, True), AGENT: flags(True, True)})

    def test_a_session_or_peer_the_server_does_not_hold_reads_as_none(self):
        gateway = self.gateway()
        gateway.send([Message("ev_1", "chat-c1", USER, "user", "hi", 1_700_000_000.0)])
        self.assertEqual(gateway.session_peer_flags("chat-new", [USER, AGENT]),
                         {USER: None, AGENT: None})
        self.assertEqual(gateway.session_peer_flags("chat-c1", ["stranger"]), {"stranger": None})

    def test_a_peer_the_server_holds_without_flags_reads_as_nones(self):
        gateway = self.gateway()
        # A session created without peers: its first message's sender joins with the server's
        # defaults.
        gateway.call(lambda client: client.session("chat-c1").add_messages(
            MessageCreateParams(content="hi", peer_id=USER)))
        self.assertEqual(gateway.session_peer_flags("chat-c1", [USER]),
                         {USER: {"observe_me": None, "observe_others": None}})

    def test_a_failed_read_leaves_that_peer_and_the_later_ones_out_and_never_raises(self):
        gateway = self.gateway()
        gateway.send([Message("ev_1", "chat-c1", USER, "user", "hi", 1_700_000_000.0)])
        for failing, expected in ((USER, {}), (AGENT, {USER: flags(True, True)})):
            with self.subTest(failing=failing):
                self.fake.fail(match=rf"/peers/{failing}/config$", status=500)
                before = self.fake.count("/config")
                self.assertEqual(gateway.session_peer_flags("chat-c1", [USER, AGENT]), expected)
                self.assertEqual(self.fake.count("/config") - before, 1 if failing == USER else 2)
        refused = self.gateway(build_settings({"outbox_path": temp_outbox_path(self),
                                               "api_url": "https://honcho.test"},
                                              {"HONCHO_API_KEY": "wrong-key-00"}, {}))
        self.assertEqual(refused.session_peer_flags("chat-c1", [USER, AGENT]), {})
        unusable = self.gateway(with_api_url_problem(self.settings, "api_url"))
        self.assertEqual(unusable.session_peer_flags("chat-c1", [USER]), {})

    def test_an_invalid_session_or_peer_id_is_not_requested(self):
        requests = len(self.fake.requests)
        self.assertEqual(self.gateway().session_peer_flags("chat/../x", [USER, "a b"]), {})
        self.assertEqual(len(self.fake.requests), requests)


if __name__ == "__main__":
    unittest.main()
