"""The capture extensions loaded as Agent Zero loads them, driven with Agent Zero-shaped objects."""

import asyncio
import json
import os
import sqlite3
import sys
import types
import unittest

from hub_testkit import (
    ContextType,
    StubAgent,
    StubContext,
    StubHistoryMessage,
    hub_threads,
    import_by_path,
    release_restart,
    stub_agent_zero,
)
from idle import wait_idle
from outbox_helpers import stub_host_events

USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
RESPONSE_EXT = "extensions/python/tool_execute_after/_50_honcho_capture_response.py"
RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
ANSWER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_ai_response/end/"
              "_50_honcho_capture_answer.py")


class UserMessage:
    """Agent Zero's UserMessage dataclass shape."""

    def __init__(self, message, id=""):
        self.message, self.attachments, self.system_message, self.id = message, [], [], id


class AdapterTestCase(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.user_ext = self.load(USER_EXT)
        self.response_ext = self.load(RESPONSE_EXT)
        from usr.plugins.honcho.honcho_hub import hub
        self.addCleanup(hub.shutdown)

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def typed(self, agent, text, intervention=False, history_id="h-1"):
        kwargs = {"intervention": True} if intervention else {}
        data = {"args": (agent, UserMessage(text)), "kwargs": kwargs,
                "result": StubHistoryMessage(False, history_id), "exception": None}
        self.user_ext(agent=agent).execute(data=data)

    def responded(self, agent, text, tool_name="response", ai_id="ai-1"):
        agent.history.current.messages.append(StubHistoryMessage(True, ai_id))
        self.response_ext(agent=agent).execute(
            response=types.SimpleNamespace(message=text, break_loop=True), tool_name=tool_name)

    def stored(self):
        return stub_host_events(self, self.host)


class WhoTypedItTest(AdapterTestCase):
    def test_the_human_and_agent_zeros_final_answer_are_captured(self):
        agent0 = StubAgent(0)
        self.typed(agent0, "I prefer tea over coffee")
        self.responded(agent0, "Noted: tea it is.")
        self.assertEqual(self.stored(), [
            ("chat-Ab3dE6gH", "user", "user", "I prefer tea over coffee"),
            ("chat-Ab3dE6gH", "agent-zero", "agent", "Noted: tea it is.")])

    def test_an_intervention_sent_while_a_subordinate_runs_is_the_humans(self):
        context = StubContext()
        subordinate = StubAgent(2, context)
        self.typed(subordinate, "stop, use the staging server", intervention=True)
        self.assertEqual([row[3] for row in self.stored()], ["stop, use the staging server"])

    def test_a_superiors_message_to_a_subordinate_is_not_captured(self):
        self.typed(StubAgent(1), "Research the weather in Oslo")
        self.assertEqual(self.stored(), [])

    def test_a_scheduled_tasks_prompt_is_not_captured_unless_the_setting_says_so(self):
        agent = StubAgent(0, StubContext(id="task0001"))
        self.host.scheduled_context_ids.add("task0001")
        self.typed(agent, "Daily report: summarize the inbox", history_id="t1")
        self.responded(agent, "Inbox summary ...")
        self.assertEqual(self.stored(), [])
        self.host.config["capture_scheduler_chats"] = True
        self.typed(agent, "Daily report: summarize the inbox", history_id="t2")
        self.assertEqual(len(self.stored()), 1)

    def test_background_chats_and_disabled_capture_capture_nothing(self):
        self.typed(StubAgent(0, StubContext(type=ContextType.BACKGROUND)), "mcp call text")
        self.host.config["capture_enabled"] = False
        self.typed(StubAgent(0), "not remembered")
        self.assertEqual(self.stored(), [])

    def test_a_chat_the_user_asked_not_to_remember_captures_nothing(self):
        for state in ("no-capture", "off"):
            with self.subTest(state=state):
                context = StubContext(id=f"nr{state[:6]}")
                context.data = {"honcho_remember": state}  # as the sidebar's switch leaves it
                agent = StubAgent(0, context)
                self.typed(agent, "my locker code is on a yellow note")
                self.typed(StubAgent(3, context), "stop, wait", intervention=True)
                self.responded(agent, "I will not keep that.")
                self.assertEqual(self.stored(), [])

    def test_other_tools_and_subordinate_responses_are_not_captured(self):
        self.responded(StubAgent(0), "tool output", tool_name="code_execution_tool")
        self.responded(StubAgent(1), "subordinate's answer to its superior")
        self.assertEqual(self.stored(), [])

    def test_a_replayed_hook_and_identical_replies(self):
        agent = StubAgent(0)
        self.typed(agent, "hello", history_id="same")
        self.typed(agent, "hello", history_id="same")
        self.responded(agent, "Done.", ai_id="ai-1")
        self.responded(agent, "Done.", ai_id="ai-2")
        self.assertEqual([row[3] for row in self.stored()], ["hello", "Done.", "Done."])


class SecretsAndFailuresTest(AdapterTestCase):
    def test_host_secrets_are_masked_then_neutralised(self):
        self.host.secrets = {"DB_PASS": "s3cr3t-value-42"}
        self.typed(StubAgent(0), "the db password is s3cr3t-value-42 and the alias §§secret(OTHER)")
        stored = self.stored()[0][3]
        self.assertNotIn("s3cr3t-value-42", stored)
        self.assertNotIn("§§", stored)
        self.assertIn("[secret-ref:DB_PASS]", stored)

    def test_project_secrets_are_masked_but_never_change_identity(self):
        self.host.project_secrets = {"HONCHO_WORKSPACE_ID": "project-ws",
                                     "PROJECT_TOKEN": "pr0ject-t0ken-value"}
        self.typed(StubAgent(0, StubContext(project="Alpha")),
                   "deploy with pr0ject-t0ken-value please")
        _, _, _, content = self.stored()[0]
        conn = sqlite3.connect(self.host.config["outbox_path"])
        workspace, = conn.execute("SELECT workspace_id FROM events").fetchone()
        conn.close()
        self.assertEqual(workspace, "agent-zero")
        self.assertNotIn("pr0ject-t0ken-value", content)

    def test_adapters_never_raise_into_agent_zero(self):
        broken = types.SimpleNamespace(number=0)  # no context at all
        with self.assertLogs("honcho_hub.adapters", "ERROR"):
            self.user_ext(agent=broken).execute(
                data={"args": (broken, UserMessage("x")), "kwargs": {}})
        with self.assertLogs("honcho_hub.adapters", "ERROR"):
            self.response_ext(agent=broken).execute(response=None, tool_name="response")

    def test_a_failed_host_call_is_not_captured(self):
        agent = StubAgent(0)
        self.user_ext(agent=agent).execute(data={
            "args": (agent, UserMessage("x")), "kwargs": {},
            "result": None, "exception": RuntimeError("host failed")})
        self.assertEqual(self.stored(), [])


class EventLoopTest(AdapterTestCase):
    """What the capture hooks do on Agent Zero's event loop, and what they leave to other
    threads."""

    def test_settings_are_built_once_until_a_config_file_or_a_secret_changes(self):
        from usr.plugins.honcho.extensions.honcho_bridge import host

        agent = StubAgent(0)
        builds = []  # each distinct Settings object the chat's capture used: one per build

        def typed(text, history_id):
            self.typed(agent, text, history_id=history_id)
            used = host.settings_for(agent)  # what the hook just used: the cached object
            if not any(used is known for known in builds):
                builds.append(used)
        for n in range(3):
            typed(f"message {n}", f"h-{n}")
        # parsing the files on every message would make a new object each time
        self.assertEqual(len(builds), 1)
        self.host.config["recall_timeout_s"] = 3  # saved to the plugin's config.json
        typed("after a save", "h-saved")
        self.assertEqual(len(builds), 2)
        self.assertEqual(builds[-1].recall_timeout_s, 3)
        self.host.secrets = {"HONCHO_WORKSPACE_ID": "elsewhere"}  # saved to usr/secrets.env
        typed("after a secret", "h-secret")
        self.assertEqual(len(builds), 3)
        self.assertEqual(builds[-1].workspace_id, "elsewhere")
        self.assertEqual(self.stored()[-1][0:2], ("chat-Ab3dE6gH", "user"))

    def test_without_the_delivery_packages_messages_are_kept_and_one_warning_says_why(self):
        from usr.plugins.honcho.honcho_hub import runtime

        # What an install whose pip failed lacks: httpx and the SDK. (Capture needs tenacity, which
        # Agent Zero's own environment has: langchain-core requires it.)
        saved, saved_sdk = sys.modules.get("httpx"), sys.modules.get("honcho")
        sys.modules["httpx"] = None  # `import httpx` now fails
        self.addCleanup(lambda: sys.modules.__setitem__("httpx", saved))
        sys.modules["honcho"] = None  # and the SDK recall needs
        self.addCleanup(lambda: sys.modules.__setitem__("honcho", saved_sdk))
        recall = self.load(RECALL_EXT)
        agent = StubAgent(0)
        with self.assertLogs(level="WARNING") as logs:
            for n in range(3):
                self.typed(agent, f"kept {n}", history_id=f"h-{n}")
                asyncio.run(recall(agent=agent).execute(loop_data=types.SimpleNamespace(
                    iteration=0, extras_persistent={}, user_message=types.SimpleNamespace(
                        content={"user_message": f"kept {n}"}))))
                self.assertTrue(runtime.join_background(10))
        # once, no traceback; recall is quiet
        self.assertEqual([r.levelname for r in logs.records], ["WARNING"])
        self.assertIn("httpx", logs.records[0].getMessage())
        self.assertEqual([row[3] for row in self.stored()], ["kept 0", "kept 1", "kept 2"])

    def test_the_warning_names_the_missing_package_when_another_threads_import_broke_first(self):
        # The worker's start and a turn's recall import the delivery modules on two threads at once.
        # The one that waited for the other's failed import gets the half-made module it left, and
        # its error names that module of ours (`cannot import name ...`), not the missing package.
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub

        half_made = "usr.plugins.honcho.honcho_hub.gateway.gateway"
        self.assertNotIn(half_made, sys.modules)
        saved = sys.modules.get("httpx")
        sys.modules["httpx"] = None
        self.addCleanup(lambda: sys.modules.__setitem__("httpx", saved))
        sys.modules[half_made] = types.ModuleType(half_made)  # none of its names defined yet
        self.addCleanup(sys.modules.pop, half_made, None)
        with self.assertLogs(level="WARNING") as logs:
            self.assertFalse(hub().load_delivery())
        self.assertIn("(httpx is missing)", logs.records[0].getMessage())

    def test_after_uninstall_the_next_message_starts_no_worker(self):
        from usr.plugins.honcho.honcho_hub import runtime
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        agent = StubAgent(0)
        self.typed(agent, "before", history_id="h-1")
        self.assertTrue(runtime.join_background(10))
        self.assertEqual(len(lifecycle.plugin_workers()), 1)
        self.addCleanup(release_restart)
        import_by_path(os.path.join(self.host.plugin_dir, "hooks.py")).uninstall()
        self.typed(agent, "after", history_id="h-2")
        self.assertTrue(runtime.join_background(10))
        self.assertEqual(lifecycle.plugin_workers(), [])
        self.assertEqual([row[3] for row in self.stored()], ["before", "after"])  # capture goes on

    def test_uninstall_leaves_no_thread_of_ours(self):
        from usr.plugins.honcho.honcho_hub import runtime

        baseline = set(hub_threads())
        agent = StubAgent(0, StubContext(id="Proj0003", project="Alpha"))
        self.load(INIT_EXT)(agent=agent).execute()  # the worker; at chat start recall and the scope
        self.typed(agent, "a turn before uninstall")  # the capture writer
        asyncio.run(self.load(RECALL_EXT)(agent=agent).execute(loop_data=types.SimpleNamespace(
            iteration=0, extras_persistent={}, user_message=types.SimpleNamespace(
                content={"user_message": "a turn before uninstall"}))))
        self.assertTrue(runtime.join_background(10))
        # No model call here, so the prompt window holds the writer: written now, the message is
        # not left in the process's journal for the next test's outbox.
        self.assertEqual(len(self.stored()), 1)
        running = {t.name.rstrip("_0123456789") for t in set(hub_threads()) - baseline}
        self.assertLessEqual({"honcho-hub-capture-writer", "honcho-hub-delivery",
                              "honcho-hub-scopes", "honcho-hub-recall", "honcho-hub-recall-chats"},
                             running)
        self.addCleanup(release_restart)
        import_by_path(os.path.join(self.host.plugin_dir, "hooks.py")).uninstall()
        self.assertEqual([t.name for t in set(hub_threads()) - baseline], [])


class V2xAgent(StubAgent):
    """Agent 0 of a chat in Agent Zero v2.x while its `agent_init` runs: its log empty until
    something is logged, not yet marked started by the plugin's `agent_init` extension."""

    def __init__(self):
        super().__init__(0)
        self.context.log = types.SimpleNamespace(logs=[])


def _tool_request(text):
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "tool_name" in found else None


# helpers.extract_tools as v2.x has it, and as v1.7 has it (no extract_tool_request)
V2X_EXTRACT_TOOLS = {"extract_tool_request": _tool_request,
                     "is_misformatted_tool_request": lambda text: text.startswith("{{")}
V17_EXTRACT_TOOLS = {"json_parse_dirty": lambda text: _tool_request(text) or (
    {} if "{" in text else None)}


def responses(function_calls=()):
    """v2.x's LLMResult of a model call in Responses mode."""
    return types.SimpleNamespace(mode="responses", function_calls=list(function_calls))


class V2xTurnsTest(AdapterTestCase):
    """Agent Zero v2.x's placeholder turn, empty nudge and plain-text answers (issue 24)."""

    def setUp(self):
        super().setUp()
        self.answer_ext = self.load(ANSWER_EXT)
        self.extract_tools(V2X_EXTRACT_TOOLS)

    def extract_tools(self, functions):
        module = types.ModuleType("helpers.extract_tools")
        vars(module).update(functions)
        sys.modules["helpers.extract_tools"] = module  # the stub host drops it at its end
        sys.modules["helpers"].extract_tools = module

    def answered(self, agent, text, llm_result=None, ai_id="ai-1"):
        """Agent.hist_add_ai_response(text, id=..., llm_result=...) and its end extensions."""
        agent.history.current.messages.append(StubHistoryMessage(True, ai_id))
        kwargs = {"id": ai_id} | ({"llm_result": llm_result} if llm_result is not None else {})
        self.answer_ext(agent=agent).execute(data={
            "args": (agent, text), "kwargs": kwargs, "result": StubHistoryMessage(True, ai_id),
            "exception": None})

    def recall_loads(self):
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.honcho_hub import runtime

        self.assertTrue(runtime.join_background(10))
        recaller = hub().recaller()
        self.assertTrue(wait_idle(10, recaller))
        return recaller.cache_counters().get("loads", 0)

    def test_the_placeholder_turn_is_neither_captured_nor_loads_and_the_humans_next_one_is(self):
        agent = V2xAgent()
        self.typed(agent, "Hello!", history_id="h-placeholder")
        self.assertEqual(self.recall_loads(), 0)
        agent.context.log.logs.append("the greeting")  # from here on, the chat has a log
        self.typed(agent, "Hello!", history_id="h-typed")  # the human may say it too
        self.assertEqual(self.recall_loads(), 1)
        self.assertEqual([row[3] for row in self.stored()], ["Hello!"])

    def test_an_empty_message_is_neither_captured_nor_loads(self):
        agent = V2xAgent()
        agent.context.log.logs.append("the greeting")
        for n, text in enumerate(("", "  \n")):  # v2.x's nudge: its prompt is a system message
            self.typed(agent, text, history_id=f"h-{n}")
        self.typed(agent, "", intervention=True, history_id="h-sent-while-busy")
        self.assertEqual(self.recall_loads(), 0)
        self.assertEqual(self.stored(), [])

    def test_a_plain_answer_in_responses_mode_is_captured_once_whichever_way_it_arrives(self):
        agent = StubAgent(0)
        self.typed(agent, "Which colour for the lantern room?")
        self.answered(agent, "Paint it red.", responses(), ai_id="ai-1")
        # v2.x may run the same answer as the `response` tool: its capture names the same message
        self.response_ext(agent=agent).execute(
            response=types.SimpleNamespace(message="Paint it red.", break_loop=True),
            tool_name="response")
        self.assertEqual([row[2:] for row in self.stored()],
                         [("user", "Which colour for the lantern room?"),
                          ("agent", "Paint it red.")])

    def test_tool_calls_replies_without_a_model_result_and_subordinates_are_not_captured(self):
        agent = StubAgent(0)
        call = json.dumps({"tool_name": "search_engine", "tool_args": {"query": "fog"}})
        self.answered(agent, call, responses([{"tool_name": "search_engine"}]), ai_id="ai-1")
        self.answered(agent, call, responses(), ai_id="ai-2")  # a tool request in the text
        self.answered(agent, "{{ half a request", responses(), ai_id="ai-3")  # misformatted
        self.answered(agent, "A v1.7 reply, the greeting, a cut answer.", ai_id="ai-4")
        self.answered(agent, "Not an answer.", types.SimpleNamespace(mode="", function_calls=[]),
                      ai_id="ai-5")  # LLMResult.non_llm()
        self.answered(agent, "  ", responses(), ai_id="ai-6")
        self.answered(StubAgent(1), "A subordinate's answer.", responses(), ai_id="ai-7")
        self.assertEqual(self.stored(), [])

    def test_a_reply_outside_responses_mode_is_turned_away_before_settings_or_chat_facts(self):
        from usr.plugins.honcho.extensions.honcho_bridge import host
        from usr.plugins.honcho.extensions.honcho_bridge.capture import capture_plain_answer

        # Every v1.7 reply passes here: a project file that cannot be read would fail a settings
        # build, and reading the chat's facts marks it as seen.
        path = self.host.project_meta("Broken", "plugins", "honcho", "config.json")
        os.makedirs(os.path.dirname(path))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("{")
        agent = StubAgent(0, StubContext(id="V17Reply", project="Broken"))
        data = {"args": (agent, "A v1.7 reply."), "kwargs": {"id": "ai-1"},
                "result": StubHistoryMessage(True, "ai-1"), "exception": None}
        self.assertEqual(capture_plain_answer(agent, data), "not_a_plain_answer")
        self.assertEqual(host.chats_seen(), {})

    def test_where_v2xs_tool_request_readers_are_missing_v1_7s_parser_decides(self):
        self.extract_tools(V17_EXTRACT_TOOLS)
        agent = StubAgent(0)
        self.answered(agent, json.dumps({"tool_name": "wait", "tool_args": {"s": 1}}),
                      responses(), ai_id="ai-1")
        self.answered(agent, "The answer.", responses(), ai_id="ai-2")
        self.assertEqual([row[3] for row in self.stored()], ["The answer."])


if __name__ == "__main__":
    unittest.main()
