"""Which chat an agent works for (host.root_agent), with Agent Zero-shaped objects: v1.7's
subordinates in the chat, v2.x's child chats and parallel workers; capture and the forget offer
seen from them; and Agent Zero v2.x's tool policy (issue 24, items 4 and 5)."""

import asyncio
import os
import sys
import types
import unittest
from datetime import UTC, datetime

from fake_honcho import FakeHoncho
from hub_testkit import (
    ContextType,
    StubAgent,
    StubContext,
    StubHistoryMessage,
    import_by_path,
    stub_agent_zero,
)
from idle import wait_idle
from loopback import serve
from outbox_helpers import stub_host_events
from test_forget_chat import called_from

USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
RESPONSE_EXT = "extensions/python/tool_execute_after/_50_honcho_capture_response.py"
SENT_EXT = ("extensions/python/_functions/agent/AgentContext/communicate/start/"
            "_40_honcho_sent_to_chat.py")
TOOL_PROMPT_EXT = "extensions/python/system_prompt/_10_honcho_tool_prompt.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
KEY = "hch-child-chats-key-97531"


class UserMessage:
    """Agent Zero's UserMessage dataclass shape."""

    def __init__(self, message):
        self.message, self.attachments, self.system_message, self.id = message, [], [], ""


class Chats:
    """AgentContext's registry (`AgentContext.get`), as the stub `agent` module."""

    def __init__(self):
        self.by_id = {}

    def chat(self, id, type=ContextType.USER, **data):
        context = StubContext(id=id, type=type)
        context.data, context.output_data = dict(data), {}
        context.agent0 = StubAgent(0, context)
        self.by_id[id] = context
        return context

    def get(self, id):
        return self.by_id.get(id)

    def all(self):
        return list(self.by_id.values())


def subordinate_of(superior, context=None, number=None):
    """A subordinate of `superior`: in its chat (v1.7) or, given one, a child chat (v2.x)."""
    agent = StubAgent(superior.number + 1 if number is None else number,
                      context or superior.context)
    agent.data["_superior"] = superior
    if context is not None:
        context.agent0 = agent
    return agent


class ChatsTestCase(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.chats = Chats()
        sys.modules["agent"] = types.SimpleNamespace(AgentContext=self.chats)
        self.addCleanup(sys.modules.pop, "agent", None)
        from usr.plugins.honcho.extensions.honcho_bridge import host
        from usr.plugins.honcho.honcho_hub import hub

        self.addCleanup(hub.shutdown)
        self.bridge = host
        self.root = self.chats.chat("RootChat")

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def child_chat(self, superior, id="ChildCht"):
        context = self.chats.chat(id)
        context.output_data["parent_context_id"] = superior.context.id
        return subordinate_of(superior, context)


class RootAgentTest(ChatsTestCase):
    def test_agent_0_of_a_chat_is_its_own_root(self):
        agent0 = self.root.agent0
        self.assertIs(self.bridge.root_agent(agent0), agent0)
        self.assertFalse(self.bridge.works_for_another_agent(agent0))

    def test_a_v1_7_subordinate_in_the_chat_leads_to_agent_0(self):
        second = subordinate_of(subordinate_of(self.root.agent0))
        self.assertIs(self.bridge.root_agent(second), self.root.agent0)
        self.assertTrue(self.bridge.works_for_another_agent(second))

    def test_nested_v2x_child_chats_lead_to_the_root_chat(self):
        first = self.child_chat(self.root.agent0, "ChildOne")
        second = self.child_chat(first, "ChildTwo")
        self.assertIs(self.bridge.chat_context(second), self.root)
        self.assertEqual(self.bridge.chat_id(second), "RootChat")

    def test_a_child_chat_whose_superior_link_is_gone_leads_by_its_parent_chat(self):
        # `_superior` is not saved with the chat (a restart, a reset): the child chat's output data
        # (saved) still names the parent chat.
        sub = self.child_chat(self.root.agent0)
        del sub.data["_superior"]
        self.assertEqual(self.bridge.chat_id(sub), "RootChat")

    def test_a_parallel_worker_leads_to_the_chat_it_works_for(self):
        worker = self.chats.chat("WorkerCh", type=ContextType.BACKGROUND,
                                 _parallel_parent_context_id="RootChat")
        self.assertEqual(self.bridge.chat_id(worker.agent0), "RootChat")
        self.assertTrue(self.bridge.works_for_another_agent(worker.agent0))
        self.assertFalse(self.bridge.chat_facts(worker.agent0).background)

    def test_a_worker_linked_to_nothing_or_to_a_gone_chat_is_a_background_chat_of_its_own(self):
        for data in ({}, {"_parallel_parent_context_id": "GoneChat"}):
            with self.subTest(data):
                worker = self.chats.chat("WorkerCh", type=ContextType.BACKGROUND, **data)
                self.assertEqual(self.bridge.chat_id(worker.agent0), "WorkerCh")
                self.assertTrue(self.bridge.chat_facts(worker.agent0).background)

    def test_a_cycle_of_superiors_ends(self):
        first, second = StubAgent(1, self.root), StubAgent(2, self.root)
        first.data["_superior"], second.data["_superior"] = second, first
        self.assertIs(self.bridge.root_agent(first), second)

    def test_a_chain_of_superiors_is_walked_only_so_far(self):
        agent = self.root.agent0
        for _ in range(self.bridge.MAX_CHAT_DEPTH + 5):
            agent = subordinate_of(agent)
        self.assertIsNot(self.bridge.root_agent(agent), self.root.agent0)

    def test_the_root_chats_human_and_project_are_the_child_chats(self):
        self.host.config["profile_peers"] = "agent0=carol"
        self.root.agent0.config = types.SimpleNamespace(profile="agent0")
        self.root.project = "Alpha"
        sub = self.child_chat(self.root.agent0)
        sub.config = types.SimpleNamespace(profile="developer")
        self.assertEqual(self.bridge.project_name(sub), "Alpha")
        self.assertEqual(self.bridge.chat_human(sub), "carol")


class CaptureInChildChatsTest(ChatsTestCase):
    def setUp(self):
        super().setUp()
        self.user_ext, self.sent_ext = self.load(USER_EXT), self.load(SENT_EXT)

    def typed(self, agent, message, intervention=False):
        data = {"args": (agent, message), "kwargs": {"intervention": True} if intervention else {},
                "result": StubHistoryMessage(False, f"h-{message.message[:8]}"),
                "exception": None}
        self.user_ext(agent=agent).execute(data=data)

    def sent(self, context, message):
        """AgentContext.communicate's start, as the web UI's message passes it."""
        self.sent_ext(agent=None).execute(data={"args": (context, message), "kwargs": {}})
        return message

    def test_what_the_human_types_into_a_child_chat_is_captured_in_the_root_chats_session(self):
        sub = self.child_chat(self.root.agent0)
        self.typed(sub, UserMessage("Find the harbour office hours."))  # the delegation
        self.typed(sub, self.sent(sub.context, UserMessage("Also check Sundays.")))
        self.typed(sub, UserMessage("and the fuel dock"), intervention=True)
        self.assertEqual([(row[0], row[3]) for row in stub_host_events(self, self.host)],
                         [("chat-RootChat", "Also check Sundays."),
                          ("chat-RootChat", "and the fuel dock")])

    def test_a_delegation_to_a_parallel_workers_agent_0_is_not_captured(self):
        worker = self.chats.chat("WorkerCh", _parallel_parent_context_id="RootChat")
        self.typed(worker.agent0, UserMessage("Summarise the logs."))
        self.assertEqual(stub_host_events(self, self.host), [])

    def test_only_the_root_chats_agent_0_gives_final_answers(self):
        response_ext = self.load(RESPONSE_EXT)
        worker = self.chats.chat("WorkerCh", _parallel_parent_context_id="RootChat")
        for agent in (worker.agent0, self.root.agent0):
            ai_id = f"ai-{agent.context.id}"
            agent.history.current.messages.append(StubHistoryMessage(True, ai_id))
            response_ext(agent=agent).execute(
                response=types.SimpleNamespace(message=f"Done in {agent.context.id}."),
                tool_name="response")
        self.assertEqual([row[3] for row in stub_host_events(self, self.host)],
                         ["Done in RootChat."])

    def test_a_message_that_takes_no_mark_is_not_marked(self):
        from usr.plugins.honcho.extensions.honcho_bridge.capture import mark_sent

        self.assertFalse(mark_sent({"args": (self.root, "plain text"), "kwargs": {}}))


class ForgetOfferTest(ChatsTestCase):
    def offer(self, context):
        """AgentContext.remove's end, called by Agent Zero's chat-delete handler."""
        from usr.plugins.honcho.extensions.honcho_bridge import operations

        data = {"args": (context.id,), "kwargs": {}, "result": context, "exception": None}
        return called_from(os.path.join(os.sep, "a0", "api", "chat_remove.py"), "RemoveChat",
                           lambda: operations.offer_forget_after_chat_delete(data))

    def test_a_deleted_child_chat_is_not_offered_its_root_chat_is(self):
        sub = self.child_chat(self.root.agent0)
        sub.context.agent0 = StubAgent(0, sub.context)  # chat_remove resets it first
        self.assertFalse(self.offer(sub.context))
        self.assertTrue(self.offer(self.root))


class ChatStartTest(ChatsTestCase):
    """What a chat's start warms, prewarms and registers (recall.register_chat at agent_init),
    seen from a v2.x parallel worker: a throwaway chat made for each tool call, linked to the
    root chat before its agent 0 exists."""

    def setUp(self):
        super().setUp()
        self.fake = FakeHoncho(api_key=KEY)
        self.fake.dialectic_answer = "Prewarmed note."
        server = serve(self.fake)
        self.addCleanup(server.close)
        self.host.config.update(api_url=server.url, dialectic_enabled=True)
        self.host.secrets = {"HONCHO_API_KEY": KEY}
        self.root.project = "Alpha"  # a scope to register
        self.worker = self.chats.chat("WorkerCh", type=ContextType.BACKGROUND,
                                      _parallel_parent_context_id="RootChat")
        self.worker.created_at = datetime.now(UTC)

    def test_a_parallel_workers_start_warms_prewarms_and_registers_nothing(self):
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.extensions.honcho_bridge.recall import register_chat
        from usr.plugins.honcho.honcho_hub import runtime

        self.load(INIT_EXT)(agent=self.worker.agent0).execute()
        self.assertTrue(runtime.join_background(10))
        self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
        self.maxDiff = None
        self.assertEqual((self.fake.requests, self.fake.chat_requests), ([], []))
        self.assertFalse(register_chat(self.worker.agent0))

    def test_a_parallel_workers_agent_0_starts_no_new_chat(self):
        self.assertFalse(self.bridge.is_new_user_chat(self.worker.agent0))


class ToolPolicyTest(ChatsTestCase):
    def policy(self, resolve):
        import helpers

        module = types.ModuleType("helpers.tool_policy")
        module.resolve_tool = resolve
        sys.modules["helpers.tool_policy"] = module
        helpers.tool_policy = module
        self.addCleanup(lambda: (sys.modules.pop("helpers.tool_policy", None),
                                 vars(helpers).pop("tool_policy", None)))

    def test_without_a_tool_policy_the_tool_is_offered(self):
        self.assertTrue(self.bridge.tool_allowed(self.root.agent0))
        asyncio.run(self.prompt_kwargs_async(self.root.agent0, True))

    async def prompt_kwargs_async(self, agent, offered):
        await self.load(TOOL_PROMPT_EXT)(agent=agent).execute()
        kwargs = agent.data["_tool_prompt_kwargs"]["agent.system.tool.honcho_memory.md"]
        self.assertIs(kwargs["honcho_tool_offered"], offered)
        self.assertIs(kwargs["honcho_recall_injected"], True)

    def test_a_policy_that_hides_the_tool_leaves_its_section_out_recall_stays_injected(self):
        asked = []

        def resolve(agent, tool_name, *, canonical_id=""):
            asked.append(tool_name)
            return types.SimpleNamespace(allowed=False, tool_id=f"plugin:honcho:{tool_name}")
        self.policy(resolve)
        asyncio.run(self.prompt_kwargs_async(self.root.agent0, False))
        self.assertEqual(asked, ["honcho_memory"])

    def test_a_policy_that_cannot_be_read_leaves_the_tool_offered(self):
        def resolve(agent, tool_name, *, canonical_id=""):
            raise OSError("policy file unreadable")
        self.policy(resolve)
        with self.assertLogs("honcho_hub.adapters", "ERROR"):
            asyncio.run(self.prompt_kwargs_async(self.root.agent0, True))

    def test_a_policy_module_of_another_shape_is_left_to_agent_zero(self):
        import helpers

        module = types.ModuleType("helpers.tool_policy")
        sys.modules["helpers.tool_policy"] = helpers.tool_policy = module
        self.addCleanup(lambda: (sys.modules.pop("helpers.tool_policy", None),
                                 vars(helpers).pop("tool_policy", None)))
        self.assertTrue(self.bridge.tool_allowed(self.root.agent0))

    def test_the_recall_block_holds_nothing_that_depends_on_the_tool(self):
        from usr.plugins.honcho.extensions.honcho_bridge.recall import template

        block = template()
        self.assertNotIn("tool", block.lower())
        self.assertEqual(block.count("honcho_memory"), 2)  # the block's own tags only


if __name__ == "__main__":
    unittest.main()
