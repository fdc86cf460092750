"""After a chat is forgotten (chats/forget.py), its turns name its new Honcho session
`chat<N>-<id>`: recall and the query-aware load started at capture, the memory tool's actions,
status's session line and the scope registration at chat start; whether this process forgot it or
another one sharing the outbox did (the command line while Agent Zero runs). On Agent Zero's event
loop the session comes from memory only."""

import asyncio
import contextlib
import io
import os
import tempfile
import types
import unittest

import hub_testkit
from api_world import api_world
from delivery_helpers import Bench
from fake_honcho import FakeHoncho
from hub_testkit import StubAgent, StubContext, StubHistoryMessage, import_by_path
from idle import wait_idle
from loopback import serve
from outbox_helpers import temp_outbox_path

from honcho_hub.chats.forget import DONE, forget_chat
from honcho_hub.chats.sessions import ChatSessions
from honcho_hub.cli import main as cli
from honcho_hub.names import session_id_for
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.marker import MarkerWatch, move_marker
from honcho_hub.tool.actions import ActionContext, run_action

KEY = "hch-forgotten-chat-key-24680"
# a test's bound on what a background thread does; never reached when the code is right
WAIT_S = 10.0
TEMPLATE = hub_testkit.checkout_text("prompts", "honcho.recall_block.md")
CHAT = "Forget01"
RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")


def context_sessions(paths) -> list[str]:
    """The session each session-context request named, in order."""
    return [path.split("/sessions/", 1)[1].split("/", 1)[0] for path in paths
            if "/sessions/" in path and path.endswith("/context")]


class ChatSessionsTest(unittest.TestCase):
    """The core: ChatSessions over a real outbox, beside a recaller sharing its marker watch as the
    Hub's does, the real SDK over a MockTransport fake."""

    def setUp(self):
        self.bench = Bench(self)
        self.marker = MarkerWatch()
        self.recaller = Recaller(lambda s: self.bench.gateway(s, s.recall_timeout_s),
                                 monotonic=self.bench.mono, marker=self.marker)
        self.addCleanup(self.recaller.close)
        self.chats = self.new_chats(self.marker)

    def new_chats(self, marker=None) -> ChatSessions:
        chats = ChatSessions(marker)
        self.addCleanup(chats.close)
        return chats

    def forget(self, chat: str) -> dict:
        report = forget_chat(self.bench.settings, chat, gateway_factory=self.bench.gateway,
                             clock=self.bench.clock)
        self.assertEqual(report["state"], DONE)
        return report

    def turn(self, chat: str) -> list[str]:
        """One turn's recall off the event loop (as the recall hook's thread runs it): the sessions
        its context requests named."""
        before = len(self.bench.sent)
        session = self.chats.session(self.bench.settings, chat, None, WAIT_S)
        self.recaller.recall(self.bench.settings, session, "what do I drink?", TEMPLATE)
        self.assertTrue(wait_idle(WAIT_S, self.recaller, self.chats))
        return context_sessions(r.url.path for r in self.bench.sent[before:])

    def test_after_forget_chat_the_next_recall_of_the_chat_asks_honcho_for_its_new_session(self):
        self.bench.say("a", 1)
        self.bench.run_until_idle()
        self.assertEqual(self.turn("a"), ["chat-a"])
        self.forget("a")  # nothing tells this recaller: it learns from the outbox
        self.assertEqual(self.turn("a"), ["chat1-a"])
        self.forget("a")
        self.assertEqual(self.turn("a"), ["chat2-a"])
        self.assertEqual(self.turn("b"), ["chat-b"], "another chat keeps its session")

    def test_another_processs_forget_is_followed_at_the_next_turn_and_the_loop_knows_it_after(self):
        self.assertEqual(self.turn("a"), ["chat-a"])
        # another process's forget: its own outbox connection, then the marker beside the outbox
        self.forget("a")
        on_the_loop = self.chats.session(self.bench.settings, "a", None)
        self.assertEqual(on_the_loop, "chat-a",
                         "the event loop names what memory holds until a thread reads")
        self.assertEqual(self.turn("a"), ["chat1-a"])
        self.assertEqual(self.chats.session(self.bench.settings, "a", None), "chat1-a")

    def test_a_marker_move_the_chats_see_first_still_empties_recalls_cache(self):
        self.bench.say("a", 1)  # the outbox the marker stands beside
        self.bench.run_until_idle()
        self.assertEqual(self.turn("a"), ["chat-a"])
        self.assertEqual(self.turn("a"), [], "the same question again: the cached pack")
        self.assertTrue(move_marker(self.bench.settings))  # another process cleared its cache
        # the chats' look sees the move first
        self.chats.session(self.bench.settings, "b", None, WAIT_S)
        self.assertEqual(self.turn("a"), ["chat-a"], "recall dropped its cache all the same")

    def test_on_the_event_loop_an_unknown_chat_is_named_from_memory_and_read_in_background(self):
        self.forget("c")  # before this recaller existed (an earlier run of Agent Zero)
        chats = self.new_chats()
        # nothing known: no read here
        self.assertEqual(chats.session(self.bench.settings, "c", None), "chat-c")
        self.assertTrue(wait_idle(WAIT_S, chats))  # the read it started
        self.assertEqual(chats.session(self.bench.settings, "c", None), "chat1-c")

    def test_the_memory_tool_forgetting_the_chat_tells_this_process_at_once(self):
        gateway = self.bench.gateway(self.bench.settings)
        self.addCleanup(gateway.close)
        settings = self.bench.settings
        ctx = ActionContext(settings=settings, session_id="chat-a", gateway=gateway, chat_id="a",
                            forgotten=lambda chat, generation: self.chats.forgotten(
                                settings, chat, generation))
        self.assertEqual(self.chats.session(settings, "a", None, WAIT_S), "chat-a")
        self.assertTrue(run_action("forget_chat", {"confirm": True}, ctx).ok)
        # memory only, no read needed
        self.assertEqual(self.chats.session(settings, "a", None), "chat1-a")
        # the read that confirms it, before the folder goes
        self.assertTrue(wait_idle(WAIT_S, self.chats))

    def test_the_process_keeps_the_generations_of_its_newest_1000_chats_not_10000(self):
        # About 360 bytes a chat for the process's life: a soak opens thousands of chats an hour,
        # a user's chat list holds hundreds at most. A chat forgotten from memory is read again
        # from the outbox when next named (held here, so memory alone answers).
        chats = ChatSessions(self.marker, may_start=lambda: False)
        self.addCleanup(chats.close)
        for n in range(1_001):
            chats.forgotten(self.bench.settings, f"Kept{n:04d}", 1)
        self.assertEqual([chats.session(self.bench.settings, chat) for chat in
                          ("Kept0000", "Kept0001", "Kept1000")],
                         [session_id_for("Kept0000"), session_id_for("Kept0001", 1),
                          session_id_for("Kept1000", 1)])

    def test_a_shared_session_is_named_as_before_whatever_the_chat_went_through(self):
        self.forget("a")
        cases = {"per-project, in a project": ("per-project", "Garden", "project-Garden"),
                 "per-project, no project": ("per-project", None, "chat1-a"),
                 "global": ("global", "Garden", "global")}
        for name, (strategy, project, expected) in cases.items():
            with self.subTest(name):
                settings = build_settings({"outbox_path": self.bench.path,
                                           "api_url": "https://honcho.test",
                                           "session_strategy": strategy},
                                          {"HONCHO_API_KEY": KEY}, {})
                self.assertEqual(self.chats.session(settings, "a", project, WAIT_S), expected)

    def test_without_an_outbox_a_chat_is_at_its_first_session_and_no_outbox_is_made(self):
        path = temp_outbox_path(self)
        settings = build_settings({"outbox_path": path, "api_url": "https://honcho.test"}, {}, {})
        self.assertEqual(self.chats.session(settings, "a", None, WAIT_S), "chat-a")
        self.assertFalse(os.path.exists(path))


class CommandLineForgetTest(unittest.TestCase):
    """The command line's forget-chat (its own settings, outbox connection and modules' state)
    while a recaller of another process serves the chat's turns."""

    def test_the_next_recall_after_the_command_line_forgot_the_chat_names_its_new_session(self):
        fake = FakeHoncho(api_key=KEY)
        server = serve(fake)
        self.addCleanup(server.close)
        home = tempfile.TemporaryDirectory()
        self.addCleanup(home.cleanup)
        path = temp_outbox_path(self)
        env = {"HONCHO_API_URL": server.url, "HONCHO_OUTBOX_PATH": path, "HONCHO_API_KEY": KEY,
               "HOME": home.name}
        settings = build_settings({"outbox_path": path, "api_url": server.url},
                                  {"HONCHO_API_KEY": KEY}, {})
        marker = MarkerWatch()
        recaller, chats = Recaller(marker=marker), ChatSessions(marker)
        self.addCleanup(recaller.close)
        self.addCleanup(chats.close)

        def turn() -> list[str]:
            before = len(fake.requests)
            recaller.recall(settings, chats.session(settings, "a", None, WAIT_S), "what now?",
                            TEMPLATE)
            self.assertTrue(wait_idle(WAIT_S, recaller, chats))
            return context_sessions(p for _, p in fake.requests[before:])

        self.assertEqual(turn(), ["chat-a"])
        out = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(["forget-chat", "a", "--yes"], environ=env, out=out)
        self.assertEqual(code, 0, out.getvalue())
        self.assertEqual(turn(), ["chat1-a"])


class ForgottenChatInAgentZeroTest(unittest.TestCase):
    """The adapters, loaded as Agent Zero loads them, against the fake Honcho over loopback."""

    def setUp(self):
        self.fake, self.server, self.host = api_world(self, KEY)
        self.host.config.update(recall_timeout_s=10)
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        self.hub = hub
        self.turns = 0

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def settle(self) -> None:
        from usr.plugins.honcho.honcho_hub import runtime

        self.assertTrue(runtime.join_background(WAIT_S))
        self.assertTrue(wait_idle(WAIT_S, self.hub().recaller(), self.hub().chats()))

    def recall(self, agent, text: str) -> None:
        wrapper = {"system_message": [], "user_message": text, "attachments": []}
        data = types.SimpleNamespace(iteration=0, extras_persistent={},
                                     user_message=types.SimpleNamespace(content=wrapper))
        asyncio.run(self.load(RECALL_EXT)(agent=agent).execute(loop_data=data))

    def turn(self, agent, text: str, capture: bool = True) -> list[str]:
        """One user turn: the capture hook (which starts the query-aware load), then the recall
        hook; the sessions its context requests named."""
        before = len(self.fake.requests)
        self.turns += 1
        if capture:
            data = {"args": (agent, types.SimpleNamespace(message=text, id="")), "kwargs": {},
                    "result": StubHistoryMessage(False, f"h{self.turns}"), "exception": None}
            self.load(USER_EXT)(agent=agent).execute(data=data)
        self.recall(agent, text)
        self.settle()
        return context_sessions(p for _, p in self.fake.requests[before:])

    def forget_from_the_command_line(self, chat: str) -> None:
        """What `python -m honcho_hub forget-chat CHAT --yes` does while Agent Zero runs: its own
        settings, outbox connection and module state (the checkout's modules, not the ones Agent
        Zero loaded)."""
        home = tempfile.TemporaryDirectory()
        self.addCleanup(home.cleanup)
        env = {"HONCHO_API_URL": self.server.url,
               "HONCHO_OUTBOX_PATH": self.host.config["outbox_path"],
               "HONCHO_API_KEY": KEY, "HOME": home.name}
        out = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(["forget-chat", chat, "--yes"], environ=env, out=out)
        self.assertEqual(code, 0, out.getvalue())

    def test_after_the_tool_forgot_the_chat_its_next_turn_loads_and_recalls_only_the_new_one(self):
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        agent = StubAgent(0, StubContext(id=CHAT))
        self.assertEqual(set(self.turn(agent, "which tea do I like?")), {f"chat-{CHAT}"})
        answer = asyncio.run(run_tool(agent, {"action": "forget_chat", "confirm": True}))
        self.assertIn(f"later messages of the chat go to session chat1-{CHAT}", answer)
        self.assertEqual(set(self.turn(agent, "which cups go with it?")), {f"chat1-{CHAT}"})

    def test_after_the_sidebar_forgot_the_chat_the_event_loop_names_its_new_session_at_once(self):
        from usr.plugins.honcho.extensions.honcho_bridge import chat_sessions, host, operations

        agent = StubAgent(0, StubContext(id=CHAT))
        self.turn(agent, "which tea do I like?")
        done = operations.forget_document({"action": "forget_chat", "chat": CHAT,
                                           "confirmed": True})
        self.assertEqual(done["result"]["next_session"], f"chat1-{CHAT}")
        # memory only, as the hooks ask
        on_the_loop = chat_sessions.chat_session(agent, host.settings_for(agent), None)
        self.assertEqual(on_the_loop, f"chat1-{CHAT}")
        self.settle()

    def test_after_the_command_line_forgot_the_chat_its_next_recall_names_its_new_session(self):
        agent = StubAgent(0, StubContext(id=CHAT))
        self.assertEqual(set(self.turn(agent, "which tea do I like?")), {f"chat-{CHAT}"})
        self.forget_from_the_command_line(CHAT)
        self.assertEqual(self.turn(agent, "and the cups?", capture=False), [f"chat1-{CHAT}"])
        self.assertEqual(set(self.turn(agent, "and the teapot?")), {f"chat1-{CHAT}"},
                         "the capture-time load too")

    def test_status_names_the_chats_new_session(self):
        from usr.plugins.honcho.extensions.honcho_bridge import operations
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        agent = StubAgent(0, StubContext(id=CHAT))
        self.turn(agent, "which tea do I like?")
        self.forget_from_the_command_line(CHAT)
        for light in (True, False):
            with self.subTest(light=light):
                status = operations.status_document({"context": CHAT, "light": light})["status"]
                self.assertEqual(status["identity"]["session_id"], f"chat1-{CHAT}")
        text = asyncio.run(run_tool(agent, {"action": "status"}))
        self.assertIn(f"Session chat1-{CHAT} ", text)
        self.assertNotIn(f"chat-{CHAT}", text)

    def test_the_tools_writes_after_the_forget_name_the_new_session_and_never_remake_the_old(self):
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        agent = StubAgent(0, StubContext(id=CHAT))
        self.turn(agent, "which tea do I like?")
        self.forget_from_the_command_line(CHAT)
        answer = asyncio.run(run_tool(agent, {"action": "remember",
                                              "content": "Drinks oolong in the evening"}))
        self.assertIn("Remembered as conclusion", answer)
        self.assertEqual([c["session_id"] for c in self.fake.conclusions.values()],
                         [f"chat1-{CHAT}"])
        self.assertNotIn(("agent-zero", f"chat-{CHAT}"), self.fake.sessions)

    def test_chat_start_in_a_project_registers_the_new_session_in_its_scope(self):
        context = StubContext(id="Proj0003", project="Alpha")
        agent = StubAgent(0, context)
        self.forget_from_the_command_line("Proj0003")
        self.load(INIT_EXT)(agent=agent).execute()
        self.settle()
        self.assertTrue(self.hub().registrar().stop(WAIT_S))  # finishes the queued registration
        self.assertEqual(self.fake.scopes[("agent-zero", "a0-alpha")], {"chat1-Proj0003"})


if __name__ == "__main__":
    unittest.main()
