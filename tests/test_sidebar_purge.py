"""The sidebar's Purge (api/honcho_purge.py): what it would remove told in counts, the plugin
halted in this process before the files go, capture paused after (nothing re-creates them), a
refusal while messages wait unless forced, and Resume."""

from __future__ import annotations

import asyncio
import json
import os
import unittest

from api_world import api_handler, api_world
from hub_testkit import (
    StubAgent,
    StubContext,
    StubHistoryMessage,
    hub_threads,
    import_by_path,
    release_restart,
)
from outbox_helpers import enqueue, event, stub_host_events

KEY = "hch-purge-key-2468024680"
USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
JOB_LOOP_EXT = "extensions/python/job_loop/_50_honcho_worker.py"
SECRET_TEXT = "my boat is called Sea Otter"


class UserMessage:
    """Agent Zero's UserMessage dataclass shape."""

    def __init__(self, message: str) -> None:
        self.message, self.attachments, self.system_message, self.id = message, [], [], ""


class SidebarPurgeCase(unittest.TestCase):
    def setUp(self) -> None:
        self.fake, self.server, self.host = api_world(self, KEY)
        self.handler = api_handler(self.host, "honcho_purge")
        from usr.plugins.honcho.honcho_hub import hub
        self.addCleanup(release_restart)
        self.addCleanup(hub.shutdown)
        self.outbox = self.host.config["outbox_path"]
        self.folder = os.path.dirname(self.outbox)
        self.turns = 0

    def call(self, body: object) -> dict:
        return asyncio.run(self.handler().process(body, None))

    def ext(self, rel: str):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def typed(self, text: str) -> None:
        """The human types `text` in the web UI's chat (the capture hook, as Agent Zero runs it)."""
        self.turns += 1
        agent = StubAgent(0)
        data = {"args": (agent, UserMessage(text)), "kwargs": {},
                "result": StubHistoryMessage(False, f"h-{self.turns}"), "exception": None}
        self.ext(USER_EXT)(agent=agent).execute(data=data)

    def captured_and_delivered(self) -> None:
        """A message typed, queued, delivered: the outbox, its journal folder and the marker."""
        self.typed(SECRET_TEXT)
        stub_host_events(self, self.host)
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import global_settings, hub
        from usr.plugins.honcho.honcho_hub.storage.marker import move_marker

        hub().start_worker_now().drain(10)
        move_marker(global_settings())

    def own_journal(self) -> str:
        from usr.plugins.honcho.honcho_hub.capture import kept
        from usr.plugins.honcho.honcho_hub.runtime import process_state

        journal = kept.JOURNAL.of(process_state())
        return journal.path if journal is not None else ""

    def ours_on_disk(self) -> set[str]:
        return set(os.listdir(self.folder)) if os.path.isdir(self.folder) else set()

    def queue_undeliverable(self, n: int) -> None:
        """Rows for a destination no worker of this host sends to: they stay pending."""
        from usr.plugins.honcho.honcho_hub.storage.outbox import Outbox

        box = Outbox(self.outbox)
        enqueue(box, [event(i, session="chat-elsewhere", dest="http://127.0.0.1:9#x")
                      for i in range(n)])
        box.close()


class SurveyTest(SidebarPurgeCase):
    def test_the_survey_counts_what_would_go_and_names_no_path_nor_text(self) -> None:
        self.captured_and_delivered()
        answer = self.call({"action": "survey"})
        self.assertTrue(answer["ok"], answer)
        survey = answer["survey"]
        self.assertEqual((survey["outbox"], survey["delivered"], survey["pending"],
                          survey["sending"], survey["dead"], survey["marker"]),
                         (True, 1, 0, 0, 0, True))
        self.assertGreaterEqual(survey["journal_files"], 1)
        self.assertEqual(survey["live_processes"], 0)  # this process's own journal is not another's
        self.assertIsNone(survey["reason"])
        self.assertFalse(answer["purged"])
        shown = json.dumps(answer)
        for secret in (self.outbox, self.folder, SECRET_TEXT, KEY):
            self.assertNotIn(secret, shown)
        self.assertTrue(os.path.exists(self.outbox))  # a survey removes nothing

    def test_an_unknown_action_or_body_gets_a_structured_error(self) -> None:
        for body in ({"action": "explode"}, {}, None, "purge"):
            with self.subTest(body=repr(body)):
                self.assertFalse(self.call(body)["ok"])


class PurgeFromTheSidebarTest(SidebarPurgeCase):
    def test_without_confirmed_nothing_is_removed(self) -> None:
        self.captured_and_delivered()
        answer = self.call({"action": "purge"})
        self.assertFalse(answer["ok"])
        self.assertIn("confirm", answer["error"])
        self.assertTrue(os.path.exists(self.outbox))

    def test_a_confirmed_purge_halts_the_plugin_and_removes_outbox_journal_and_marker(self) -> None:
        self.captured_and_delivered()
        journal = self.own_journal()
        self.assertTrue(journal and os.path.exists(journal))
        answer = self.call({"action": "purge", "confirmed": True})
        self.assertTrue(answer["ok"], answer)
        self.assertEqual(answer["result"]["state"], "purged")
        self.assertEqual(self.ours_on_disk(), set())
        self.assertFalse(os.path.exists(journal))
        self.assertEqual(hub_threads(), [])
        self.assertGreaterEqual(answer["result"]["removed"], 3)  # a count: the paths stay here
        shown = json.dumps(answer)
        self.assertNotIn(self.folder, shown)
        self.assertIn("uninstall", answer["text"])
        self.assertIn("resume", answer["text"].lower())

    def test_after_a_purge_a_turn_and_the_job_loop_re_create_nothing(self) -> None:
        self.captured_and_delivered()
        journal_folder = os.path.dirname(self.own_journal())
        self.call({"action": "purge", "confirmed": True})
        journals_before = set(os.listdir(journal_folder)) if os.path.isdir(journal_folder) \
            else set()
        self.typed("a message typed after the purge")
        self.ext(JOB_LOOP_EXT)(agent=None).execute()
        from usr.plugins.honcho.extensions.honcho_bridge.operations import status_document
        status = status_document({"light": True})["status"]
        self.assertEqual(self.ours_on_disk(), set())
        after = set(os.listdir(journal_folder)) if os.path.isdir(journal_folder) else set()
        self.assertEqual(after, journals_before)  # no journal opened in the state folder either
        self.assertEqual(hub_threads(), [])
        self.assertEqual(self.own_journal(), "")
        self.assertTrue(status["capture"]["purged"])
        self.assertEqual(status["health_reasons"][0],
                         "purged: uninstall the plugin now, or resume memory")

    def test_after_a_purge_the_tools_forget_chat_re_creates_nothing(self) -> None:
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        self.captured_and_delivered()
        self.call({"action": "purge", "confirmed": True})
        agent = StubAgent(0, StubContext(id="chat-after-purge"))
        answer = asyncio.run(run_tool(agent, {"action": "forget_chat", "confirm": True}))
        self.assertEqual(self.ours_on_disk(), set())
        self.assertIn("purged", answer)

    def test_pending_rows_refuse_the_purge_until_forced_and_the_refusal_says_so(self) -> None:
        self.captured_and_delivered()
        self.queue_undeliverable(2)
        answer = self.call({"action": "purge", "confirmed": True})
        self.assertFalse(answer["ok"])
        self.assertEqual(answer["result"]["state"], "refused")
        self.assertEqual(answer["result"]["pending"], 2)
        self.assertIn("2 pending", answer["text"])
        self.assertTrue(os.path.exists(self.outbox))
        # refused: nothing was halted, memory goes on
        self.assertFalse(self.call({"action": "survey"})["purged"])
        self.typed("still remembered after a refused purge")
        self.assertIn("still remembered after a refused purge",
                      [row[3] for row in stub_host_events(self, self.host)])
        answer = self.call({"action": "purge", "confirmed": True, "force": True})
        self.assertTrue(answer["ok"], answer)
        self.assertEqual(self.ours_on_disk(), set())

    def test_after_a_purge_a_remember_for_a_while_does_not_claim_it_will_expire(self) -> None:
        # Its lifetime lives only in the outbox file, which a purge removed and keeps away.
        self.captured_and_delivered()
        self.call({"action": "purge", "confirmed": True})
        inspector = api_handler(self.host, "honcho_inspector")
        answer = asyncio.run(inspector().process(
            {"action": "remember", "text": "The user is in Oslo this week.", "expires_in": "1m"},
            None))
        self.assertTrue(answer["ok"], answer)
        self.assertNotIn("It expires in", answer["message"])
        self.assertIn("it will not expire", answer["message"])
        self.assertEqual(self.ours_on_disk(), set())

    def test_resume_brings_memory_back_in_this_process(self) -> None:
        self.captured_and_delivered()
        self.call({"action": "purge", "confirmed": True})
        answer = self.call({"action": "resume"})
        self.assertTrue(answer["ok"], answer)
        self.assertFalse(self.call({"action": "survey"})["purged"])
        self.typed("remembered again")
        self.assertEqual([row[3] for row in stub_host_events(self, self.host)],
                         ["remembered again"])

    def test_the_handler_requires_auth_and_csrf(self) -> None:
        self.assertTrue(self.handler.requires_auth() and self.handler.requires_csrf())


if __name__ == "__main__":
    unittest.main()
