"""Session.context as recall requests it, and scopes (creation, membership, scoped context,
backfill status), against a real Honcho, through HonchoGateway, Recaller and ScopeRegistrar."""

import unittest

from real_kit import (
    AGENT,
    USER,
    RealHonchoCase,
    await_derivation,
    conclusions_about,
    turns,
    user_turns,
)

from honcho_hub.gateway.registrar import ScopeRegistrar
from honcho_hub.recall.recaller import Recaller

TEA, CAT, LISBON = "I drink green tea every morning", "my cat is called Miso", "I live in Lisbon"
VIOLIN, FOOTBALL = "I play the violin", "Saturday football match"
TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"


class ContextTest(RealHonchoCase):
    """chat-a (in scope proj-a): tea, cat, Lisbon with agent replies; chat-b (no scope): violin,
    football."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.gateway_ = cls.class_gateway()
        cls.chat_a = turns("chat-a", [TEA, "Noted.", CAT, "Cute.", LISBON, "Lovely city."],
                           scope_id="proj-a")
        gateway.send(cls.chat_a)
        gateway.send(user_turns("chat-b", [VIOLIN, FOOTBALL]))
        gateway.call(lambda c: gateway.reader_peer(AGENT).set_card(["likes tea"], target=USER))
        await_derivation(gateway, "five conclusions of the agent about the user",
                         until=lambda: len(conclusions_about(gateway, AGENT, USER)) >= 5)
        await_derivation(gateway, "chat-a's summary", session_id="chat-a")

    def context(self, **kw):
        args = dict(query=None, tokens=2000, target=USER, perspective=AGENT)
        return self.gateway_.context("chat-a", **{**args, **kw})

    def test_the_agents_view_holds_every_chats_conclusions_its_card_and_the_summary(self):
        data = self.context()
        for said in (TEA, CAT, LISBON, VIOLIN, FOOTBALL):
            self.assertIn(f"user said: {said}", data.representation)
        self.assertEqual(data.card, ("likes tea",))
        self.assertTrue(data.summary.startswith("Summary of the conversation (fake LLM): user: "
                                                + TEA), data.summary)

    def test_messages_are_the_newest_of_the_session_oldest_first(self):
        data = self.context()
        sent = tuple((m.peer_id, m.content) for m in self.chat_a)
        self.assertTrue(data.messages, "no messages in the context")
        self.assertEqual(data.messages, sent[-len(data.messages):])

    def test_a_smaller_token_budget_keeps_fewer_of_the_newest_messages(self):
        small, large = self.context(tokens=40).messages, self.context(tokens=2000).messages
        self.assertLess(len(small), len(large))
        self.assertEqual(small, large[len(large) - len(small):])

    def test_a_search_query_with_top_k_one_keeps_the_matching_conclusion(self):
        data = self.context(query="violin", top_k=1, max_conclusions=1)
        self.assertIn(f"user said: {VIOLIN}", data.representation)
        for other in (TEA, CAT, LISBON, FOOTBALL):
            self.assertNotIn(other, data.representation)

    def test_limit_to_session_keeps_this_chats_conclusions_and_drops_the_card(self):
        data = self.context(limit_to_session=True)
        self.assertIn(f"user said: {TEA}", data.representation)
        self.assertNotIn(VIOLIN, data.representation)
        self.assertEqual(data.card, ())

    def test_the_scope_replaces_the_perspective_and_sees_only_its_sessions(self):
        data = self.context(scope="proj-a", query="violin tea", top_k=5)
        self.assertIn(f"user said: {TEA}", data.representation)
        self.assertNotIn(VIOLIN, data.representation)

    def test_the_users_own_perspective_is_another_view(self):
        own = self.context(perspective=USER)
        self.assertIn(f"user said: {VIOLIN}", own.representation)  # the user observes itself
        self.assertEqual(own.card, ())  # the card was set for the agent's view only

    def test_recall_packs_what_the_settings_ask_for(self):
        cases = {
            "messages included": ({"recall_include_messages": True}, None,
                                  ["Lovely city.", "likes tea"], []),
            "messages left out": ({"recall_include_messages": False}, None, ["likes tea"],
                                  ["Lovely city.", "Relevant recent messages"]),
            "through the chat's scope": ({}, "proj-a", [TEA], [VIOLIN]),
        }
        for name, (plugin, scope, present, absent) in cases.items():
            with self.subTest(name):
                settings = self.settings(recall_timeout_s=20, max_context_tokens=2000,
                                         search_top_k=3, **plugin)
                recaller = Recaller()
                self.addCleanup(recaller.close)
                result = recaller.recall(settings, "chat-a", "what about tea", TEMPLATE, scope)
                self.assertEqual(result.source, "fresh")
                for text in present:
                    self.assertIn(text, result.block)
                for text in absent:
                    self.assertNotIn(text, result.block)
                self.assertIsNone(recaller.scope_problem)


class FirstTurnTest(RealHonchoCase):
    """A new install's first turn: recall runs before the first message is delivered (no peers, no
    session)."""

    def test_recall_before_anything_was_delivered_is_an_empty_pack_not_an_error(self):
        for scope in (None, "proj-new"):
            with self.subTest(scope=scope):
                recaller = Recaller()
                self.addCleanup(recaller.close)
                result = recaller.recall(self.settings(recall_timeout_s=20), "chat-first",
                                         "hello there, remember me", TEMPLATE, scope)
                self.assertEqual((result.source, result.block, recaller.scope_problem),
                                 ("fresh", "", None))


class ScopeTest(RealHonchoCase):
    def test_the_registrar_creates_the_scope_and_the_session_with_its_peers_settings(self):
        registrar = ScopeRegistrar(lambda s: self.gateway())
        self.assertTrue(registrar.register(self.settings(), "chat-registered", "proj-reg"))
        gateway = self.gateway()
        scope = gateway.call(lambda c: c.get_scope("proj-reg"))
        self.assertEqual([s.id for s in gateway.call(lambda c: scope.sessions())],
                         ["chat-registered"])
        config = gateway.call(lambda c: gateway.reader_session("chat-registered")
                              .get_peer_configuration(AGENT))
        self.assertEqual((config.observe_me, config.observe_others), (False, True))

    def test_delivery_puts_each_session_in_its_scope_before_its_messages(self):
        gateway = self.gateway()
        gateway.send(user_turns("chat-s1", ["first"], scope_id="proj-del"))
        gateway.send(user_turns("chat-s2", ["second"], scope_id="proj-del"))
        scope = gateway.call(lambda c: c.get_scope("proj-del"))
        self.assertEqual(sorted(s.id for s in gateway.call(lambda c: scope.sessions())),
                         ["chat-s1", "chat-s2"])
        # They joined empty: nothing to backfill.
        self.assertEqual(gateway.scope_status("proj-del"), {})
        self.assertIsNone(gateway.scope_problem)

    def test_a_session_with_history_joining_a_scope_is_backfilled(self):
        gateway = self.gateway()
        gateway.send(user_turns("chat-old", ["I collect stamps"]))
        await_derivation(gateway, "a conclusion from the old chat",
                         until=lambda: conclusions_about(gateway, AGENT, USER))
        gateway.ensure_session_in_scope("chat-old", "proj-late")
        self.assertIn(gateway.scope_status("proj-late").get("chat-old"), ("pending", "completed"))
        await_derivation(gateway, "the backfill of chat-old to complete",
                         until=lambda: (gateway.scope_status("proj-late")
                                        == {"chat-old": "completed"}))
        data = gateway.context("chat-old", query=None, tokens=500, target=USER, perspective=AGENT,
                               scope="proj-late")
        self.assertIn("user said: I collect stamps", data.representation)


if __name__ == "__main__":
    unittest.main()
