"""Memory controls against a real Honcho, through HonchoGateway and Recaller as the plugin uses
them: the agent's self-model under the observation presets, and the opt-in dialectic note
(unscoped, and scoped: a scope and no session in the request)."""

from __future__ import annotations

import unittest

from idle import wait_idle
from real_kit import AGENT, USER, RealHonchoCase, await_derivation, turns

from honcho_hub.recall.pack import AGENT_TITLE, NOTE_TITLE
from honcho_hub.recall.recaller import Recaller

TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"
CHAT = ["I grow tomatoes on my balcony", "I will keep answers short and cite sources.",
        "I water them every evening", "I checked two gardening guides for that."]


def own_representation(gateway) -> str:
    return gateway.call(lambda client: gateway.reader_peer(AGENT).representation()) or ""


class SelfModelUnderDirectionalTest(RealHonchoCase):
    """`directional` creates the session with the agent's observe_me true: Honcho models the agent
    too."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.gateway_ = cls.class_gateway(observation="directional")
        gateway.send(turns("chat-self", CHAT))
        await_derivation(gateway, "the agent's conclusions about itself",
                         until=lambda: "cite sources" in own_representation(gateway))
        gateway.call(lambda client: gateway.reader_peer(AGENT).set_card(
            ["A careful research helper"]))

    def recall(self, **plugin):
        recaller = Recaller()
        self.addCleanup(recaller.close)
        settings = self.settings(observation="directional", recall_timeout_s=20, **plugin)
        recaller.warm(settings)
        self.assertTrue(wait_idle(30, recaller))
        return recaller.recall(settings, "chat-self", "how do I water tomatoes?", TEMPLATE)

    def test_the_session_holds_the_agents_observe_me_true(self):
        flags = self.gateway_.call(lambda client: self.gateway_.reader_session("chat-self")
                                   .get_peer_configuration(AGENT))
        self.assertTrue(flags.observe_me)

    def test_the_pack_carries_the_agents_model_of_itself_when_asked_for(self):
        result = self.recall(include_agent_representation=True, max_context_tokens=2000)
        self.assertIn(AGENT_TITLE, result.block)
        self.assertIn("cite sources", result.block)
        self.assertIn("A careful research helper", result.block)
        self.assertIn("tomatoes", result.block)  # and what it knows about the user

    def test_without_the_setting_the_pack_has_no_self_model(self):
        result = self.recall(max_context_tokens=2000)
        self.assertNotIn(AGENT_TITLE, result.block)
        self.assertIn("tomatoes", result.block)


class NoSelfModelUnderSeedTest(RealHonchoCase):
    """`seed` (the default) leaves the agent unmodelled: its messages give Honcho nothing about
    it."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.gateway_ = cls.class_gateway()
        gateway.send(turns("chat-seed", CHAT))
        await_derivation(gateway, "the deriver's work on chat-seed", session_id="chat-seed")

    def test_the_agent_has_no_representation_of_itself_and_the_pack_no_section(self):
        self.assertNotIn("cite sources", own_representation(self.gateway_))
        recaller = Recaller()
        self.addCleanup(recaller.close)
        settings = self.settings(include_agent_representation=True, recall_timeout_s=20,
                                 max_context_tokens=2000)
        recaller.warm(settings)
        self.assertTrue(wait_idle(30, recaller))
        result = recaller.recall(settings, "chat-seed", "how do I water tomatoes?", TEMPLATE)
        self.assertNotIn(AGENT_TITLE, result.block)
        self.assertIn("tomatoes", result.block)
        self.assertEqual(USER, settings.user_peer_id)


class DialecticNoteTest(RealHonchoCase):
    """The real server's dialectic is its deterministic fake LLM: "Based on what I know (fake LLM
    answer to '<query>'): <observations>"."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.gateway_ = cls.class_gateway()
        gateway.send(turns("chat-dia", CHAT, scope_id="proj-dia"))
        await_derivation(gateway, "the deriver's work on chat-dia", session_id="chat-dia")

    def turn(self, scope_id: str | None, **plugin):
        recaller = Recaller()
        self.addCleanup(recaller.close)
        settings = self.settings(dialectic_enabled=True, recall_timeout_s=20,
                                 max_context_tokens=2000, **plugin)
        self.assertTrue(recaller.prefetch(settings, "chat-dia",
                                          "how often should I water my tomatoes?", scope_id))
        self.assertTrue(wait_idle(120, recaller))
        return recaller, recaller.recall(settings, "chat-dia",
                                         "how often should I water my tomatoes?", TEMPLATE,
                                         scope_id)

    def test_the_note_of_the_turn_reaches_the_pack(self):
        recaller, result = self.turn(None, dialectic_depth=2)
        self.assertIn(NOTE_TITLE, result.block)
        self.assertIn("Based on what I know", result.block)
        self.assertIn("tomatoes", result.block)
        counters = recaller.dialectic_counters()
        self.assertEqual((counters["started"], counters["done"], counters["failed"]), (1, 1, 0))

    def test_a_scoped_chat_asks_through_its_scope_without_a_session(self):
        recaller, result = self.turn("proj-dia")
        self.assertIn(NOTE_TITLE, result.block)
        counters = recaller.dialectic_counters()
        self.assertEqual((counters["done"], counters["failed"], counters["unscoped"]), (1, 0, 0))


if __name__ == "__main__":
    unittest.main()
