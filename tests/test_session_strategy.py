"""Session strategy: which Honcho session a chat's messages go to (per chat, per project, one for
all), fixed on each event when it is captured, and named the same way by capture, recall, the tool
and status.

Pure naming tests; then the real capture, outbox and worker over the fake Honcho (delivery bench);
then the Agent Zero adapters against the stub host and a loopback fake."""

import asyncio
import dataclasses
import io
import os
import re
import sqlite3
import sys
import types
import unittest

from delivery_helpers import KEY, Bench
from fake_honcho import FakeHoncho
from hub_testkit import (
    StubAgent,
    StubContext,
    StubHistoryMessage,
    import_by_path,
    stub_agent_zero,
)
from loopback import serve
from outbox_helpers import temp_outbox_path, write_journal

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.cli import demo
from honcho_hub.names import GLOBAL_SESSION, ID_MAX, ID_RE, session_for, session_id_for
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import chats
from honcho_hub.storage.outbox import Outbox

STRATEGIES = ("per-chat", "per-project", "global")
NAMES = ("Ab3dE6gH", "Alpha", "a-b_c", "My Project", "a.b", "a/b", "проект🙂", "ПРОЕКТ🙂",
         "x" * 600, "x" * 599 + "y", "global", "chat-x", "project-x", "x", "")


class SessionForTest(unittest.TestCase):
    def test_per_chat_is_todays_chat_session(self):
        for chat in NAMES:
            for project in (None, "Alpha"):
                with self.subTest(chat=chat[:20], project=project):
                    self.assertEqual(session_for("per-chat", chat, project), session_id_for(chat))
        self.assertEqual(session_for("per-chat", "Ab3dE6gH", "Alpha"), "chat-Ab3dE6gH")

    def test_per_project_names_the_projects_session_and_chats_without_one_stay_per_chat(self):
        cases = {("c1", "Alpha"): "project-Alpha", ("c2", "Alpha"): "project-Alpha",
                 ("c1", "a-b_c"): "project-a-b_c", ("c1", None): "chat-c1", ("c1", ""): "chat-c1"}
        for (chat, project), session in cases.items():
            with self.subTest(chat=chat, project=project):
                self.assertEqual(session_for("per-project", chat, project), session)
        self.assertRegex(session_for("per-project", "c1", "My Project"),
                         r"^project-My_Project-[0-9a-f]{16}$")
        self.assertEqual(len(session_for("per-project", "c1", "x" * 900)), ID_MAX)
        # fits exactly
        self.assertEqual(session_for("per-project", "c1", "x" * 504), "project-" + "x" * 504)

    def test_global_is_one_session_for_every_chat(self):
        sessions = {session_for("global", chat, project)
                    for chat in NAMES for project in (None, "Alpha")}
        self.assertEqual(sessions, {GLOBAL_SESSION})

    def test_an_unknown_strategy_is_read_as_per_chat(self):
        self.assertEqual(session_for("per-user", "c1", "Alpha"), "chat-c1")

    def test_every_session_id_is_one_honcho_accepts(self):
        for strategy in STRATEGIES:
            for name in NAMES:
                with self.subTest(strategy=strategy, name=name[:20]):
                    self.assertRegex(session_for(strategy, name or "c", name), ID_RE)

    def test_different_chats_projects_and_families_never_share_a_session(self):
        # Every (family, name): a chat's session, a project's session, the global one. Names chosen
        # to collide if a family's prefix or the digest were missing (a chat named like a project's
        # session...).
        named = {("chat", name): session_for("per-chat", name, None) for name in NAMES}
        named.update({("project", name): session_for("per-project", "c", name)
                      for name in NAMES if name})
        named[("global", "")] = session_for("global", "c", None)
        self.assertEqual(len(set(named.values())), len(named))


def outbox_sessions(bench: Bench) -> list[tuple[str, str]]:
    conn = sqlite3.connect(bench.path)
    try:
        return conn.execute("SELECT content, session_id FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()


class CaptureTest(unittest.TestCase):
    def capture(self, bench: Bench, chat: str, text: str, project: str | None = None) -> None:
        outcome = bench.capture_service.capture(
            CaptureRequest(chat, Role.USER, text, text, project=project), bench.settings)
        self.assertEqual(outcome.value, "queued")

    def test_each_strategy_stores_its_session_on_the_event(self):
        expected = {"per-chat": ["chat-c1", "chat-c2", "chat-c3"],
                    "per-project": ["project-Alpha", "project-Alpha", "chat-c3"],
                    "global": ["global", "global", "global"]}
        for strategy, sessions in expected.items():
            with self.subTest(strategy=strategy):
                bench = Bench(self, session_strategy=strategy)
                self.capture(bench, "c1", "one", "Alpha")
                self.capture(bench, "c2", "two", "Alpha")
                self.capture(bench, "c3", "three")
                self.assertEqual([s for _, s in outbox_sessions(bench)], sessions)
                bench.run_until_idle()
                for text, session in zip(("one", "two", "three"), sessions, strict=True):
                    self.assertIn(text, [m["content"]
                                         for m in bench.fake.session_messages(session)])

    def test_a_project_attached_after_a_chats_first_message_splits_the_chat_over_two_sessions(self):
        bench = Bench(self, session_strategy="per-project")
        self.capture(bench, "c1", "before the project")
        self.capture(bench, "c1", "after the project", "Alpha")
        self.assertEqual(outbox_sessions(bench), [("before the project", "chat-c1"),
                                                  ("after the project", "project-Alpha")])
        box = Outbox(bench.path)
        self.addCleanup(box.close)
        self.assertEqual([(m["chat_id"], m["project"], m["session_id"])
                          for m in chats.known_sessions(box.db)],
                         [("c1", "Alpha", "project-Alpha"), ("c1", None, "chat-c1")])

    def test_changing_the_strategy_never_resends_and_never_moves_what_was_captured(self):
        bench = Bench(self)  # per-chat
        self.capture(bench, "c1", "delivered under per-chat")
        bench.run_until_idle()
        self.capture(bench, "c1", "queued under per-chat")  # captured, not yet delivered
        bench.settings = dataclasses.replace(bench.settings, session_strategy="global")
        self.capture(bench, "c1", "captured under global")
        bench.run_until_idle()
        self.assertEqual(bench.server_texts("c1"),
                         ["delivered under per-chat", "queued under per-chat"])
        self.assertEqual([m["content"] for m in bench.fake.session_messages("global")],
                         ["captured under global"])
        self.assertEqual(len(bench.fake.messages), 3)  # nothing sent twice
        self.assertEqual(bench.states(), {"delivered": 3})


class DemoTest(unittest.TestCase):
    def test_the_demo_is_a_chat_of_its_own_whatever_the_strategy(self):
        fake = FakeHoncho(api_key=KEY)
        server = serve(fake)
        self.addCleanup(server.close)
        for strategy in STRATEGIES:
            with self.subTest(strategy=strategy):
                env = {"HONCHO_API_URL": server.url, "HONCHO_API_KEY": KEY,
                       "HONCHO_SESSION_STRATEGY": strategy,
                       "HONCHO_OUTBOX_PATH": temp_outbox_path(self)}
                out = io.StringIO()
                self.assertEqual(demo.run_demo(build_settings({}, {}, env), False, out), 0,
                                 out.getvalue())
                named = re.search(r"Honcho session (\S+)\.$", out.getvalue(), re.MULTILINE).group(1)
                self.assertRegex(named, r"^chat-demo[0-9a-f]{8}$")
                self.assertEqual(len(fake.session_messages(named, "honcho-hub-demo")),
                                 len(demo.SCRIPT))
                self.assertIn(f"/v3/workspaces/honcho-hub-demo/sessions/{named}/context",
                              [p for _, p in fake.requests])
        # every message in its demo's session
        self.assertEqual(len(fake.messages), 3 * len(demo.SCRIPT))


class AdapterTest(unittest.TestCase):
    """Under per-project, capture, recall, the tool and the sidebar's status name the project's
    session."""

    KEY = "hch-strategy-key-1357913579"

    def setUp(self):
        self.fake = FakeHoncho(api_key=self.KEY)
        self.server = serve(self.fake)
        self.addCleanup(self.server.close)
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.host.config.update(api_url=self.server.url, recall_timeout_s=10,
                                session_strategy="per-project")
        self.host.secrets = {"HONCHO_API_KEY": self.KEY}
        self.agent = StubAgent(0, StubContext(id="Strat001", project="Alpha"))

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def test_capture_stores_the_projects_session(self):
        data = {"args": (self.agent, types.SimpleNamespace(message="I write Rust here", id="")),
                "kwargs": {}, "result": StubHistoryMessage(False, "h1"), "exception": None}
        self.load("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
                  "_50_honcho_capture_user.py")(agent=self.agent).execute(data=data)
        from usr.plugins.honcho.extensions.honcho_bridge import host
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        # The writer thread may not have run yet, nor finished, if it had.
        self.assertTrue(write_journal(hub().capture(host.settings_for(self.agent))))
        conn = sqlite3.connect(self.host.config["outbox_path"])
        self.addCleanup(conn.close)
        self.assertEqual(conn.execute("SELECT session_id FROM events").fetchall(),
                         [("project-Alpha",)])

    def test_recall_queries_the_projects_session(self):
        recall = self.load("extensions/python/message_loop_prompts_after/_55_honcho_recall.py")
        data = types.SimpleNamespace(
            iteration=0, extras_persistent={},
            user_message=types.SimpleNamespace(
                content={"system_message": [], "user_message": "Which language do I use?",
                         "attachments": []}))
        asyncio.run(recall(agent=self.agent).execute(loop_data=data))
        contexts = [path for method, path in self.fake.requests
                    if path.endswith("/context") and "/sessions/" in path]
        self.assertEqual(contexts, ["/v3/workspaces/agent-zero/sessions/project-Alpha/context"])

    def test_the_tool_and_the_sidebar_name_the_projects_session(self):
        from usr.plugins.honcho.extensions.honcho_bridge import operations, tool

        self.assertEqual(tool.action_context(self.agent).session_id, "project-Alpha")
        self.agent.context.agent0 = self.agent  # as every AgentContext has
        contexts = {"Strat001": self.agent.context}
        sys.modules["agent"] = types.SimpleNamespace(
            AgentContext=types.SimpleNamespace(get=contexts.get,
                                               all=lambda: list(contexts.values())))
        self.addCleanup(sys.modules.pop, "agent", None)
        status = operations.status_document({"context": "Strat001", "light": True})["status"]
        self.assertEqual(status["identity"]["session_id"], "project-Alpha")


if __name__ == "__main__":
    unittest.main()
