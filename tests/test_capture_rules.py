"""Capture's message-level rules on plain facts: which user-side message is the human's, and which
AI message is agent 0's final plain-text answer (Agent Zero v2.x's turns, issue 24)."""

import unittest
from dataclasses import replace

from honcho_hub.capture.rules import (
    AiMessageFacts,
    UserMessageFacts,
    skip_reason_for_ai_message,
    skip_reason_for_tool_result,
    skip_reason_for_user_message,
)
from honcho_hub.chats.rules import ChatFacts
from honcho_hub.settings.config import build_settings

SETTINGS = build_settings({}, {}, {})
CHAT = ChatFacts(background=False, scheduler_run=False)
TYPED = UserMessageFacts(agent_number=0, intervention=False, is_nudge=False, chat=CHAT)
PLAIN_ANSWER = AiMessageFacts(agent_number=0, responses_mode=True, function_calls=False,
                              holds_tool_request=False, empty=False, chat=CHAT)


class UserMessageRuleTest(unittest.TestCase):
    def test_which_user_side_messages_are_the_humans(self):
        cases = {
            "typed by the human": (TYPED, None),
            "an intervention, whichever agent ran": (
                replace(TYPED, agent_number=2, intervention=True), None),
            "v2.x's nudge and the integrations' system-only messages: no text": (
                replace(TYPED, empty=True), "empty_message"),
            "an empty intervention": (
                replace(TYPED, intervention=True, empty=True), "empty_message"),
            "v2.x's placeholder turn": (replace(TYPED, is_placeholder=True), "placeholder_turn"),
            "v1.7's nudge": (replace(TYPED, is_nudge=True), "framework_nudge"),
            "a superior's message": (replace(TYPED, agent_number=1), "from_superior_agent"),
            "a delegation to v2.x's worker chat, whose agent is agent 0": (
                replace(TYPED, delegated=True), "from_superior_agent"),
            "typed into a subordinate's child chat (sent to the chat)": (
                replace(TYPED, agent_number=1, delegated=True, sent_to_chat=True), None),
            "v1.7's nudge sent to a child chat": (
                replace(TYPED, agent_number=1, delegated=True, sent_to_chat=True, is_nudge=True),
                "framework_nudge"),
            "in a background chat": (
                replace(TYPED, chat=replace(CHAT, background=True), empty=True),
                "background_chat"),
        }
        for name, (facts, expected) in cases.items():
            with self.subTest(name):
                self.assertEqual(skip_reason_for_user_message(facts, SETTINGS), expected)


class AiMessageRuleTest(unittest.TestCase):
    def test_only_agent_zeros_plain_answer_in_responses_mode_is_captured(self):
        cases = {
            "agent 0's plain answer in Responses mode": (PLAIN_ANSWER, None),
            "every v1.7 reply, the greeting and an interrupted answer (no model result)": (
                replace(PLAIN_ANSWER, responses_mode=False), "not_a_plain_answer"),
            "a tool call through the API's function calls": (
                replace(PLAIN_ANSWER, function_calls=True), "tool_call"),
            "a tool request written in the text": (
                replace(PLAIN_ANSWER, holds_tool_request=True), "tool_call"),
            "no text": (replace(PLAIN_ANSWER, empty=True), "empty_message"),
            "a subordinate's answer to its superior": (
                replace(PLAIN_ANSWER, agent_number=1), "subordinate_response"),
            "the answer of v2.x's worker chat's agent 0": (
                replace(PLAIN_ANSWER, delegated=True), "subordinate_response"),
            "in a scheduler chat": (
                replace(PLAIN_ANSWER, chat=replace(CHAT, scheduler_run=True)), "scheduler_chat"),
        }
        for name, (facts, expected) in cases.items():
            with self.subTest(name):
                self.assertEqual(skip_reason_for_ai_message(facts, SETTINGS), expected)

    def test_a_response_tool_call_is_final_only_for_an_agent_0_working_for_no_other(self):
        self.assertIsNone(skip_reason_for_tool_result(0, "response", CHAT, SETTINGS))
        self.assertEqual(skip_reason_for_tool_result(0, "response", CHAT, SETTINGS,
                                                     delegated=True), "subordinate_response")

    def test_with_capture_off_not_even_a_plain_answer_is_captured(self):
        off = build_settings({"capture_enabled": False}, {}, {})
        self.assertEqual(skip_reason_for_ai_message(PLAIN_ANSWER, off), "capture_disabled")


if __name__ == "__main__":
    unittest.main()
