"""What a chat's start warms, prewarms and registers, and when: a chat a person just opened is
registered at its first message (`AgentContext.communicate`), once a chat integration has written
whose chat it is; a chat loaded from disk at its agent's start (issue 24's review)."""

import os
import unittest
from datetime import UTC, datetime, timedelta

from fake_honcho import FakeHoncho
from hub_testkit import StubAgent, StubContext, import_by_path, stub_agent_zero
from idle import wait_idle
from loopback import serve

INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
SENT_EXT = ("extensions/python/_functions/agent/AgentContext/communicate/start/"
            "_40_honcho_sent_to_chat.py")
CHAT_START_EXT = ("extensions/python/_functions/agent/AgentContext/communicate/start/"
                  "_60_honcho_chat_start.py")
KEY = "hch-chat-start-key-24680"


class UserMessage:
    """Agent Zero's UserMessage dataclass shape."""

    def __init__(self, message):
        self.message, self.attachments, self.system_message, self.id = message, [], [], ""


class ChatStartTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.fake.dialectic_answer = "Prewarmed note."
        server = serve(self.fake)
        self.addCleanup(server.close)
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        from usr.plugins.honcho.honcho_hub import hub

        self.addCleanup(hub.shutdown)
        self.host.config.update(api_url=server.url, dialectic_enabled=True,
                                scope_strategy="custom", scope_custom="household")
        self.host.secrets = {"HONCHO_API_KEY": KEY}

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def opened(self, id, age_s=1.0):
        """A chat's AgentContext as Agent Zero makes it: its agent 0 starts (agent_init) before
        the constructor returns, with the chat's data still empty."""
        context = StubContext(id=id, created_at=datetime.now(UTC) - timedelta(seconds=age_s))
        context.data, context.agent0 = {}, None
        agent = StubAgent(0, context)
        self.load(INIT_EXT)(agent=agent).execute()
        context.agent0 = agent  # set once its agent 0 is built
        return context

    def communicated(self, context, text):
        """AgentContext.communicate(message)'s start extensions, each as Agent Zero loads it."""
        data = {"args": (context, UserMessage(text)), "kwargs": {}}
        for rel in (SENT_EXT, CHAT_START_EXT):
            self.load(rel)(agent=None).execute(data=data)

    def settled(self, stop_registrar=False):
        """The requests the chat start began, once its threads are done (the registrar's too
        when `stop_registrar`: it finishes its queue and ends)."""
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.honcho_hub import runtime

        self.assertTrue(runtime.join_background(10))
        self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
        if stop_registrar and hub().registrar() is not None:
            self.assertTrue(hub().registrar().stop(30))
        return list(self.fake.requests)

    def session(self, context):
        """The chat's Honcho session as the fake holds it (its peers), None before it exists."""
        return self.fake.sessions.get(("agent-zero", f"chat-{context.id}"))

    def scopes(self, context):
        """The scopes the chat's session was put in."""
        return {scope for (_, scope), members in self.fake.scopes.items()
                if f"chat-{context.id}" in members}

    def test_a_telegram_chat_is_started_at_its_first_message_under_its_senders_peer(self):
        context = self.opened("TgChat01")
        self.settled(stop_registrar=False)
        self.assertIsNone(self.session(context))  # whose chat it is is not known yet
        self.assertEqual(self.fake.chat_requests, [])
        # What the Telegram integration does once AgentContext(...) returned, then communicate.
        context.data.update(telegram_user_id=12345, telegram_chat_id=12345)
        self.communicated(context, "Hi, do you ship to Lyon?")
        self.settled(stop_registrar=True)
        session = self.session(context)
        self.assertIn("telegram-12345", session["peers"])
        self.assertNotIn("user", session["peers"])
        self.assertEqual(self.scopes(context), set())  # a confined chat is in no scope
        self.assertEqual([request.get("target") for request in self.fake.chat_requests],
                         ["telegram-12345"])

    def test_a_web_ui_chat_gets_its_prewarm_and_registration_at_its_first_message(self):
        context = self.opened("WebChat1")
        self.settled()
        self.assertIsNone(self.session(context))
        self.communicated(context, "What did I plan for the garden?")
        self.communicated(context, "And for the roof?")  # started once
        self.settled(stop_registrar=True)
        session = self.session(context)
        self.assertIn("user", session["peers"])
        self.assertEqual(self.scopes(context), {"a0-household"})
        self.assertEqual([request.get("target") for request in self.fake.chat_requests], ["user"])

    def test_a_chat_reset_just_after_it_was_opened_is_started_when_its_new_agent_starts(self):
        context = self.opened("ResetCh1")
        self.settled()
        self.assertEqual(self.scopes(context), set())
        # AgentContext.reset: a new agent 0, built while the old one is still the chat's
        self.load(INIT_EXT)(agent=StubAgent(0, context)).execute()
        self.settled(stop_registrar=True)
        self.assertEqual(self.scopes(context), {"a0-household"})

    def test_a_chat_loaded_from_disk_is_started_when_its_agent_starts(self):
        context = self.opened("OldChat1", age_s=3 * 86400.0)
        self.settled(stop_registrar=True)
        self.assertEqual(self.scopes(context), {"a0-household"})


if __name__ == "__main__":
    unittest.main()
