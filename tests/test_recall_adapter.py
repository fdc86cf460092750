"""The recall extension and chat registration, loaded as Agent Zero loads them, against a loopback
fake."""

import asyncio
import os
import sqlite3
import types
import unittest
from datetime import UTC, datetime, timedelta

from fake_honcho import FakeHoncho
from hub_testkit import (
    NUDGE_TEXT,
    ContextType,
    StubAgent,
    StubContext,
    StubHistoryMessage,
    import_by_path,
    stub_agent_zero,
)
from idle import wait_idle
from loopback import serve

RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
TOOL_PROMPT_EXT = "extensions/python/system_prompt/_10_honcho_tool_prompt.py"
CHAT_START_EXT = ("extensions/python/_functions/agent/AgentContext/communicate/start/"
                  "_60_honcho_chat_start.py")
KEY = "hch-adapter-key-0987654321"


def loop_data(text, iteration=0):
    wrapper = {"system_message": [], "user_message": text, "attachments": []}
    return types.SimpleNamespace(iteration=iteration, extras_persistent={},
                                 user_message=types.SimpleNamespace(content=wrapper))


class RecallAdapterTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.fake.representations[("agent-zero", "user")] = "The user prefers green tea."
        self.fake.representations[("scope:a0-alpha", "user")] = "Inside Alpha the user writes Rust."
        self.server = serve(self.fake)
        self.addCleanup(self.server.close)
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.host.config.update(api_url=self.server.url, recall_timeout_s=10)
        self.host.secrets = {"HONCHO_API_KEY": KEY}
        self.recall = self.load(RECALL_EXT)

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def run_recall(self, agent, data):
        asyncio.run(self.recall(agent=agent).execute(loop_data=data))
        return data.extras_persistent.get("honcho_memory")

    def test_agent_zeros_first_call_gets_the_block_queried_with_the_typed_text(self):
        block = self.run_recall(StubAgent(0), loop_data("Which tea should I buy?"))
        self.assertIn("green tea", block)
        self.assertTrue(block.startswith("<honcho_memory>"))
        self.assertEqual(self.fake.context_queries[-1]["search_query"], "Which tea should I buy?")

    def test_no_recall_on_later_iterations_for_subordinates_background_chats_or_when_disabled(self):
        cases = {"later iteration": (StubAgent(0), loop_data("x y z", iteration=1)),
                 "subordinate": (StubAgent(1), loop_data("x y z")),
                 "background": (StubAgent(0, StubContext(type=ContextType.BACKGROUND)),
                                loop_data("x y z"))}
        for name, (agent, data) in cases.items():
            with self.subTest(case=name):
                self.assertIsNone(self.run_recall(agent, data))
        self.host.config["recall_enabled"] = False
        self.assertIsNone(self.run_recall(StubAgent(0), loop_data("x y z")))
        self.assertEqual(self.fake.context_queries, [])

    def test_a_nudged_turn_gets_the_last_pack_without_a_query_or_a_load(self):
        agent = StubAgent(0)
        typed = self.run_recall(agent, loop_data("Which tea should I buy?"))
        self.assertIn("green tea", typed)
        queries = len(self.fake.context_queries)
        # v2.x's nudge: an empty message (its prompt a system message), the empty part removed
        nudged = types.SimpleNamespace(iteration=0, extras_persistent={},
                                       user_message=types.SimpleNamespace(
                                           content={"system_message": ["Nudged - continue"]}))
        self.assertEqual(self.run_recall(agent, nudged), typed)
        # v1.7's nudge: its prompt as the user's text, marked by capture as Agent Zero's turn
        nudge = loop_data(NUDGE_TEXT)
        nudge.user_message._honcho_framework_turn = True
        self.assertEqual(self.run_recall(agent, nudge), typed)
        self.assertEqual(len(self.fake.context_queries), queries)

    def test_each_recall_mode_injects_and_offers_the_tool_as_documented(self):
        cases = {"hybrid": (True, True), "context": (True, False), "tools": (False, True)}
        for mode, (injected, offered) in cases.items():
            with self.subTest(mode=mode):
                self.host.config["recall_mode"] = mode
                agent = StubAgent(0)
                asyncio.run(self.load(TOOL_PROMPT_EXT)(agent=agent).execute(system_prompt=[]))
                kwargs = agent.data["_tool_prompt_kwargs"]["agent.system.tool.honcho_memory.md"]
                self.assertEqual(kwargs, {"honcho_tool_offered": offered,
                                          "honcho_recall_injected": injected})
                queries = len(self.fake.context_queries)
                # a new query
                block = self.run_recall(agent, loop_data(f"Which tea should I buy ({mode})?"))
                self.assertEqual(block is not None and "green tea" in block, injected)
                self.assertEqual(len(self.fake.context_queries) > queries, injected)

    def test_a_chat_not_remembered_recalls_only_under_no_capture_and_says_so_in_the_prompt(self):
        cases = {"no-capture": (True, True), "off": (False, False)}
        for state, (recalled, injected) in cases.items():
            with self.subTest(state=state):
                agent = StubAgent(0, StubContext(id=f"nr{state[:6]}"))
                agent.context.data = {"honcho_remember": state}
                block = self.run_recall(agent, loop_data(f"Which tea should I buy ({state})?"))
                self.assertEqual(block is not None and "green tea" in block, recalled)
                asyncio.run(self.load(TOOL_PROMPT_EXT)(agent=agent).execute(system_prompt=[]))
                kwargs = agent.data["_tool_prompt_kwargs"]["agent.system.tool.honcho_memory.md"]
                self.assertEqual(kwargs["honcho_recall_injected"], injected)

    def test_the_tool_prompt_settings_keep_what_other_extensions_left_for_other_prompts(self):
        agent = StubAgent(0)
        agent.data["_tool_prompt_kwargs"] = {"agent.system.tool.text_editor.md":
                                             {"default_line_count": 100}}
        asyncio.run(self.load(TOOL_PROMPT_EXT)(agent=agent).execute(system_prompt=[]))
        self.assertEqual(agent.data["_tool_prompt_kwargs"]["agent.system.tool.text_editor.md"],
                         {"default_line_count": 100})

    def test_the_turns_recall_reads_no_prompt(self):
        reads = []

        class Agent(StubAgent):
            def read_prompt(self, name, **kwargs):
                reads.append(name)
                return NUDGE_TEXT

        self.run_recall(Agent(0), loop_data("Which tea should I buy?"))
        self.assertEqual(reads, [])

    def test_a_new_chat_is_told_from_a_loaded_one_a_reset_a_subordinate_and_a_background_chat(self):
        from usr.plugins.honcho.extensions.honcho_bridge import host

        now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
        cases = {"just opened":
                     (StubAgent(0, StubContext(created_at=now - timedelta(seconds=1))), True),
                 "loaded at startup (saved creation time)":
                     (StubAgent(0, StubContext(created_at=now - timedelta(days=2))), False),
                 "saved without a creation time":
                     (StubAgent(0, StubContext(created_at=datetime(1970, 1, 1))), False),
                 "subordinate": (StubAgent(1, StubContext(created_at=now)), False),
                 "background":
                     (StubAgent(0, StubContext(type=ContextType.BACKGROUND, created_at=now)),
                      False)}
        for name, (agent, new) in cases.items():
            with self.subTest(case=name):
                self.assertEqual(host.is_new_user_chat(agent, now), new)

    def test_only_a_new_chat_is_prewarmed_and_only_with_the_dialectic_on(self):
        self.fake.dialectic_answer = "Prewarmed note."
        for dialectic, age, prewarmed in ((True, 0, True), (True, 3600, False), (False, 0, False)):
            with self.subTest(dialectic=dialectic, age=age):
                self.host.config["dialectic_enabled"] = dialectic
                before = len(self.fake.chat_requests)
                created = datetime.now(UTC) - timedelta(seconds=age)
                agent = StubAgent(0, StubContext(id=f"New{age}{dialectic}", created_at=created))
                agent.context.data, agent.context.agent0 = {}, None  # being made
                self.load(INIT_EXT)(agent=agent).execute()
                agent.context.agent0 = agent
                # a new chat starts at its first message
                self.load(CHAT_START_EXT)(agent=None).execute(
                    data={"args": (agent.context, types.SimpleNamespace(message="hi")),
                          "kwargs": {}})
                from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
                from usr.plugins.honcho.honcho_hub import runtime

                self.assertTrue(runtime.join_background(10))
                self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
                self.assertEqual(len(self.fake.chat_requests) > before, prewarmed)

    def test_a_card_the_agent_replaced_reaches_the_next_turns_pack_before_the_ttl(self):
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        self.host.config.update(cache_ttl_s=3600, recall_wait_ms=0)
        # base packs only
        self.fake.fail(r"/sessions/[^/]+/context$", kind="status", status=500, times=10_000)
        for peer in ("agent-zero", "user"):
            self.fake.ensure_peer("agent-zero", peer)  # known to Honcho, as after a first delivery
        agent = StubAgent(0)
        self.run_recall(agent, loop_data("first question"))
        self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
        before = self.run_recall(agent, loop_data("second question"))
        self.assertIn("green tea", before)
        self.assertNotIn("Keeps bees", before)
        answer = asyncio.run(run_tool(agent, {"action": "profile", "facts": ["Keeps bees"]}))
        self.assertIn("card", answer.lower())
        self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
        self.assertIn("Keeps bees", self.run_recall(agent, loop_data("third question")))

    def test_the_tools_forget_chat_knows_its_chat_and_asks_for_confirmation_first(self):
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        answer = asyncio.run(run_tool(StubAgent(0), {"action": "forget_chat"}))
        self.assertNotIn("this call has none", answer)
        self.assertIn('"confirm": true', answer)
        self.assertEqual(self.fake.requests, [])

    def test_honcho_down_leaves_the_turn_alone(self):
        self.server.close()
        self.host.config["recall_timeout_s"] = 2
        data = loop_data("anything at all")
        self.assertIsNone(self.run_recall(StubAgent(0), data))
        self.assertEqual((data.extras_persistent, data.iteration), ({}, 0))

    def test_a_project_attached_after_the_agent_started(self):
        context = StubContext(id="Proj0001")
        agent = StubAgent(0, context)
        # chat start: no project yet, nothing to register
        self.load(INIT_EXT)(agent=agent).execute()
        self.assertEqual(self.fake.scopes, {})
        context.project = "Alpha"  # Agent Zero attaches the project afterwards
        data = {"args": (agent, types.SimpleNamespace(message="I write Rust here", id="")),
                "kwargs": {}, "result": StubHistoryMessage(False, "h1"), "exception": None}
        self.load(USER_EXT)(agent=agent).execute(data=data)
        from usr.plugins.honcho.extensions.honcho_bridge import host
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        # the writer thread may not have run yet
        hub().capture(host.settings_for(agent)).write_pending()
        conn = sqlite3.connect(self.host.config["outbox_path"])
        self.assertEqual(conn.execute("SELECT scope_id FROM events").fetchall(), [("a0-alpha",)])
        conn.close()
        block = self.run_recall(agent, loop_data("What language do I use?"))
        self.assertIn("writes Rust", block)
        self.assertEqual(self.fake.context_queries[-1]["scope"], "a0-alpha")

    def test_a_host_secret_typed_in_another_case_never_reaches_the_recall_query(self):
        # Agent Zero's masker replaces exact values only; the query is redacted with the host's
        # secrets too.
        self.host.secrets = {"HONCHO_API_KEY": KEY, "DB_PASSWORD": "hunter2-password-77"}
        agent = StubAgent(0, StubContext(id="Secret01"))
        typed = "Is HUNTER2-PASSWORD-77 still the database password?"
        data = {"args": (agent, types.SimpleNamespace(message=typed, id="")), "kwargs": {},
                "result": StubHistoryMessage(False, "h1"), "exception": None}
        # the capture hook starts the query's recall
        self.load(USER_EXT)(agent=agent).execute(data=data)
        self.assertIsNotNone(self.run_recall(agent, loop_data(typed)))
        queries = [q["search_query"] for q in self.fake.context_queries if q.get("search_query")]
        self.assertTrue(queries)
        for query in queries:
            self.assertNotIn("hunter2-password-77", query.lower())

    def test_chat_start_in_a_project_registers_the_scope_in_the_background(self):
        agent = StubAgent(0, StubContext(id="Proj0002", project="Alpha"))
        self.load(INIT_EXT)(agent=agent).execute()
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.honcho_hub import runtime
        # the hook returned at once; a thread queues it
        self.assertTrue(runtime.join_background(10))
        self.assertTrue(hub().registrar().stop(10))  # finishes the queued registration
        self.assertEqual(self.fake.scopes[("agent-zero", "a0-alpha")], {"chat-Proj0002"})


if __name__ == "__main__":
    unittest.main()
