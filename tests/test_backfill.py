"""Backfill of saved Agent Zero chats: what is kept, how it is dated, redacted, queued and
delivered.

The chat files are written the way Agent Zero v1.7 writes them (`SavedChat` below; each field is
named after the file and line of Agent Zero that produces it). The format was checked against a
chat the real Agent Zero v1.7 saved with its own `persist_chat.save_tmp_chat` after a scripted
conversation (a typed message with a secret, a subordinate the human interrupted, a second turn, a
nudge): the backfill of that file gave the event ids, texts and order live capture had queued in
the same run, each dated within a second of it. Real outbox in temp dirs, real worker and SDK over
the fake Honcho, manual clocks, no sleeps.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import unittest
import uuid

from delivery_helpers import Bench
from hub_testkit import ROOT
from outbox_helpers import ManualClock, temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, CaptureService, Outcome, Role, event_id
from honcho_hub.cli import agent_zero_files, backfill
from honcho_hub.cli import main as cli
from honcho_hub.errors import BackfillError
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import Outbox

IMPORT_AT = 1_800_000_000.0  # the clock of the import
LOGGED_AT = 1_799_000_000.0  # when the conversations in the chat files happened
OPENAI_KEY = "sk-proj-Zq7Xv2Lm9Tr4Wp8Kd3Hs6Bn1Cf5Gy0Ju"
# prompts/fw.initial_message.md as Agent.read_prompt returns it (fences removed), shortened.
GREETING = json.dumps({"thoughts": ["This is a new conversation, I should greet the user warmly."],
                       "headline": "Greeting user and starting conversation",
                       "tool_name": "response",
                       "tool_args": {"text": "**Hello!**, I'm **Agent Zero**, your AI assistant."}},
                      indent=4)


def model_reply(tool_name: str, **tool_args) -> str:
    """What the model answers (a tool request), as Agent.hist_add_ai_response keeps it:
    prompts/fw.ai_response.md is `{{message}}`, so the content is the reply text itself
    (agent.py:709-712)."""
    return json.dumps({"thoughts": [f"use {tool_name}"], "headline": f"Using {tool_name}",
                       "tool_name": tool_name, "tool_args": tool_args})


class SavedChat:
    """A chat as Agent Zero v1.7's helpers/persist_chat.py saves it (`_serialize_context`,
    line 118).

    - `agents`: agent 0, then each subordinate (`_serialize_agent`, 154): `number`, `data`, and
      `history`, a JSON string of History.to_dict (helpers/history.py:421): `bulks` (Bulk.to_dict,
      290: `records`), `topics` and `current` (Topic.to_dict, 240: `messages`); a message is
      Message.to_dict (117): `_cls`, `id`, `ai`, `content`, `summary`, `tokens`. Every user message
      starts a new topic (History.new_topic, 343, called by Agent.hist_add_user_message,
      agent.py:680).
    - user-side contents: prompts/fw.user_message.md (`user_message`) or fw.intervention.md
      (`user_intervention`) with empty parts removed (agent.py:697-701); tool results `tool_name`,
      `tool_result` (agent.py:720); warnings fw.warning.md `system_warning` (agent.py:715).
    - `log`: `_serialize_log` (166): the last 1,000 LogItem.output()s (helpers/log.py:199): `no`,
      `id`, `type`, `heading`, `content`, `kvps`, `timestamp`, `agentno`. A typed message's `user`
      item has the message's id (helpers/message_queue.py:114-146, api/message.py); an AI message's
      id is its `agent` item's (before_main_llm_call/_10_log_for_stream.py:23, agent.py:495-507),
      and the `response` item shares it (response_stream/_20_live_response.py:35-40).
    - the project: `data.project` (helpers/projects.py:17, 391).
    """

    def __init__(self, chat_id: str = "Ab3dE6gH", *, project: str | None = None,
                 kind: str = "user") -> None:
        self.id, self.project, self.kind = chat_id, project, kind
        self.histories: dict[int, dict] = {}
        self.logs: list[dict] = []
        self.clock = LOGGED_AT

    # -- what happens in a chat ------------------------------------------------------------------

    def greeting(self) -> str:
        """extensions/python/agent_init/_10_initial_message.py: an AI message and its `response`
        log item."""
        message_id = self._add(0, True, GREETING)
        self._log(message_id, "response", 0)
        return message_id

    def typed(self, text: str, *, agent: int = 0, intervention: bool = False, logged: bool = True,
              message_id: str | None = None) -> str:
        """A person typed `text` (on `agent` as an intervention); the web UI logs it under the
        message's id."""
        message_id = message_id or str(uuid.uuid4())
        if logged:
            self._log(message_id, "user", agent)
        content = {"user_intervention" if intervention else "user_message": text}
        return self._add(agent, False, content, message_id=message_id, new_topic=True)

    def delegated(self, text: str, agent: int = 1) -> str:
        """call_subordinate: the superior's message to its subordinate, as a user message (not
        logged)."""
        return self._add(agent, False, {"user_message": text}, new_topic=True)

    def nudge(self) -> str:
        """AgentContext.nudge (agent.py:237): prompts/fw.msg_nudge.md sent to agent 0 as if
        typed."""
        return self._add(0, False, {"user_message": agent_zero_files.NUDGE_TEXT}, new_topic=True)

    def answer(self, text: str, *, agent: int = 0, logged: bool = True,
               message_id: str | None = None) -> str:
        """The model calls the `response` tool; its log items share the AI message's id."""
        message_id = self._add(agent, True, model_reply("response", text=text),
                               message_id=message_id)
        if logged:
            self._log(message_id, "agent", agent)
            self._log(message_id, "response", agent)
        return message_id

    def tool(self, name: str, result: str, *, agent: int = 0, **args) -> str:
        """A tool call and its result (Tool.after_execution: hist_add_tool_result with the log
        item's id)."""
        message_id = self._add(agent, True, model_reply(name, **args))
        self._log(message_id, "agent", agent)
        self._add(agent, False, {"tool_name": name, "tool_result": result})
        return message_id

    def ai(self, content, agent: int = 0) -> str:
        return self._add(agent, True, content)

    def user_side(self, content, agent: int = 0, message_id: str | None = None) -> str:
        return self._add(agent, False, content, message_id=message_id)

    def warning(self, text: str, agent: int = 0) -> str:
        return self._add(agent, False, {"system_warning": text})

    def compress(self, agent: int = 0, topics: int = 2) -> None:
        """History.compress_topics (history.py:490-500): the oldest topics move into a summarised
        bulk."""
        history = self._history(agent)
        moved, history["topics"] = history["topics"][:topics], history["topics"][topics:]
        history["bulks"].append({"_cls": "Bulk", "summary": "earlier topics", "records": moved})

    # -- the file --------------------------------------------------------------------------------

    def document(self) -> dict:
        return {
            "id": self.id, "name": None, "created_at": "2026-12-01T10:00:00+00:00",
            "type": self.kind,
            "last_message": "2026-12-01T10:30:00+00:00",
            "agents": [{"number": n, "data": {}, "history": json.dumps(h, ensure_ascii=False)}
                       for n, h in sorted(self.histories.items())],
            "streaming_agent": 0,
            "log": {"guid": str(uuid.uuid4()), "logs": self.logs, "progress": "", "progress_no": 0},
            "data": {"project": self.project} if self.project else {}, "output_data": {},
        }

    def write(self, chats_dir: str) -> str:
        folder = os.path.join(chats_dir, self.id)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, agent_zero_files.CHAT_FILE), "w",
                  encoding="utf-8") as handle:
            # persist_chat: ensure_ascii=False
            json.dump(self.document(), handle, ensure_ascii=False)
        return folder

    def logged_at(self, message_id: str, kind: str) -> float:
        return next(item["timestamp"] for item in self.logs
                    if item["id"] == message_id and item["type"] == kind)

    # -- internals -------------------------------------------------------------------------------

    def _history(self, agent: int) -> dict:
        empty = {"_cls": "Topic", "summary": "", "messages": []}
        return self.histories.setdefault(agent, {"_cls": "History", "counter": 0, "bulks": [],
                                                 "topics": [],
                                                 "current": dict(empty, messages=[])})

    def _add(self, agent: int, ai: bool, content, *, message_id: str | None = None,
             new_topic: bool = False) -> str:
        history = self._history(agent)
        if new_topic and history["current"]["messages"]:
            history["topics"].append(history["current"])
            history["current"] = {"_cls": "Topic", "summary": "", "messages": []}
        message_id = str(uuid.uuid4()) if message_id is None else message_id
        history["current"]["messages"].append({"_cls": "Message", "id": message_id, "ai": ai,
                                               "content": content, "summary": "", "tokens": 10})
        return message_id

    def _log(self, message_id: str, kind: str, agent: int) -> None:
        self.clock += 7.25
        self.logs.append({"no": len(self.logs), "id": message_id, "type": kind, "heading": "",
                          "content": "", "kvps": {}, "timestamp": self.clock, "agentno": agent})


def conversation(chat_id: str = "Ab3dE6gH", **kwargs) -> tuple[SavedChat, dict[str, str]]:
    """The conversation the real Agent Zero run had: greeting, a typed message with a key, a
    subordinate the human interrupts, agent 0's answer, a second turn, a nudge and the answer after
    it. Returns the chat and the ids of the messages capture keeps."""
    chat = SavedChat(chat_id, **kwargs)
    ids = {}
    chat.greeting()
    ids["hello"] = chat.typed(f"Hi, I'm Dana. My key is {OPENAI_KEY}")
    chat.tool("call_subordinate", "Subordinate: two boats.", message="Count the boats.",
              reset="true")
    chat.delegated("Count the boats.")
    chat.tool("wait", "waited", agent=1, seconds=45)
    ids["boat"] = chat.typed("Also, my boat is called Sea Otter.", agent=1, intervention=True)
    chat.answer("Subordinate: two boats.", agent=1)
    ids["two"] = chat.answer("You have two boats, Dana.")
    ids["which"] = chat.typed("What is my boat called?")
    ids["otter"] = chat.answer("Your boat is Sea Otter.")
    chat.nudge()
    ids["nudged"] = chat.answer("Nudged answer.")
    return chat, ids


KEPT = [("hello", "user"), ("boat", "user"), ("two", "agent"), ("which", "user"),
        ("otter", "agent"), ("nudged", "agent")]


# From the real run (see the module's docstring): chat 7ch2pK4o's history message ids, and the
# event ids and texts live capture queued for them, in its order.
REAL_CHAT = "7ch2pK4o"
REAL_RUN = [
    ("5f08d81b-c145-4c9e-be25-4d16f989968a", "ev_2a555162b632aee143e2f0a8f02ce5cf9c19ce61",
     "Hi, I'm Dana. My code is [secret-ref:BOAT_CODE] and key [REDACTED:openai_key]"),
    ("18a457bf-3fbe-4577-9433-a0233510a403", "ev_7238f628f262abd874a8879719080ede2280d12d",
     "Also, my boat is called Sea Otter."),
    ("a0f6080c-da29-44ab-a2fb-0d2958653d00", "ev_15ccd173c8277675b771c00c8a50ecdffb0032c8",
     "You have two boats, Dana."),
    ("3ecec994-1448-46c7-aa76-c02f492be19e", "ev_e9e189a565e9ea5920b317645ddab3fe879aef2f",
     "What is my boat called?"),
    ("f0f9359c-bbfc-4d34-8653-ae1ed1b1b112", "ev_fa8720f78b0e3d72fe947d95ae6e46232d8e5f5e",
     "Your boat is Sea Otter."),
    ("d04a6c92-d6f4-4201-a266-e721bee123bd", "ev_0e45bcf1010c5ef0414a8d80408af6676f8be566",
     "Nudged answer."),
]


class BackfillCase(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.usr = os.path.join(folder.name, "usr")
        self.chats = os.path.join(self.usr, "chats")
        os.makedirs(self.chats)
        self.path = os.path.join(folder.name, "state", "outbox.sqlite3")
        self.settings = self.make_settings()
        self.clock, self.mono = ManualClock(IMPORT_AT), ManualClock(100.0)

    def make_settings(self, **overrides):
        return build_settings({"outbox_path": self.path, **overrides}, {}, {})

    def run_backfill(self, *, settings=None, settings_for=None, **options) -> dict:
        settings = settings or self.settings
        run = backfill.Backfill(settings, settings_for or (lambda project: settings),
                                clock=self.clock, monotonic=self.mono, pause=self.mono.advance,
                                **options)
        return run.run(agent_zero_files.saved_chats(self.chats))

    def cli(self, *argv, config: dict | None = None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        env = {"HONCHO_OUTBOX_PATH": self.path, "HONCHO_API_URL": "http://127.0.0.1:9",
               "HOME": self.usr}
        options = []
        if config is not None:
            options = ["--config", os.path.join(self.usr, "settings.yaml")]
            with open(options[1], "w") as handle:
                json.dump(config, handle)
        with contextlib.redirect_stderr(err):
            try:
                code = cli.main([*options, "backfill", "--chats-dir", self.chats, *argv],
                                environ=env, out=out)
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue(), err.getvalue()

    def rows(self, path=None) -> list[tuple]:
        conn = sqlite3.connect(path or self.path)
        try:
            return conn.execute("SELECT id, role, session_id, peer_id, scope_id, content,"
                                " captured_at, ambiguous FROM events ORDER BY seq").fetchall()
        finally:
            conn.close()


class WhatIsKeptTest(BackfillCase):
    def test_the_real_agent_zero_runs_chat_gives_the_events_its_live_capture_queued(self):
        ids = [source for source, _, _ in REAL_RUN]
        chat = SavedChat(REAL_CHAT)
        chat.greeting()
        # Agent Zero masked the stored secret (BOAT_CODE) when the message entered the history.
        chat.typed(f"Hi, I'm Dana. My code is §§secret(BOAT_CODE) and key {OPENAI_KEY}",
                   message_id=ids[0])
        chat.tool("call_subordinate", "Subordinate: two boats.", message="Count the boats.",
                  reset="true")
        chat.delegated("Count the boats.")
        chat.ai(model_reply("wait", seconds=45), agent=1)
        chat.typed("Also, my boat is called Sea Otter.", agent=1, intervention=True,
                   message_id=ids[1])
        chat.answer("Subordinate: two boats.", agent=1)
        chat.answer("You have two boats, Dana.", message_id=ids[2])
        chat.typed("What is my boat called?", message_id=ids[3])
        chat.answer("Your boat is Sea Otter.", message_id=ids[4])
        chat.nudge()
        chat.answer("Nudged answer.", message_id=ids[5])
        chat.write(self.chats)
        self.run_backfill()
        self.assertEqual([(r[0], r[5]) for r in self.rows()],
                         [(event, text) for _, event, text in REAL_RUN])

    def test_the_typed_messages_and_agent_zeros_final_answers_in_order_with_live_captures_ids(self):
        chat, ids = conversation()
        chat.write(self.chats)
        report = self.run_backfill()
        expected = [(event_id(chat.id, role, ids[name], 0), role) for name, role in KEPT]
        self.assertEqual([(r[0], r[1]) for r in self.rows()], expected)
        texts = [r[5] for r in self.rows()]
        self.assertEqual(texts[1:], ["Also, my boat is called Sea Otter.",
                                     "You have two boats, Dana.", "What is my boat called?",
                                     "Your boat is Sea Otter.", "Nudged answer."])
        self.assertEqual(report["skipped"], {"framework_nudge": 1, "from_superior_agent": 1,
                                             "greeting": 1, "not_a_final_response": 2,
                                             "subordinate_response": 1, "tool_result": 2})

    def test_each_kind_of_saved_message_is_kept_or_skipped_for_its_reason(self):
        asked = {"user": 1}  # the typed question before an AI message is kept
        cases = {
            # name: (how the chat is made, kept messages by role, the skip reason (or reasons) or
            # None)
            "typed by agent 0's human": (lambda c: c.typed("hello"), {"user": 1}, None),
            "an intervention on a subordinate":
                (lambda c: c.typed("stop", agent=2, intervention=True), {"user": 1}, None),
            "agent 0's answer":
                (lambda c: (c.typed("q"), c.answer("a")), {"user": 1, "agent": 1}, None),
            "a superior's message to its subordinate":
                (lambda c: c.delegated("do it"), {}, "from_superior_agent"),
            "the framework's nudge": (lambda c: c.nudge(), {}, "framework_nudge"),
            "the greeting before anything was asked": (lambda c: c.greeting(), {}, "greeting"),
            "another tool":
                (lambda c: (c.typed("q"), c.ai(model_reply("search", query="x"))), asked,
                 "not_a_final_response"),
            "a subordinate's answer":
                (lambda c: (c.delegated("q", agent=1), c.answer("a", agent=1)), {},
                 {"from_superior_agent": 1, "subordinate_response": 1}),
            "an answer the framework refused as repeated": (
                lambda c: (c.typed("q"), c.answer("same"),
                           c.warning("You have sent the same message again.")),
                # the warning is the framework's
                asked, {"not_executed": 1, "framework_message": 1}),
            "a response without arguments":
                (lambda c: (c.typed("q"), c.ai(model_reply("response"))), asked, "not_executed"),
            "a reply that is no tool request":
                (lambda c: (c.typed("q"), c.ai("I think so.")), asked, "unreadable_ai_message"),
            "a response whose text is not text":
                (lambda c: (c.typed("q"), c.ai(model_reply("response", text=[1]))), asked,
                 "invalid"),
            "a tool result":
                (lambda c: c.user_side({"tool_name": "x", "tool_result": "y"}), {}, "tool_result"),
            "a history summary":
                (lambda c: c.user_side({"messages_summary": "they talked"}), {},
                 "framework_message"),
            "a raw message": (lambda c: c.user_side({"raw_content": "...", "preview": "image"}), {},
                              "framework_message"),
            "attachments only":
                (lambda c: c.user_side({"attachments": ["/a0/usr/uploads/a.png"]}), {}, "empty"),
            "a message without an id":
                (lambda c: c.user_side({"user_message": "hi"}, message_id=""), {},
                 "no_message_id"),
            "blank typed text": (lambda c: c.typed("  \x00 "), {}, "empty"),
        }
        for name, (make, kept, reason) in cases.items():
            with self.subTest(name):
                chat = SavedChat(uuid.uuid4().hex[:8])
                make(chat)
                report = backfill.Backfill(self.settings, lambda p: self.settings,
                                           dry_run=True).run([chat.write(self.chats)])
                self.assertEqual(report["messages"], {"user": 0, "agent": 0, **kept})
                skipped = reason if isinstance(reason, dict) else {reason: 1} if reason else {}
                self.assertEqual(report["skipped"], skipped)

    def test_messages_in_bulks_and_topics_are_read_in_order(self):
        chat = SavedChat()
        first = [chat.typed(f"message {i}") for i in range(4)]
        chat.compress(topics=3)  # three topics in a bulk, one left in topics, the current one below
        last = chat.typed("latest")
        chat.write(self.chats)
        self.run_backfill()
        self.assertEqual([r[0] for r in self.rows()],
                         [event_id(chat.id, "user", i, 0) for i in [*first, last]])

    def test_chats_capture_would_not_touch_are_skipped_whole(self):
        cases = {"background_chat": SavedChat("bgchat01", kind="background"),
                 "scheduler_chat": SavedChat("task0001"),
                 "capture_disabled": SavedChat("projoff1", project="quiet")}
        for chat in cases.values():
            chat.typed("x")
            chat.write(self.chats)
        os.makedirs(os.path.join(self.usr, "scheduler"))
        with open(os.path.join(self.usr, "scheduler", "tasks.json"), "w") as handle:
            json.dump({"tasks": [{"uuid": "u1", "context_id": "task0001"}]}, handle)
        quiet = os.path.join(self.usr, "projects", "quiet", ".a0proj", "plugins", "honcho")
        os.makedirs(quiet)
        with open(os.path.join(quiet, "config.json"), "w") as handle:
            json.dump({"capture_enabled": False}, handle)
        broken = os.path.join(self.chats, "broken01")
        os.makedirs(broken)
        with open(os.path.join(broken, agent_zero_files.CHAT_FILE), "w") as handle:
            handle.write('{"id": "broken01", "agents": [')
        report = backfill.Backfill(
            self.settings, backfill.project_settings({}, {}, self.chats), dry_run=True,
            scheduled=agent_zero_files.scheduled_chat_ids(self.chats)).run(
            agent_zero_files.saved_chats(self.chats))
        self.assertEqual(report["chats"], {"found": 4, "imported": 0, "skipped": {
            "background_chat": 1, "capture_disabled": 1, "scheduler_chat": 1, "unreadable": 1}})

    def test_an_unreadable_scheduler_task_list_stops_the_backfill_before_anything_is_read(self):
        os.makedirs(os.path.join(self.usr, "scheduler"))
        with open(os.path.join(self.usr, "scheduler", "tasks.json"), "w") as handle:
            handle.write("{not json")
        with self.assertRaises(BackfillError) as raised:
            agent_zero_files.scheduled_chat_ids(self.chats)
        self.assertEqual(raised.exception.code, "scheduler_unreadable")


class DryRunTest(BackfillCase):
    def test_a_dry_run_counts_chats_messages_by_role_and_skips_by_reason_and_queues_nothing(self):
        conversation("chat0001")[0].write(self.chats)
        conversation("chat0002")[0].write(self.chats)
        SavedChat("bgchat01", kind="background").write(self.chats)
        report = self.run_backfill(dry_run=True)
        self.assertEqual(report["chats"],
                         {"found": 3, "imported": 2, "skipped": {"background_chat": 1}})
        self.assertEqual(report["messages"], {"user": 6, "agent": 6})
        self.assertEqual(report["skipped"], {"framework_nudge": 2, "from_superior_agent": 2,
                                             "greeting": 2, "not_a_final_response": 4,
                                             "subordinate_response": 2, "tool_result": 4})
        self.assertEqual(report["times"], {"log": 12, "import": 0})
        self.assertEqual(report["events"], {"planned": 12})
        self.assertFalse(os.path.exists(self.path), "a dry run created the outbox")
        text = backfill.report_text(report)
        self.assertIn("chats: 3 found, 2 to import; skipped: background_chat 1", text)
        self.assertIn("messages to import: user 6, agent 6", text)
        self.assertIn("nothing was queued (dry run)", text)


class SameEventAsLiveCaptureTest(BackfillCase):
    def test_a_message_imported_then_captured_live_makes_no_second_row(self):
        chat, ids = conversation()
        chat.write(self.chats)
        self.run_backfill()
        capture = CaptureService(self.settings, clock=self.clock, monotonic=self.mono,
                                 fallback_journal_folder=os.path.join(os.path.dirname(self.path),
                                                                      "journal"))
        self.addCleanup(capture.close)
        live = [(Role.USER, ids["which"], "What is my boat called?"),
                (Role.AGENT, ids["otter"], "Your boat is Sea Otter."),
                (Role.USER, ids["hello"], f"Hi, I'm Dana. My key is {OPENAI_KEY}")]
        for role, source_id, text in live:
            with self.subTest(role=role.value, text=text[:12]):
                outcome = capture.capture(CaptureRequest(chat.id, role, source_id, text),
                                          self.settings)
                self.assertEqual(outcome, Outcome.DUPLICATE)
        self.assertEqual(len(self.rows()), len(KEPT))

    def test_a_message_captured_live_then_imported_is_already_queued(self):
        chat, ids = conversation()
        capture = CaptureService(self.settings, clock=self.clock, monotonic=self.mono,
                                 fallback_journal_folder=os.path.join(os.path.dirname(self.path),
                                                                      "journal"))
        self.addCleanup(capture.close)
        capture.capture(CaptureRequest(chat.id, Role.USER, ids["which"], "What is my boat called?"),
                        self.settings)
        capture.close()
        chat.write(self.chats)
        report = self.run_backfill()
        self.assertEqual(report["events"], {"already_queued": 1, "queued": len(KEPT) - 1})
        self.assertEqual(len(self.rows()), len(KEPT))

    def test_a_second_backfill_queues_nothing_new(self):
        conversation()[0].write(self.chats)
        self.run_backfill()
        again = self.run_backfill()
        self.assertEqual(again["events"], {"already_queued": len(KEPT), "queued": 0})

    def test_sessions_peers_and_scopes_follow_the_settings_and_the_chats_project(self):
        cases = {
            # name: (settings, the chat's project, session, scope)
            "per-chat, no project": ({}, None, "chat-Ab3dE6gH", None),
            "per-chat in a project": ({}, "Boat Club", "chat-Ab3dE6gH", "a0-boat-club"),
            "per-project":
                ({"session_strategy": "per-project"}, "boats", "project-boats", "a0-boats"),
            "global, custom scope": ({"session_strategy": "global", "scope_strategy": "custom",
                                      "scope_custom": "home"}, "boats", "global", "a0-home"),
            "other peers":
                ({"user_peer_id": "dana", "agent_peer_id": "helper"}, None, "chat-Ab3dE6gH", None),
        }
        for name, (values, project, session, scope) in cases.items():
            with self.subTest(name):
                self.path = temp_outbox_path(self)
                settings = self.make_settings(**values)
                chat, _ = conversation(project=project)
                chat.write(self.chats)
                self.run_backfill(settings=settings)
                rows = self.rows()
                self.assertEqual({(r[2], r[4]) for r in rows}, {(session, scope)})
                self.assertEqual({(r[1], r[3]) for r in rows}, {("user", settings.user_peer_id),
                                                                ("agent", settings.agent_peer_id)})

    def test_a_projects_own_scope_settings_apply_to_its_chats(self):
        folder = os.path.join(self.usr, "projects", "boats", ".a0proj", "plugins", "honcho")
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w") as handle:
            json.dump({"scope_strategy": "custom", "scope_custom": "harbour"}, handle)
        conversation("inboats1", project="boats")[0].write(self.chats)
        conversation("noproj01")[0].write(self.chats)
        self.run_backfill(settings_for=backfill.project_settings({"outbox_path": self.path}, {},
                                                                 self.chats))
        by_chat: dict[str, set] = {}
        for row in self.rows():
            by_chat.setdefault(row[2], set()).add(row[4])
        self.assertEqual(by_chat, {"chat-inboats1": {"a0-harbour"}, "chat-noproj01": {None}})


class HumanPeerTest(BackfillCase):
    """The chat's human as live capture names it (rules.human_peer): the project's human_peer_id,
    else the entry of agent 0's profile in profile_peers — every chat's agent 0 runs under Agent
    Zero's agent_profile setting (usr/settings.json beside the chats folder; `agent0` when unset) —
    else the unmapped policy."""

    def write_settings(self, agent_profile: str | None) -> None:
        if agent_profile is not None:
            with open(os.path.join(self.usr, "settings.json"), "w") as handle:
                json.dump({"agent_profile": agent_profile, "chat_model_name": "x"}, handle)

    def run_as_the_command_line(self, **values) -> dict:
        """The backfill as `python -m honcho_hub backfill` runs it: the global layer `values`, each
        project's own settings over it, Agent Zero's agent profile from its settings file."""
        layer = {"outbox_path": self.path, **values}
        return backfill.Backfill(
            self.make_settings(**values), backfill.project_settings(layer, {}, self.chats),
            clock=self.clock, profile=agent_zero_files.agent_profile(self.chats)).run(
            agent_zero_files.saved_chats(self.chats))

    def test_under_a_shared_session_a_chat_of_another_human_keeps_a_session_of_its_own(self):
        # As live capture (host.chat_settings): no Honcho session holds two humans.
        self.write_settings(None)
        folder = os.path.join(self.usr, "projects", "boats", ".a0proj", "plugins", "honcho")
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w") as handle:
            json.dump({"human_peer_id": "alice"}, handle)
        conversation(project="boats")[0].write(self.chats)
        self.run_as_the_command_line(session_strategy="global")
        self.assertEqual({(r[2], r[3]) for r in self.rows() if r[1] == "user"},
                         {("chat-Ab3dE6gH", "alice")})

    def test_user_messages_go_to_the_chats_human_and_answers_to_the_agent(self):
        cases = {
            # name: (global settings, the project's own, Agent Zero's agent_profile, the user peer
            # or a skip)
            "the project names its human": ({}, {"human_peer_id": "alice"}, None, "alice"),
            "the project wins over the profile":
                ({"profile_peers": "agent0=bob"}, {"human_peer_id": "alice"}, None, "alice"),
            "Agent Zero's default profile": ({"profile_peers": "agent0=bob"}, {}, None, "bob"),
            "the configured profile":
                ({"profile_peers": "agent0=bob,research=carol"}, {}, "research", "carol"),
            "unmapped, default-peer":
                ({"profile_peers": "research=carol", "user_peer_id": "pat"}, {}, None, "pat"),
            "unmapped, no-capture":
                ({"profile_peers": "research=carol", "unmapped_chats": "no-capture"}, {}, None,
                 "unmapped_chat"),
        }
        for name, (values, own, profile, expected) in cases.items():
            with self.subTest(name):
                self.setUp()
                self.write_settings(profile)
                folder = os.path.join(self.usr, "projects", "boats", ".a0proj", "plugins", "honcho")
                os.makedirs(folder)
                with open(os.path.join(folder, "config.json"), "w") as handle:
                    json.dump(own, handle)
                conversation(project="boats")[0].write(self.chats)
                report = self.run_as_the_command_line(**values)
                if expected == "unmapped_chat":
                    self.assertEqual(report["chats"]["skipped"], {"unmapped_chat": 1})
                    self.assertFalse(self.rows())
                    continue
                self.assertEqual({(r[1], r[3]) for r in self.rows()},
                                 {("user", expected), ("agent", "agent-zero")})

    def test_a_saved_chat_of_a_chat_integrations_sender_goes_to_the_senders_peer(self):
        # As live capture (host.chat_sender): what the integration kept on the chat names it.
        self.write_settings(None)
        folder = conversation()[0].write(self.chats)
        path = os.path.join(folder, agent_zero_files.CHAT_FILE)
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        document["data"] = {"telegram_user_id": 12345, "telegram_chat_id": 12345}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        self.run_as_the_command_line(session_strategy="global")
        self.assertEqual({(r[2], r[3]) for r in self.rows() if r[1] == "user"},
                         {("chat-Ab3dE6gH", "telegram-12345")})

    def test_an_unreadable_agent_zero_settings_file_stops_the_backfill(self):
        with open(os.path.join(self.usr, "settings.json"), "w") as handle:
            handle.write("{not json")
        with self.assertRaises(BackfillError) as raised:
            agent_zero_files.agent_profile(self.chats)
        self.assertEqual(raised.exception.code, "settings_unreadable")


class RedactionTest(BackfillCase):
    def test_imported_text_is_redacted_as_capture_redacts_it(self):
        chat = SavedChat()
        # Agent Zero masked the stored secret's value when the message entered the history.
        chat.typed(f"My key is {OPENAI_KEY} and my locker code is §§secret(LOCKER_CODE)")
        chat.answer("Noted your code otter-lighthouse-7731.")
        chat.write(self.chats)
        self.run_backfill(secrets_for=lambda project: {"LOCKER_CODE": "otter-lighthouse-7731"})
        contents = [r[5] for r in self.rows()]
        self.assertEqual(contents, ["My key is [REDACTED:openai_key] and my locker code is"
                                    " [secret-ref:LOCKER_CODE]",
                                    "Noted your code [REDACTED:host_secret]."])
        for content in contents:
            self.assertNotIn("Zq7Xv2Lm9Tr4", content)
            self.assertNotIn("otter-lighthouse", content)

    def test_a_message_whose_redaction_fails_is_skipped_and_counted(self):
        chat = SavedChat()
        chat.typed("token ok")
        chat.write(self.chats)
        report = self.run_backfill(secrets_for=lambda project: {"BROKEN": _Exploding("xxxx")})
        self.assertEqual((report["skipped"], report["messages"]),
                         ({"redaction_failed": 1}, {"user": 0, "agent": 0}))
        self.assertEqual(self.rows(), [])

    def test_every_imported_row_is_ambiguous(self):
        conversation()[0].write(self.chats)
        self.run_backfill()
        self.assertEqual({r[7] for r in self.rows()}, {1})

    def test_a_long_message_is_split_as_capture_splits_it(self):
        chat = SavedChat()
        source = chat.typed("word " * 12_000)  # 60,000 characters: three parts
        chat.write(self.chats)
        self.run_backfill()
        self.assertEqual([r[0] for r in self.rows()],
                         [event_id(chat.id, "user", source, i) for i in range(3)])


class TimesTest(BackfillCase):
    def test_a_message_gets_its_log_items_time_else_the_import_time_and_the_report_says_which(self):
        chat = SavedChat()
        typed = chat.typed("logged")
        answered = chat.answer("answer, logged")
        chat.typed("before the log's newest 1,000 items", logged=False)
        chat.answer("unlogged answer", logged=False)
        chat.write(self.chats)
        self.clock.advance(5)
        report = self.run_backfill()
        times = [r[6] for r in self.rows()]
        self.assertEqual(times, [chat.logged_at(typed, "user"),
                                 chat.logged_at(answered, "response"),
                                 IMPORT_AT + 5, IMPORT_AT + 5])
        self.assertEqual(report["times"], {"log": 2, "import": 2})

    def test_an_answer_without_a_response_item_takes_its_agent_items_time_bad_times_ignored(self):
        chat = SavedChat()
        chat.typed("q")
        answered = chat.answer("a")
        chat.logs = [item for item in chat.logs if item["type"] != "response"]
        broken = chat.typed("b")
        next(item for item in chat.logs if item["id"] == broken)["timestamp"] = "yesterday"
        chat.write(self.chats)
        self.run_backfill()
        self.assertEqual([r[6] for r in self.rows()][1:],
                         [chat.logged_at(answered, "agent"), IMPORT_AT])

    def test_an_intervention_on_a_subordinate_is_placed_by_its_log_time(self):
        chat, ids = conversation()
        chat.write(self.chats)
        self.run_backfill()
        order = [r[0] for r in self.rows()]
        # after hello, before the answer
        self.assertEqual(order.index(event_id(chat.id, "user", ids["boat"], 0)), 1)


class DeliveryTest(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.chats = os.path.join(folder.name, "usr", "chats")
        os.makedirs(self.chats)

    def backfill(self, bench: Bench, **options) -> dict:
        run = backfill.Backfill(bench.settings, lambda project: bench.settings, clock=bench.clock,
                                monotonic=bench.mono, pause=bench.mono.advance, **options)
        return run.run(agent_zero_files.saved_chats(self.chats))

    def test_delivered_exactly_once_when_honcho_already_holds_some_and_the_outbox_forgot_them(self):
        bench = Bench(self)
        chat, ids = conversation()
        chat.write(self.chats)
        for role, name, text in ((Role.USER, "hello", f"Hi, I'm Dana. My key is {OPENAI_KEY}"),
                                 (Role.USER, "boat", "Also, my boat is called Sea Otter.")):
            self.assertEqual(bench.capture_service.capture(
                CaptureRequest(chat.id, role, ids[name], text), bench.settings), Outcome.QUEUED)
        bench.run_until_idle()
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        bench.clock.advance(2 * 86_400)
        self.assertEqual(box.prune(86_400), 2)  # delivered rows are pruned after a day
        report = self.backfill(bench)
        self.assertEqual(report["events"], {"already_queued": 0, "queued": 6})
        bench.run_until_idle()
        held = bench.fake.session_messages(f"chat-{chat.id}")
        self.assertEqual([m["metadata"]["event_id"] for m in held],
                         [event_id(chat.id, role, ids[name], 0) for name, role in KEPT])
        self.assertEqual(bench.worker.state.metrics.reconciled, 2)
        self.assertEqual(bench.states(), {"delivered": 6})

    def test_the_row_bound_is_kept_while_the_worker_makes_room(self):
        bench = Bench(self, max_queued_rows=100, batch_size=10)
        chat = SavedChat()
        texts = []
        for i in range(80):
            texts += [f"question {i}", f"answer {i}"]
            chat.typed(texts[-2])
            chat.answer(texts[-1])
        chat.write(self.chats)
        waiting = []

        def deliver_a_little(seconds: float) -> None:
            waiting.append(sum(n for s, n in bench.states().items() if s != "delivered"))
            bench.worker.step()
        report = self.backfill(bench, make_room=deliver_a_little)
        self.assertIsNone(report["stopped"])
        self.assertTrue(waiting, "the backfill never had to wait")
        # 90% of max_queued_rows: the rest stays free for live capture
        self.assertLessEqual(max(waiting), 90)
        bench.run_until_idle()
        bench.assert_exactly_once(chat.id, texts)
        self.assertEqual(report["messages"], {"user": 80, "agent": 80})

    def test_without_room_for_the_wait_it_stops_saying_so_and_a_later_run_finishes(self):
        bench = Bench(self, max_queued_rows=100)
        chat = SavedChat()
        texts = [f"line {i}" for i in range(120)]
        for text in texts:
            chat.typed(text)
        chat.write(self.chats)
        report = self.backfill(bench, wait_s=30)
        self.assertEqual(report["stopped"], "outbox_full")
        self.assertEqual(report["events"], {"already_queued": 0, "queued": 90})
        self.assertEqual(report["messages"]["user"], 90)
        self.assertGreaterEqual(bench.mono(), 100.0 + 30)
        self.assertIn("stopped: no room in the outbox", backfill.report_text(report))
        bench.run_until_idle()
        again = self.backfill(bench)
        self.assertIsNone(again["stopped"])
        self.assertEqual(again["events"], {"already_queued": 90, "queued": 30})
        bench.run_until_idle()
        bench.assert_exactly_once(chat.id, texts)


class CommandLineTest(BackfillCase):
    def test_json_on_stdout_and_the_progress_bar_on_stderr(self):
        for i in range(3):
            conversation(f"chat000{i}")[0].write(self.chats)
        code, out, err = self.cli("--json")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual((report["chats"]["imported"], report["events"]["queued"]), (3, 18))
        self.assertIn("backfill [", err)
        self.assertIn("3/3 chats, 18 messages", err)
        self.assertNotIn("Sea Otter", out + err)
        self.assertNotIn(self.path, out + err)

    def test_chat_limit_and_dry_run_choose_what_is_read_and_queued(self):
        for i, chat_id in enumerate(["chat0001", "chat0002", "chat0003"]):
            folder = conversation(chat_id)[0].write(self.chats)
            os.utime(os.path.join(folder, agent_zero_files.CHAT_FILE),
                     (IMPORT_AT + i, IMPORT_AT + i))
        cases = {
            # name: (arguments, chats imported)
            "--chat": (["--chat", "chat0001", "chat0003"], 2),
            "--limit": (["--limit", "1"], 1),
        }
        for name, (argv, imported) in cases.items():
            with self.subTest(name):
                code, out, err = self.cli("--dry-run", "--json", *argv)
                self.assertEqual((code, json.loads(out)["chats"]["imported"]), (0, imported), err)
        self.assertFalse(os.path.exists(self.path))
        code, out, _ = self.cli("--limit", "1", "--json")
        self.assertEqual(code, 0)
        self.assertEqual({r[2] for r in self.rows()}, {"chat-chat0003"})  # the most recently saved

    def test_bad_arguments_are_usage_errors_that_say_why(self):
        conversation()[0].write(self.chats)
        cases = {
            # name: (arguments, what stderr says)
            "unknown chat": (["--chat", "nochat01"], "no saved chat with id nochat01"),
            "a path as chat id": (["--chat", "../x"], "a chat id is 1 to 128 letters"),
            "zero limit": (["--limit", "0"], "--limit is at least 1"),
            "negative wait": (["--wait", "-1"], "--wait is 0 to 86400 seconds"),
        }
        for name, (argv, said) in cases.items():
            with self.subTest(name):
                code, _, err = self.cli(*argv)
                self.assertEqual(code, 2)
                self.assertIn(said, err)
        self.assertFalse(os.path.exists(self.path), "a refused command created the outbox")

    def test_agent_zeros_settings_name_the_profile_and_an_unreadable_file_is_exit_1(self):
        conversation()[0].write(self.chats)
        settings_file = os.path.join(self.usr, "settings.json")
        with open(settings_file, "w") as handle:
            json.dump({"agent_profile": "research"}, handle)
        code, _, err = self.cli(config={"profile_peers": "research=carol"})
        self.assertEqual(code, 0, err)
        self.assertEqual({r[3] for r in self.rows() if r[1] == "user"}, {"carol"})
        with open(settings_file, "w") as handle:
            handle.write("{broken")
        code, _, err = self.cli("--dry-run")
        self.assertEqual(code, 1)
        self.assertIn("settings.json cannot be read", err)

    def test_a_full_outbox_ends_with_exit_3_after_the_wait(self):
        chat = SavedChat()
        for i in range(95):
            chat.typed(f"line {i}")
        chat.write(self.chats)
        code, out, err = self.cli("--wait", "0", config={"max_queued_rows": 100})
        self.assertEqual(code, 3, err)
        self.assertIn("stopped: no room in the outbox", out)


class ForgottenChatTest(BackfillCase):
    """After forget-chat, the chat's saved log stays out of Honcho unless the user names the chat
    again."""

    FORGOTTEN = "chatforg"

    def setUp(self):
        super().setUp()
        chat, _ = conversation(self.FORGOTTEN)
        chat.typed("A question the log no longer dates.", logged=False)
        chat.answer("An answer the log no longer dates.", logged=False)
        chat.write(self.chats)
        conversation("chatkept")[0].write(self.chats)

    def forget(self, settings=None) -> None:
        """What forget-chat records in the outbox (its first step, Outbox.begin_forget), a minute
        later."""
        self.clock.advance(60)
        box = Outbox((settings or self.settings).outbox_path, clock=self.clock)
        try:
            box.begin_forget((settings or self.settings).destination(), self.FORGOTTEN)
        finally:
            box.close()
        self.clock.advance(60)

    def forgotten_rows(self) -> list[tuple]:
        return [row for row in self.rows() if self.FORGOTTEN in row[2]]

    def test_a_forgotten_chats_saved_log_is_not_imported_again_and_the_report_names_it(self):
        self.run_backfill()
        self.forget()
        report = self.run_backfill()
        self.assertEqual(self.forgotten_rows(), [])
        self.assertEqual(report["chats"], {"found": 2, "imported": 1, "skipped": {"forgotten": 1}})
        self.assertEqual(report["forgotten"], {"skipped": [self.FORGOTTEN], "included": []})
        self.assertEqual(report["events"], {"already_queued": len(KEPT), "queued": 0})
        self.assertIn(f"forgotten chats skipped: {self.FORGOTTEN}", backfill.report_text(report))

    def test_a_dry_run_counts_a_forgotten_chat_as_skipped(self):
        self.run_backfill()
        self.forget()
        report = self.run_backfill(dry_run=True)
        self.assertEqual(report["chats"]["skipped"], {"forgotten": 1})
        self.assertEqual(report["events"], {"planned": len(KEPT)})

    def test_named_with_include_forgotten_its_saved_log_goes_to_the_chats_new_session(self):
        cli_settings = self.make_settings(api_url="http://127.0.0.1:9")  # self.cli's destination
        self.forget(cli_settings)
        code, out, err = self.cli("--chat", self.FORGOTTEN, "--include-forgotten", "--json")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual(report["forgotten"], {"skipped": [], "included": [self.FORGOTTEN]})
        self.assertEqual({row[2] for row in self.forgotten_rows()}, {f"chat1-{self.FORGOTTEN}"})
        self.assertEqual(len(self.forgotten_rows()), len(KEPT) + 2)

    def test_the_command_line_says_which_chats_it_skipped_as_forgotten(self):
        cli_settings = self.make_settings(api_url="http://127.0.0.1:9")
        self.forget(cli_settings)
        code, out, err = self.cli()
        self.assertEqual(code, 0, err)
        self.assertIn(f"forgotten chats skipped: {self.FORGOTTEN} (import one again with --chat ID"
                      " --include-forgotten)", out)
        self.assertEqual(self.forgotten_rows(), [])

    def test_include_forgotten_without_chat_ids_is_a_usage_error(self):
        code, _, err = self.cli("--include-forgotten")
        self.assertEqual(code, 2)
        self.assertIn("--include-forgotten needs --chat", err)
        self.assertFalse(os.path.exists(self.path), "a refused command created the outbox")


def backfill_child(chats: str, outbox_path: str) -> subprocess.CompletedProcess:
    """`python -m honcho_hub backfill --json` in a real process, bounded in time and memory: a
    backfill that blocks on a file or reads one without end fails the test instead of hanging or
    filling the machine."""
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))

    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": ROOT, "HOME": os.path.dirname(chats),
           "HONCHO_OUTBOX_PATH": outbox_path, "HONCHO_API_URL": "http://127.0.0.1:9"}
    return subprocess.run(
        [sys.executable, "-m", "honcho_hub", "backfill", "--chats-dir", chats, "--json"],
        capture_output=True, text=True, timeout=60, env=env, cwd=tempfile.gettempdir(),
        preexec_fn=cap_memory)


class HostileChatFilesTest(BackfillCase):
    """A chat folder holds what anyone put there: only regular files inside the chats folder are
    read."""

    def setUp(self):
        super().setUp()
        conversation("chatgood")[0].write(self.chats)
        self.hostile = os.path.join(self.chats, "chatbad1")
        os.makedirs(self.hostile)

    def test_a_chat_file_that_is_a_fifo_is_skipped_without_waiting_for_a_writer(self):
        os.mkfifo(os.path.join(self.hostile, agent_zero_files.CHAT_FILE))
        child = backfill_child(self.chats, self.path)
        self.assertEqual(child.returncode, 0, child.stderr)
        report = json.loads(child.stdout)
        self.assertEqual(report["chats"], {"found": 2, "imported": 1, "skipped": {"not_a_file": 1}})

    def test_a_chat_file_linked_to_a_device_is_not_read(self):
        os.symlink("/dev/zero", os.path.join(self.hostile, agent_zero_files.CHAT_FILE))
        child = backfill_child(self.chats, self.path)
        self.assertEqual(child.returncode, 0, child.stderr)
        report = json.loads(child.stdout)
        self.assertEqual(report["chats"],
                         {"found": 2, "imported": 1, "skipped": {"linked_outside": 1}})

    def test_agent_zeros_settings_or_task_list_as_a_fifo_stops_the_backfill_without_waiting(self):
        os.makedirs(os.path.join(self.usr, "scheduler"))
        cases = {"settings.json": "Agent Zero's settings.json cannot be read (FileRefused)",
                 os.path.join("scheduler", "tasks.json"):
                     "the scheduler's tasks.json cannot be read (FileRefused)"}
        for name, said in cases.items():
            with self.subTest(name):
                os.mkfifo(os.path.join(self.usr, name))
                child = backfill_child(self.chats, self.path)
                self.assertEqual(child.returncode, 1, child.stderr)
                self.assertIn(said, child.stderr)
                os.unlink(os.path.join(self.usr, name))

    def test_a_chat_folder_linked_outside_the_chats_folder_is_not_imported(self):
        os.rmdir(self.hostile)
        elsewhere = os.path.join(self.usr, "elsewhere")
        conversation("chatbad1")[0].write(elsewhere)
        os.symlink(os.path.join(elsewhere, "chatbad1"), self.hostile)
        report = self.run_backfill()
        self.assertEqual(report["chats"],
                         {"found": 2, "imported": 1, "skipped": {"linked_outside": 1}})
        self.assertEqual({row[2] for row in self.rows()}, {"chat-chatgood"})

    def test_a_chat_folder_linked_to_another_inside_the_chats_folder_is_read(self):
        os.rmdir(self.hostile)
        os.symlink(os.path.join(self.chats, "chatgood"), self.hostile)
        report = self.run_backfill()
        self.assertEqual(report["chats"], {"found": 2, "imported": 2, "skipped": {}})
        self.assertEqual(report["events"], {"already_queued": len(KEPT), "queued": len(KEPT)})


class _Exploding(str):
    def strip(self, *args):
        raise RuntimeError("broken secret store value")


if __name__ == "__main__":
    unittest.main()
