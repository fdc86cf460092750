""""Don't remember this chat" (issue 24, item 9) on plain facts: the state a chat's data holds, what
it skips in capture and recall, which memory-tool verbs it refuses (and, over the fake Honcho, how
`ask` runs there), status's count, and the "This is me" offered beside it in a chat from an unmapped
sender.

The host side (the sidebar's API, Agent Zero's chat file, real turns) is tests/host/
host_dont_remember.py.
"""

import unittest

from test_memory_tool import ToolBench

from honcho_hub.capture.rules import (
    UserMessageFacts,
    prefetches_recall,
    skip_reason_for_tool_result,
    skip_reason_for_user_message,
)
from honcho_hub.chats.rules import (
    NOT_RECALLED,
    NOT_REMEMBERED,
    ChatFacts,
    HumanFacts,
    Remember,
    Sender,
    asks_dialectic,
    offers_this_is_me,
    remember_state,
    skip_reason_for_chat,
    skip_reason_for_recall,
)
from honcho_hub.cli.agent_zero_files import chat_facts
from honcho_hub.errors import InvalidValue
from honcho_hub.ops.status import StatusParts, build_status, status_text
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.values import with_sender_peer
from honcho_hub.tool.actions import ACTIONS, ActionContext, refusal_in_chat, run_action

NOW = 1_700_000_000.0


def settings(**values):
    return build_settings(values, {}, {})


def chat(remember=Remember.YES, **facts):
    return ChatFacts(**{"background": False, "scheduler_run": False, **facts}, remember=remember)


class RememberStateTest(unittest.TestCase):
    def test_the_value_a_chat_keeps_names_its_state_and_an_unknown_one_fails_closed(self):
        cases = {None: Remember.YES, "remember": Remember.YES, "no-capture": Remember.NO_CAPTURE,
                 "off": Remember.OFF, "no-recall": Remember.OFF, "": Remember.OFF,
                 7: Remember.OFF, True: Remember.OFF}
        for value, expected in cases.items():
            with self.subTest(value=value):
                self.assertIs(remember_state(value), expected)


class SkipRulesTest(unittest.TestCase):
    def test_neither_state_captures_anything_of_the_chat(self):
        s = settings()
        for state in (Remember.NO_CAPTURE, Remember.OFF):
            with self.subTest(state=state):
                facts = chat(state)
                self.assertEqual(skip_reason_for_chat(facts, s), NOT_REMEMBERED)
                typed = UserMessageFacts(agent_number=0, intervention=True, is_nudge=False,
                                         chat=facts)
                self.assertEqual(skip_reason_for_user_message(typed, s), NOT_REMEMBERED)
                self.assertEqual(skip_reason_for_tool_result(0, "response", facts, s),
                                 NOT_REMEMBERED)
        self.assertIsNone(skip_reason_for_chat(chat(), s))

    def test_recall_goes_on_under_no_capture_and_stops_under_off(self):
        s = settings()
        self.assertIsNone(skip_reason_for_recall(chat(Remember.NO_CAPTURE), s))
        self.assertEqual(skip_reason_for_recall(chat(Remember.OFF), s), NOT_RECALLED)
        self.assertIsNone(skip_reason_for_recall(chat(), s))

    def test_the_humans_turn_prefetches_recall_unless_recall_is_off_for_the_chat(self):
        s = settings()
        cases = {
            # name: (state, agent number, intervention, nudge, expected)
            "remembered": (Remember.YES, 0, False, False, True),
            "not captured": (Remember.NO_CAPTURE, 0, False, False, True),
            "off": (Remember.OFF, 0, False, False, False),
            "not captured, a nudge": (Remember.NO_CAPTURE, 0, False, True, False),
            "not captured, a superior's message": (Remember.NO_CAPTURE, 1, False, False, False),
            "not captured, an intervention": (Remember.NO_CAPTURE, 0, True, False, False),
        }
        for name, (state, number, intervention, nudge, expected) in cases.items():
            with self.subTest(case=name):
                facts = UserMessageFacts(agent_number=number, intervention=intervention,
                                         is_nudge=nudge, chat=chat(state))
                self.assertIs(prefetches_recall(facts, s), expected)

    def test_only_a_remembered_chat_asks_the_dialectic(self):
        self.assertTrue(asks_dialectic(chat()))
        for state in (Remember.NO_CAPTURE, Remember.OFF):
            with self.subTest(state=state):
                self.assertFalse(asks_dialectic(chat(state)))

    def test_a_backfill_reads_the_state_from_the_chat_file(self):
        for data, expected in (({"honcho_remember": "off"}, Remember.OFF),
                               ({"honcho_remember": "no-capture"}, Remember.NO_CAPTURE),
                               ({}, Remember.YES), (None, Remember.YES)):
            with self.subTest(data=data):
                facts = chat_facts({"type": "user", "data": data}, "Ab3dE6gH", frozenset(),
                                   "agent0")
                self.assertIs(facts.remember, expected)


class ToolRefusalTest(unittest.TestCase):
    def test_which_verbs_each_state_refuses(self):
        refused = {
            Remember.YES: set(),
            Remember.NO_CAPTURE: {"remember", "dream", "profile with facts", "correct"},
            Remember.OFF: {"recall", "search", "ask", "remember", "forget", "dream", "profile",
                           "profile with facts", "correct"},
        }
        verbs = [(name, {}) for name in ACTIONS] + [("profile", {"facts": ["Likes tea"]})]
        for state, expected in refused.items():
            with self.subTest(state=state):
                got = {name + (" with facts" if args else "") for name, args in verbs
                       if refusal_in_chat(name, args, state) is not None}
                self.assertEqual(got, expected)

    def test_a_refusal_is_one_line_and_sends_nothing(self):
        # No gateway: a verb that tried to send would fail loudly instead of answering.
        for state in (Remember.NO_CAPTURE, Remember.OFF):
            with self.subTest(state=state):
                ctx = ActionContext(settings=settings(), remember=state)
                result = run_action("remember", {"content": "The user likes tea."}, ctx)
                self.assertFalse(result.ok)
                self.assertIn("not remembered", result.text)
                self.assertEqual(len(result.text.splitlines()), 1)

    def test_an_unknown_verb_gets_the_usual_error_whatever_the_state(self):
        result = run_action("shout", {}, ActionContext(settings=settings(),
                                                       remember=Remember.OFF))
        self.assertIn("action", result.text)
        self.assertNotIn("not remembered", result.text)


class AskInAChatNotCapturedTest(unittest.TestCase):
    """`ask` in a chat left out of capture, through the real SDK over the fake Honcho: the dialectic
    is asked about the user across memory, naming no session, so the chat's session is not created;
    in a chat that is not the owner's (it may read only its own session) it is refused."""

    def setUp(self):
        self.bench = ToolBench(self)
        self.bench.ctx.remember = Remember.NO_CAPTURE

    def session_requests(self):
        return [path for _, path in self.bench.fake.requests if "/sessions" in path]

    def test_ask_names_no_session_and_none_is_created(self):
        result = self.bench.run("ask", query="What does the user row?")
        self.assertTrue(result.ok, result.text)
        asked = self.bench.fake.chat_requests
        self.assertEqual([(a["target"], a.get("session_id")) for a in asked], [("user", None)])
        self.assertEqual(self.session_requests(), [])
        self.assertEqual(self.bench.fake.sessions, {})

    def test_in_a_chat_not_the_owners_ask_is_refused_in_one_line_and_nothing_is_sent(self):
        bench = ToolBench(self, user_peer_id="telegram-12345")
        bench.ctx.remember, bench.ctx.confined = Remember.NO_CAPTURE, True
        result = bench.run("ask", query="What does the user row?")
        self.assertFalse(result.ok)
        self.assertIn("not remembered", result.text)
        self.assertEqual(len(result.text.splitlines()), 1)
        self.assertEqual((bench.fake.requests, bench.fake.chat_requests), ([], []))


class ThisIsMeTest(unittest.TestCase):
    def test_offered_only_for_a_single_sender_sender_peers_does_not_map(self):
        s = settings(sender_peers="telegram:42=user")
        cases = {
            "an unmapped sender": (Sender("telegram", "7"), True),
            "an unmapped API chat": (Sender("api", "Ab3dE6gH"), True),
            "a mapped sender": (Sender("telegram", "42"), False),
            "a group": (Sender("whatsapp", "12@g.us", group=True), False),
            "a web-UI chat": (None, False),
        }
        for name, (sender, expected) in cases.items():
            with self.subTest(case=name):
                self.assertIs(offers_this_is_me(HumanFacts(sender=sender), s), expected)

    def test_the_sender_is_added_to_sender_peers_as_the_setting_checks_it(self):
        self.assertEqual(with_sender_peer("", "telegram:7", "user"), "telegram:7=user")
        self.assertEqual(with_sender_peer("email:a@x.org=bob ", "telegram:7", "user"),
                         "email:a@x.org=bob,telegram:7=user")
        refused = {"named already": ("telegram:7=bob", "telegram:7", "user"),
                   "a key the setting cannot hold": ("", "email:a=b@x.org", "user"),
                   "a held value it cannot read": ("telegram:7", "telegram:8", "user"),
                   "no text held": (None, "telegram:7", "user")}
        for name, args in refused.items():
            with self.subTest(case=name), self.assertRaises(InvalidValue):
                with_sender_peer(*args)


class StatusCountTest(unittest.TestCase):
    def test_status_counts_chats_not_remembered_by_state_and_says_so_in_its_text(self):
        s = settings()
        empty = build_status(s, StatusParts(), NOW)
        self.assertEqual(empty["chats"]["not_remembered"], {"no-capture": 0, "off": 0})
        self.assertNotIn("not remembered", status_text(empty))
        counted = build_status(s, StatusParts(not_remembered={"no-capture": 2, "off": 1}), NOW)
        self.assertEqual(counted["chats"]["not_remembered"], {"no-capture": 2, "off": 1})
        self.assertIn("Chats not remembered: 2 not captured, 1 neither captured nor recalled",
                      status_text(counted))


if __name__ == "__main__":
    unittest.main()
