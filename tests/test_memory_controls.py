"""Memory controls: the agent's self-model and the dialectic note in the pack, recall modes, context
cadence, and their independence from each other."""

from __future__ import annotations

import unittest

import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)
from conversation import Conversation
from idle import wait_idle

from honcho_hub.ops.status import build_status, gather_parts, status_text
from honcho_hub.recall.pack import AGENT_TITLE, NOTE_TITLE, ContextData, build_pack, estimate_tokens
from honcho_hub.runtime import process_state

# a session's context (query-aware) or a peer's (the base load): counted apart below
CONTEXT = "/context"


def used_tokens(pack) -> int:
    return sum(estimate_tokens(title) + estimate_tokens(text) + 2 for title, text in pack.sections)


class PackSectionsTest(unittest.TestCase):
    USER = ContextData(
        representation="\n".join(f"The user likes thing number {i}." for i in range(200)),
        card=["Name: Ada"], summary="They talked about tea.")

    def with_agent(self, **kw) -> ContextData:
        return ContextData(**{**self.USER.__dict__, "agent_representation": "\n".join(
            f"The agent tends to do habit number {i}." for i in range(200)),
            "agent_card": ["Role: helper"], **kw})

    def test_the_self_model_gets_its_share_and_the_user_sections_the_rest(self):
        for budget, share in ((500, 0.25), (1000, 0.5), (400, 0.1)):
            with self.subTest(budget=budget, share=share):
                pack = build_pack(self.with_agent(), budget, agent_share=share)
                agent = [s for s in pack.sections if s[0] == AGENT_TITLE]
                self.assertEqual(len(agent), 1)
                self.assertLessEqual(
                    estimate_tokens(agent[0][0]) + estimate_tokens(agent[0][1]) + 2,
                    int(budget * share))
                # the share is used
                self.assertGreater(estimate_tokens(agent[0][1]), int(budget * share) * 0.7)
                self.assertLessEqual(used_tokens(pack), budget)
                user_only = [s for s in pack.sections if s[0] != AGENT_TITLE]
                self.assertLessEqual(sum(estimate_tokens(t) + estimate_tokens(x) + 2
                                         for t, x in user_only),
                                     budget - int(budget * share))

    def test_without_a_self_model_or_a_share_the_pack_is_what_it_was(self):
        before = build_pack(self.USER, 500)
        # nothing to show: no budget kept
        self.assertEqual(build_pack(self.USER, 500, agent_share=0.5), before)
        self.assertEqual(build_pack(self.with_agent(), 500, agent_share=0.0), before)

    def test_the_self_model_holds_its_card_after_its_representation(self):
        data = ContextData(agent_representation="Tends to answer briefly.",
                           agent_card=["Role: helper"])
        pack = build_pack(data, 500, agent_share=0.25)
        self.assertEqual(pack.sections,
                         ((AGENT_TITLE, "Tends to answer briefly.\n\n- Role: helper"),))

    def test_the_note_comes_first_and_counts_against_the_budget(self):
        pack = build_pack(self.USER, 300,
                          note="The user is planning a winter trip; keep answers short.")
        self.assertEqual(pack.sections[0],
                         (NOTE_TITLE, "The user is planning a winter trip; keep answers short."))
        self.assertLessEqual(used_tokens(pack), 300)
        self.assertEqual(build_pack(self.USER, 300, note="  "), build_pack(self.USER, 300))


def session_context_calls(conversation: Conversation) -> int:
    return sum(1 for r in conversation.bench.sent
               if r.method == "GET" and "/sessions/" in r.url.path
               and r.url.path.endswith(CONTEXT))


def know_the_user(conversation: Conversation, agent_self: str | None = None, agent_card=()) -> None:
    fake, ws = conversation.bench.fake, conversation.settings.workspace_id
    for peer in ("agent-zero", "user"):
        fake.ensure_peer(ws, peer)
    fake.representations[("agent-zero", "user")] = "The user drinks green tea."
    fake.cards[("agent-zero", "user")] = ["Name: Ada"]
    if agent_self:
        fake.representations[("agent-zero", "agent-zero")] = agent_self
        fake.cards[("agent-zero", "agent-zero")] = list(agent_card)


class ContextCadenceTest(unittest.TestCase):
    def test_the_context_call_comes_every_cadence_turns_and_turns_between_reuse_the_last_load(self):
        for cadence, turns, calls_at in ((1, 5, [1, 2, 3, 4, 5]), (3, 7, [1, 4, 7]),
                                         (5, 12, [1, 6, 11])):
            with self.subTest(cadence=cadence):
                conversation = Conversation(self, context_cadence=cadence)
                know_the_user(conversation)
                made, sources, blocks = [], [], []
                for turn in range(1, turns + 1):
                    before = session_context_calls(conversation)
                    result = conversation.turn("c1", f"question number {turn} about tea")
                    if session_context_calls(conversation) > before:
                        made.append(turn)
                    sources.append(result.source)
                    blocks.append(result.block)
                self.assertEqual(made, calls_at)
                for turn in range(1, turns + 1):
                    if turn not in calls_at:
                        self.assertEqual(sources[turn - 1], "reused")
                        # the last load, as it was
                        self.assertEqual(blocks[turn - 1], blocks[turn - 2])
                    else:
                        self.assertEqual(sources[turn - 1], "hit")  # the load started at capture

    def test_cadence_counts_each_chat_on_its_own(self):
        conversation = Conversation(self, context_cadence=2)
        for chat in ("a", "b", "a", "b", "a"):
            conversation.turn(chat, f"something to ask in chat {chat}")
        calls = [r.url.path.split("/sessions/")[1].split("/")[0] for r in conversation.bench.sent
                 if "/sessions/" in r.url.path and r.url.path.endswith(CONTEXT)]
        self.assertEqual(calls, ["chat-a", "chat-b", "chat-a"])  # turns 1 and 3 of a, turn 1 of b

    def test_a_deliberate_recall_between_cadence_turns_still_asks_honcho(self):
        conversation = Conversation(self, context_cadence=10)
        conversation.turn("c1", "first question about tea")
        before = session_context_calls(conversation)
        conversation.recaller.recall(conversation.settings, "chat-c1", "what about cups?",
                                     "{{sections}}",
                                     deliberate=True, wait_s=5)
        self.assertEqual(session_context_calls(conversation), before + 1)


def chat_calls(conversation: Conversation) -> int:
    return conversation.count("POST", "/peers/agent-zero/chat")


class DialecticLayerTest(unittest.TestCase):
    def test_off_by_default_automatic_recall_never_calls_the_dialectic(self):
        conversation = Conversation(self)
        know_the_user(conversation)
        for turn in range(6):
            result = conversation.turn("c1", f"tell me something, turn {turn}")
            self.assertNotIn(NOTE_TITLE, result.block)
        self.assertEqual(chat_calls(conversation), 0)
        self.assertEqual(conversation.recaller.dialectic_counters()["started"], 0)

    def test_on_the_pack_carries_the_note_once_it_is_ready(self):
        conversation = Conversation(self, dialectic_enabled=True)
        know_the_user(conversation)
        conversation.bench.fake.dialectic_answer = ("Ada is planning a winter tea tasting;"
                                                    " keep it practical.")
        result = conversation.turn("c1", "what tea should I bring?")
        self.assertIn(NOTE_TITLE, result.block)
        self.assertIn("winter tea tasting", result.block)
        self.assertIn("green tea", result.block)  # beside what recall loaded

    def calls_per_turn(self, turns: int, **settings) -> list[tuple[int, int]]:
        """(context calls, dialectic calls) each turn made, over `turns` turns of one chat."""
        conversation = Conversation(self, **settings)
        know_the_user(conversation)
        made = []
        for turn in range(1, turns + 1):
            context, chat = session_context_calls(conversation), chat_calls(conversation)
            conversation.turn("c1", f"question {turn} about tea")
            made.append((session_context_calls(conversation) - context,
                         chat_calls(conversation) - chat))
        return made

    def test_per_turn_context_and_a_depth_two_dialectic_every_fifth_turn_call_as_expected(self):
        made = self.calls_per_turn(12, dialectic_enabled=True, dialectic_cadence=5,
                                   dialectic_depth=2)
        self.assertEqual(made, [(1, 2) if turn in (1, 6, 11) else (1, 0) for turn in range(1, 13)])

    def test_context_cadence_and_dialectic_cadence_count_independently(self):
        made = self.calls_per_turn(9, context_cadence=4, dialectic_enabled=True,
                                   dialectic_cadence=3)
        self.assertEqual(made, [(int(t in (1, 5, 9)), int(t in (1, 4, 7))) for t in range(1, 10)])

    def test_the_note_keeps_its_place_on_turns_that_reuse_the_last_load(self):
        conversation = Conversation(self, context_cadence=2, dialectic_enabled=True,
                                    dialectic_cadence=2)
        know_the_user(conversation)
        conversation.bench.fake.dialectic_answer = "Ada wants short answers."
        conversation.turn("c1", "first question about tea")
        result = conversation.turn("c1", "second question about tea")
        self.assertEqual(result.source, "reused")
        self.assertIn("Ada wants short answers.", result.block)

    def test_a_cold_question_before_anything_is_known_and_a_warm_one_after(self):
        conversation = Conversation(self, dialectic_enabled=True, dialectic_cadence=1)
        conversation.turn("c1", "hello there, first message")
        know_the_user(conversation)
        # the base pack was loaded empty: forget it, as its short TTL would
        conversation.recaller.clear_cache()
        conversation.turn("c1", "second message about tea")
        questions = [request["query"] for request in conversation.bench.fake.chat_requests]
        self.assertIn("Who is this person?", questions[0])
        self.assertIn("what context about the user matters most", questions[-1])

    def test_prewarm_of_a_new_chat_hands_its_note_to_the_first_turn(self):
        conversation = Conversation(self, dialectic_enabled=True)
        know_the_user(conversation)
        conversation.bench.fake.dialectic_answer = "Ada likes green tea and short answers."
        self.assertTrue(conversation.recaller.prewarm(conversation.settings, "chat-new"))
        self.assertTrue(wait_idle(30, conversation.recaller))
        calls = chat_calls(conversation)
        result = conversation.turn("new", "what should I drink?")
        self.assertEqual(chat_calls(conversation), calls)  # the first turn asked nothing more
        self.assertIn("Ada likes green tea and short answers.", result.block)

    def test_prewarm_is_off_with_the_dialectic_off_or_its_switch_off(self):
        for settings in ({}, {"dialectic_enabled": True, "dialectic_prewarm": False}):
            with self.subTest(settings=settings):
                conversation = Conversation(self, **settings)
                self.assertFalse(conversation.recaller.prewarm(conversation.settings, "chat-new"))
                self.assertTrue(wait_idle(30, conversation.recaller))
                self.assertEqual(chat_calls(conversation), 0)


class StatusOfTheControlsTest(unittest.TestCase):
    def test_status_shows_the_mode_the_cadences_and_what_the_dialectic_did(self):
        conversation = Conversation(self, recall_mode="context", context_cadence=2,
                                    dialectic_enabled=True, dialectic_cadence=2, dialectic_depth=2)
        know_the_user(conversation)
        for turn in range(3):
            conversation.turn("c1", f"question {turn} about tea")
        parts = gather_parts(conversation.settings, process_state(), recaller=conversation.recaller)
        status = build_status(conversation.settings, parts, conversation.bench.clock())
        recall = status["recall"]
        self.assertEqual((recall["mode"], recall["context_cadence"], recall["cache"]["reused"]),
                         ("context", 2, 1))
        self.assertEqual({k: recall["dialectic"][k]
                          for k in ("enabled", "cadence", "depth", "started", "done")},
                         {"enabled": True, "cadence": 2, "depth": 2, "started": 2, "done": 2})
        text = status_text(status)
        self.assertIn("recall context", text)
        self.assertIn("Dialectic every 2 turns, depth 2: 2 notes, 0 failed", text)


class AgentSelfModelTest(unittest.TestCase):
    def test_off_by_default_no_request_for_the_self_model_and_no_section(self):
        conversation = Conversation(self)
        know_the_user(conversation, agent_self="The agent answers briefly.")
        conversation.turn("c1", "what tea do I like?")
        result = conversation.turn("c1", "and what cups?")
        self.assertNotIn(AGENT_TITLE, result.block)
        self.assertFalse(any(r.url.params.get("target") in (None, "agent-zero")
                             and r.url.path.endswith("/peers/agent-zero/context")
                             for r in conversation.bench.sent))

    def test_on_the_pack_carries_the_agents_model_of_itself_within_its_share(self):
        conversation = Conversation(self, include_agent_representation=True,
                                    agent_representation_share=0.2, observation="directional")
        know_the_user(conversation, agent_self="The agent answers briefly and checks its sources.",
                      agent_card=["Role: research helper"])
        conversation.turn("c1", "what tea do I like?")
        result = conversation.turn("c1", "and what cups?")
        self.assertIn(AGENT_TITLE, result.block)
        self.assertIn("checks its sources", result.block)
        self.assertIn("Role: research helper", result.block)
        self.assertIn("green tea", result.block)  # the user's part is still there
        agent = next(text for title, text in result.pack.sections if title == AGENT_TITLE)
        self.assertLessEqual(estimate_tokens(AGENT_TITLE) + estimate_tokens(agent) + 2,
                             int(500 * 0.2))

    def test_a_self_model_honcho_has_not_derived_gives_no_section_and_no_error(self):
        conversation = Conversation(self, include_agent_representation=True)
        # seed: the agent is not modelled, so Honcho holds nothing about it
        know_the_user(conversation)
        result = conversation.turn("c1", "what tea do I like?")
        result = conversation.turn("c1", "and what cups?")
        self.assertNotIn(AGENT_TITLE, result.block)
        self.assertIn("green tea", result.block)


if __name__ == "__main__":
    unittest.main()
