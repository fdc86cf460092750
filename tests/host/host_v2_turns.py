"""Agent Zero v2.x's turns in a real Agent Zero v1.7 against a real Honcho (issue 24, items 1-3).

Only v1.7 runs here: the test plugin `v2x_emulation` (tests/host/v2x_emulation, copied into the
tree beside this plugin) makes it do what v2.x does, through extensions; Agent Zero is not changed.
- agent_init `_10_initial_message.py` replaces v1.7's file of that name by v2.x's: agent 0 of a
  chat whose log is empty gets the placeholder user turn (`fw.initial_user_message.md`, "Hello!",
  a prompt of the test plugin: v1.7 has none) through `hist_add_user_message`, then the greeting
  through `hist_add_ai_response(..., llm_result=LLMResult.non_llm())`.
- `hist_add_ai_response` start and end (`_10_`, before the plugin's `_50_`): v1.7's method takes
  no `llm_result`, so the start extension takes it out of the call and the end one puts it back
  into `data["kwargs"]`. In a chat switched to Responses mode, the call of v1.7's message loop (the
  only caller passing an `id` keyword) gets what v2.x's loop passes: a result in mode "responses"
  whose function calls are the reply's tool request (none for plain text). An interrupted partial
  answer gets none, the greeting non_llm.
- `process_tools` start: v2.x's `process_llm_result_tools` in Responses mode. A reply holding no
  tool request is the final answer: run as the `response` tool with {"text": reply} (the v2.x
  version whose `tool_execute_after` sees it too), or the turn ends with it and no tool runs (the
  version AGENT_ZERO.md describes).
- `AgentContext.nudge` start: v2.x's nudge, `UserMessage("", system_message=[fw.msg_nudge.md])`.
- `chat_model_call_after` (a test device, not v2.x): the human sends a message while the chat is
  busy, right after a chosen reply, so that v1.7's loop keeps the reply as an interrupted answer.

Recall loads are read from the plugin's status (`recall.cache.loads`): a query-aware load started
by a capture's prefetch or by the recall hook counts there.
"""

from __future__ import annotations

import os
import unittest

import host_kit

EMULATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "v2x_emulation")
# The switches of tests/host/v2x_emulation/v2x.py, set in a chat's context data.
API_MODE, PLAIN_ANSWER_WAY, INTERRUPT = "_v2x_api_mode", "_v2x_plain_answer_way", "_v2x_interrupt"
PLACEHOLDER = "Hello!"  # tests/host/v2x_emulation/prompts/fw.initial_user_message.md
GREETING_WORDS = "your AI assistant"  # in v1.7's prompts/fw.initial_message.md
NO_SUCH_TOOL = "v2x_probe_tool"  # Agent Zero answers with its `Unknown` tool and goes on

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld(plugins=(EMULATION,))


def settled() -> None:
    """Every background start and recall load the plugin began has finished."""
    from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
    from usr.plugins.honcho.honcho_hub import runtime

    if not runtime.join_background(30):
        raise AssertionError("a background start of the plugin still runs after 30 s")
    host_kit.wait_for(lambda: not hub().recaller().unfinished(), 30, "the recall loads to end")


def recall_loads() -> int:
    """The query-aware recall loads this process started, as status counts them."""
    settled()
    return host_kit.honcho_status(world.host)["recall"]["cache"]["loads"]


def duplicates() -> int:
    """Captured messages the outbox already held (same event id), once the capture writer moved
    every accepted message out of the journal."""
    from usr.plugins.honcho.honcho_hub.capture import kept
    from usr.plugins.honcho.honcho_hub.runtime import process_state

    host_kit.wait_for(lambda: host_kit.honcho_status(world.host)["queue"]["in_journal"] == 0, 30,
                      "the capture journal to be written to the outbox")
    return kept.COUNTERS.of(process_state())["duplicate"]


def queued(ctx) -> list[str]:
    """The text of each event the outbox holds for the chat, in capture order."""
    return [content for _, _, content in host_kit.outbox_rows(world.outbox_path, f"chat-{ctx.id}")]


def in_honcho(ctx, count: int) -> list[str]:
    """What the real Honcho holds for the chat, once it holds at least `count` messages."""
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", count), 30,
                      f"{count} messages of the chat in the real Honcho")
    return world.chat_texts(ctx)


def responses_chat(way: str):
    """A new chat whose model answers through the Responses API; plain answers end the turn `way`
    ("response_tool" or "direct")."""
    ctx = world.host.new_chat()
    ctx.data[API_MODE], ctx.data[PLAIN_ANSWER_WAY] = "responses", way
    return ctx


class PlaceholderTurnTest(unittest.TestCase):
    """Item 1: a new chat's placeholder turn is not the human's."""

    @classmethod
    def setUpClass(cls) -> None:
        before = recall_loads()
        cls.ctx = world.host.new_chat()
        cls.opening = list(cls.ctx.agent0.history.current.messages)
        cls.opening_loads = recall_loads() - before
        world.host.script("Noted: the lighthouse.")
        cls.answer = world.host.turn(cls.ctx, "I restore an old lighthouse in Brittany.")

    def test_a_new_chat_opens_with_the_placeholder_turn_then_the_greeting(self) -> None:
        # The control: the emulation ran, so the checks below are about a chat opened as in v2.x.
        self.assertEqual([m.ai for m in self.opening], [False, True])
        self.assertEqual(self.opening[0].content.get("user_message"), PLACEHOLDER)
        self.assertIn(GREETING_WORDS, str(self.opening[1].content))

    def test_the_placeholder_starts_no_recall_load(self) -> None:
        self.assertEqual(self.opening_loads, 0)

    def test_only_the_humans_message_and_the_answer_are_captured(self) -> None:
        self.assertEqual(self.answer, "Noted: the lighthouse.")
        expected = ["I restore an old lighthouse in Brittany.", "Noted: the lighthouse."]
        self.assertEqual(in_honcho(self.ctx, 2), expected)
        self.assertEqual(queued(self.ctx), expected)


class PlainAnswerTest(unittest.TestCase):
    """Item 2: agent 0's plain-text answer in Responses mode is captured once; other replies are
    not."""

    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        cls.direct = responses_chat("direct")
        host.script({"raw": "Your lighthouse lamp is a Fresnel lens."})
        cls.direct_answer = host.turn(cls.direct, "What kind of lamp does my lighthouse have?")
        cls.both = responses_chat("response_tool")
        before = duplicates()
        host.script({"raw": "Paint the lantern room red."})
        cls.both_answer = host.turn(cls.both, "Which colour for the lantern room?")
        cls.both_duplicates = duplicates() - before
        cls.others = responses_chat("response_tool")
        cls.others.data[INTERRUPT] = {"Half an answer about the fog": "Wait, it is about fog."}
        host.script({"tool_name": NO_SUCH_TOOL, "tool_args": {"probe": "fog"}},
                    {"raw": "Half an answer about the fog"},
                    {"raw": "Fog horns sound every thirty seconds."})
        cls.others_answer = host.turn(cls.others, "How often does a fog horn sound?")

    def test_a_plain_answer_that_ends_the_turn_itself_is_captured(self) -> None:
        self.assertEqual(self.direct_answer, "Your lighthouse lamp is a Fresnel lens.")
        expected = ["What kind of lamp does my lighthouse have?",
                    "Your lighthouse lamp is a Fresnel lens."]
        self.assertEqual(in_honcho(self.direct, 2), expected)
        self.assertEqual(queued(self.direct), expected)

    def test_a_plain_answer_that_also_runs_the_response_tool_is_one_event(self) -> None:
        self.assertEqual(self.both_answer, "Paint the lantern room red.")
        # Both captures reached the outbox, the second under the first's event id.
        self.assertEqual(self.both_duplicates, 1)
        expected = ["Which colour for the lantern room?", "Paint the lantern room red."]
        self.assertEqual(in_honcho(self.both, 2), expected)
        self.assertEqual(queued(self.both), expected)

    def test_a_tool_call_an_interrupted_answer_and_the_greeting_are_not_captured(self) -> None:
        self.assertEqual(self.others_answer, "Fog horns sound every thirty seconds.")
        expected = ["How often does a fog horn sound?", "Wait, it is about fog.",
                    "Fog horns sound every thirty seconds."]
        self.assertEqual(in_honcho(self.others, 3), expected)
        self.assertEqual(queued(self.others), expected)

    def test_outside_responses_mode_a_reply_is_captured_only_through_the_response_tool(self):
        # v1.7 as it is: a plain-text reply is a misformatted one, not an answer.
        ctx = world.host.new_chat()
        world.host.script({"raw": "Not an answer in v1.7."}, "The keeper's answer.")
        self.assertEqual(world.host.turn(ctx, "Who keeps the light?"), "The keeper's answer.")
        expected = ["Who keeps the light?", "The keeper's answer."]
        self.assertEqual(in_honcho(ctx, 2), expected)
        self.assertEqual(queued(ctx), expected)


class EmptyNudgeTest(unittest.TestCase):
    """Item 3: v2.x's nudge, an empty user message with the prompt as a system message."""

    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        cls.ctx = host.new_chat()
        host.script("Noted: the keeper's log.", "Carrying on with the log.")
        host.turn(cls.ctx, "Transcribe the keeper's log of 1911.")
        before = recall_loads()
        cls.nudged = cls.ctx.nudge().result_sync(60)
        cls.nudge_loads = recall_loads() - before
        cls.nudge_message = cls.ctx.agent0.last_user_message

    def test_the_nudge_reached_agent_zero_as_an_empty_message(self) -> None:
        # The control: v1.7 ran v2.x's nudge.
        self.assertEqual(self.nudged, "Carrying on with the log.")
        self.assertNotIn("user_message", self.nudge_message.content)
        self.assertIn("Nudged", str(self.nudge_message.content.get("system_message")))

    def test_the_nudge_is_not_captured(self) -> None:
        expected = ["Transcribe the keeper's log of 1911.", "Noted: the keeper's log.",
                    "Carrying on with the log."]
        self.assertEqual(in_honcho(self.ctx, 3), expected)
        self.assertEqual(queued(self.ctx), expected)

    def test_the_nudge_starts_no_recall_load(self) -> None:
        self.assertEqual(self.nudge_loads, 0)


if __name__ == "__main__":
    unittest.main()
