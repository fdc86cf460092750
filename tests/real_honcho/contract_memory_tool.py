"""The honcho_memory verbs against a real Honcho, through run_action and gateway/queries: every
search target, conclusions with the ownership check, the dialectic, dreams, and verbs in a
brand-new chat."""

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

from honcho_hub.gateway import queries
from honcho_hub.tool.actions import ActionContext, run_action

TEA, VIOLIN = "I drink green tea every morning", "I play the violin on Saturdays"


class MemoryToolCase(RealHonchoCase):
    def act(self, action: str, session_id: str | None = "chat-tool", **args):
        gateway = self.gateway()
        ctx = ActionContext(settings=self.settings(), session_id=session_id, gateway=gateway,
                            supports_scopes=gateway.supports_scopes)
        return run_action(action, args, ctx)


class SearchAndConclusionsTest(MemoryToolCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.class_gateway()
        gateway.send(turns("chat-tool", [TEA, "Noted.", "my cat is called Miso", "Cute."]))
        gateway.send(user_turns("chat-other", [VIOLIN], scope_id="band"))
        await_derivation(gateway, "the agent's three conclusions about the user",
                         until=lambda: len(conclusions_about(gateway, AGENT, USER)) >= 3)

    def test_every_search_target_ranks_the_matching_item_first(self):
        cases = {
            "conclusions": ({"target": "conclusions", "query": "violin"}, "user said: " + VIOLIN),
            "session": ({"target": "session", "query": "cat"}, "my cat is called Miso"),
            "workspace": ({"target": "workspace", "query": "violin"}, VIOLIN),
            "workspace through a scope": (
                {"target": "workspace", "query": "violin", "scope": "band"}, VIOLIN),
        }
        for name, (args, first) in cases.items():
            with self.subTest(name):
                result = self.act("search", limit=3, **args)
                self.assertTrue(result.ok, result.text)
                self.assertIn(first, result.text.splitlines()[1])

    def test_a_scoped_workspace_search_never_returns_other_sessions(self):
        found = queries.search_workspace(self.gateway(), "tea", 20, "band")
        self.assertEqual({f.where for f in found}, {f"chat-other/{USER}"})

    def test_search_limits_are_honoured(self):
        for target in ("conclusions", "session", "workspace"):
            with self.subTest(target):
                self.assertEqual(len(self.act("search", target=target, query="tea", limit=1)
                                     .text.splitlines()), 2)

    def test_remember_creates_one_conclusion_and_forget_refuses_another_peers(self):
        made = self.act("remember", content="The user prefers oolong to sencha")
        self.assertTrue(made.ok, made.text)
        ours = made.text.removeprefix("Remembered as conclusion ").rstrip(".")
        gateway = self.gateway()
        theirs = queries.create_conclusion(gateway, USER, USER,
                                           "a conclusion of the user about itself", None).id
        self.assertIn(ours, {c.id for c in conclusions_about(gateway, AGENT, USER)})
        refused = self.act("forget", id=theirs, confirm=True)
        self.assertIn("not one of the agent's conclusions", refused.text)
        self.assertIn(theirs, {c.id for c in conclusions_about(gateway, USER, USER)})
        self.assertEqual(self.act("forget", id=ours, confirm=True).text,
                         f"Forgot conclusion {ours}.")
        self.assertNotIn(ours, {c.id for c in conclusions_about(gateway, AGENT, USER)})
        self.assertIn("not one of", self.act("forget", id=ours, confirm=True).text)

    def test_ownership_is_checked_with_the_id_filter_the_server_accepts(self):
        gateway = self.gateway()
        ours = conclusions_about(gateway, AGENT, USER)[0].id
        view = gateway.call(lambda c: gateway.reader_peer(AGENT).conclusions_of(USER))
        self.assertEqual([c.id
                          for c in gateway.call(lambda c: view.get_many([ours, "no-such-id"]))],
                         [ours])
        self.assertEqual(queries.find_conclusion(gateway, AGENT, USER, ours).id, ours)
        self.assertIsNone(queries.find_conclusion(gateway, USER, AGENT, ours))

    def test_ask_is_answered_by_the_dialectic_with_what_honcho_knows(self):
        result = self.act("ask", query="What does the user drink?", reasoning_level="low")
        self.assertTrue(result.ok, result.text)
        self.assertIn("Based on what I know (fake LLM answer to 'What does the user drink?')",
                      result.text)
        self.assertIn(TEA, result.text)

    def test_a_scoped_ask_sees_only_the_scopes_sessions(self):
        answer = queries.ask(self.gateway(), AGENT, USER, "What does the user like?",
                             session_id="chat-tool", scope="band", reasoning_level=None,
                             timeout_s=60)
        self.assertIn(VIOLIN, answer)
        self.assertNotIn("Miso", answer)


class DreamTest(MemoryToolCase):
    def test_a_requested_dream_writes_the_users_card(self):
        gateway = self.gateway()
        gateway.send(turns("chat-tool", [TEA, "Noted."]))
        await_derivation(gateway, "a conclusion about the user",
                         until=lambda: conclusions_about(gateway, AGENT, USER))
        result = self.act("dream")
        self.assertTrue(result.ok, result.text)
        card = await_derivation(gateway, "the dream's card of the user",
                                until=lambda: gateway.context("chat-tool", query=None, tokens=500,
                                                              target=USER, perspective=AGENT).card)
        self.assertEqual(card[:2], (f"IDENTITY: {USER}", f"ATTRIBUTE: {TEA}"))


class NewChatTest(MemoryToolCase):
    """A chat whose first message is still in the outbox: Honcho has no session (nor peers)
    yet."""

    def test_remember_in_a_chat_honcho_has_not_seen_yet(self):
        result = self.act("remember", session_id="chat-brand-new",
                          content="The user is left-handed")
        self.assertTrue(result.ok, result.text)
        self.assertIn("The user is left-handed",
                      [c.content for c in conclusions_about(self.gateway(), AGENT, USER)])

    def test_ask_in_a_chat_honcho_has_not_seen_yet(self):
        result = self.act("ask", session_id="chat-unseen",
                          query="What hand does the user write with?")
        self.assertTrue(result.ok, result.text)

    def test_the_new_chat_keeps_the_peers_observation_settings(self):
        self.act("remember", session_id="chat-settings-first", content="The user likes maps")
        gateway = self.gateway()
        session = gateway.reader_session("chat-settings-first")
        for peer, expected in ((USER, (True, True)), (AGENT, (False, True))):
            with self.subTest(peer=peer):
                # The lambda runs at once, within its own turn of the loop.
                config = gateway.call(lambda c: session.get_peer_configuration(peer))  # noqa: B023
                self.assertEqual((config.observe_me, config.observe_others), expected)


if __name__ == "__main__":
    unittest.main()
