"""The user turns Agent Zero makes itself, told by marks set where it sends them: v1.7's nudge
(its prompt as the user's text) and v2.x's placeholder turn (added during `Agent.__init__`). The
capture hook runs on the event loop: it reads no prompt file (issue 24's review)."""

import asyncio
import os
import types
import unittest

from hub_testkit import (
    NUDGE_TEXT,
    StubAgent,
    StubHistoryMessage,
    import_by_path,
    stub_agent_zero,
)
from idle import wait_idle
from outbox_helpers import stub_host_events

USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
SENT_EXT = ("extensions/python/_functions/agent/AgentContext/communicate/start/"
            "_40_honcho_sent_to_chat.py")
NUDGE_START_EXT = "extensions/python/_functions/agent/AgentContext/nudge/start/_50_honcho_nudge.py"
NUDGE_END_EXT = "extensions/python/_functions/agent/AgentContext/nudge/end/_50_honcho_nudge.py"
RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"


class UserMessage:
    """Agent Zero's UserMessage dataclass shape."""

    def __init__(self, message):
        self.message, self.attachments, self.system_message, self.id = message, [], [], ""


class NoPromptAgent(StubAgent):
    """Agent 0 of a chat whose log is still empty (as v2.x's placeholder finds it), whose prompts
    must not be read."""

    def __init__(self):
        super().__init__(0)
        self.context.log = types.SimpleNamespace(logs=[])
        self.context.data = {}
        self.reads = []

    def read_prompt(self, name, **kwargs):
        self.reads.append(name)  # a caller may swallow the error: the test reads this list
        raise AssertionError(f"prompt {name} read by a hook on the event loop")


class FrameworkTurnsTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        from usr.plugins.honcho.honcho_hub import hub

        self.addCleanup(hub.shutdown)

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def started(self, agent):
        """Agent Zero's `agent_init` reached the plugin's extension: the agent is built."""
        self.load(INIT_EXT)(agent=agent).execute()
        return agent

    def added(self, agent, message, history_id):
        """Agent.hist_add_user_message(message) and its end extensions; the history message."""
        result = StubHistoryMessage(False, history_id)
        result.content = {"user_message": message.message}
        self.load(USER_EXT)(agent=agent).execute(data={
            "args": (agent, message), "kwargs": {}, "result": result, "exception": None})
        return result

    def communicated(self, context, message):
        """AgentContext.communicate(message)'s start extensions."""
        self.load(SENT_EXT)(agent=None).execute(data={"args": (context, message), "kwargs": {}})

    def nudged(self, agent):
        """v1.7's AgentContext.nudge(): its start extensions, then `communicate` with the prompt
        as the user's text (the prompt is Agent Zero's read, not ours), then its end ones."""
        data = {"args": (agent.context,), "kwargs": {}}
        self.load(NUDGE_START_EXT)(agent=None).execute(data=data)
        message = UserMessage(NUDGE_TEXT)
        self.communicated(agent.context, message)
        self.load(NUDGE_END_EXT)(agent=None).execute(data=data)
        return self.added(agent, message, "h-nudge")

    def recall_loads(self):
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.honcho_hub import runtime

        self.assertTrue(runtime.join_background(10))
        recaller = hub().recaller()
        self.assertTrue(wait_idle(10, recaller))
        return recaller.cache_counters().get("loads", 0)

    def stored(self):
        return [row[3] for row in stub_host_events(self, self.host)]

    def test_v1_7s_nudge_is_told_by_its_mark_neither_captured_nor_loaded_and_no_prompt_read(self):
        agent = self.started(NoPromptAgent())
        agent.context.log.logs.append("the greeting")
        nudge = self.nudged(agent)
        loop_data = types.SimpleNamespace(iteration=0, extras_persistent={}, user_message=nudge)
        asyncio.run(self.load(RECALL_EXT)(agent=agent).execute(loop_data=loop_data))
        self.assertEqual(self.recall_loads(), 0)
        self.assertEqual(self.stored(), [])
        # the same words typed by the human, after the nudge: theirs
        typed = UserMessage(NUDGE_TEXT)
        self.communicated(agent.context, typed)
        self.added(agent, typed, "h-typed")
        self.assertEqual(self.stored(), [NUDGE_TEXT])
        self.assertEqual(agent.reads, [])

    def test_the_placeholder_added_before_agent_init_ends_is_not_the_humans(self):
        agent = NoPromptAgent()
        self.added(agent, UserMessage("Hello!"), "h-placeholder")  # v2.x's _10_initial_message
        self.assertEqual(self.recall_loads(), 0)
        self.started(agent)
        typed = UserMessage("Hello!")  # the human may say it too, the log still empty
        self.communicated(agent.context, typed)
        self.added(agent, typed, "h-typed")
        self.assertEqual(self.recall_loads(), 1)
        self.assertEqual(self.stored(), ["Hello!"])
        self.assertEqual(agent.reads, [])

    def test_a_message_to_a_chat_that_has_a_log_is_typed_even_on_an_agent_built_before_the_plugin(
            self):
        agent = NoPromptAgent()  # built while the plugin was off: no mark
        agent.context.log.logs.append("the greeting")
        self.added(agent, UserMessage("I keep bees."), "h-1")
        self.assertEqual(self.stored(), ["I keep bees."])
        self.assertEqual(agent.reads, [])


if __name__ == "__main__":
    unittest.main()
