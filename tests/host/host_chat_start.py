"""When a chat starts, in a real Agent Zero v1.7 against a real Honcho (issue 24's review).

A chat integration writes its sender on a new chat after `AgentContext(...)` returns, so at
`agent_init` the chat looks like the owner's. With `scope_strategy: custom`, a Telegram chat, made
by the bundled integration's own code, must not be registered in the owner's scope or get a session
under the owner's peer: it starts at its first message, as the sender's (a confined chat is in no
scope). A web-UI chat, the control, still joins the scope. As in host_outside_chats.py, the test
calls Telegram's context creation (`_get_or_create_context_from_user`) and sends the message as
`handle_message` does; aiogram is made importable with the harness's stub finder and never called.
"""

from __future__ import annotations

import asyncio
import unittest
import uuid

import host_kit

PLUGIN = "honcho"
SCOPE = "a0-household"
REPLY = "Noted."
TG_SENDER = 4242101
TURN_S = 60

world: host_kit.HostWorld
sent: list[tuple[str, str]] = []  # (chat id, reply) the integration sent


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    world.host.save_config(PLUGIN, {"scope_strategy": "custom", "scope_custom": "household"})
    host_kit.integration_handlers(sent)


def scope_sessions() -> set[str]:
    return {session.id for session in world.honcho().scope(SCOPE).sessions()}


def peers(ctx) -> set[str]:
    return {peer.id for peer in world.honcho().session(f"chat-{ctx.id}").peers()}


class ChatStartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        from agent import UserMessage
        from helpers import message_queue as mq
        from plugins._telegram_integration.helpers import handler

        world.host.script(REPLY)
        cls.telegram = asyncio.run(handler._get_or_create_context_from_user(
            "testbot", {"name": "testbot"}, TG_SENDER, f"user{TG_SENDER}", TG_SENDER))
        text = cls.telegram.agent0.read_prompt(
            "fw.telegram.user_message.md", sender=f"Tester (@user{TG_SENDER})",
            body="Do you ship to Lyon?")
        msg_id = str(uuid.uuid4())
        mq.log_user_message(cls.telegram, text, [], message_id=msg_id, source=" (telegram)")
        cls.telegram.communicate(UserMessage(message=text, attachments=[], id=msg_id))
        cls.telegram.task.result_sync(TURN_S)
        host_kit.wait_for(lambda: (cls.telegram.id, REPLY) in sent, 30, "the integration's reply")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{cls.telegram.id}", 2), 30,
                          "the Telegram chat's messages in the real Honcho")
        # The control, after it: the registrar takes its queue in order, so once the web-UI chat
        # is in the scope, a registration the Telegram chat queued is done too.
        world.host.script(REPLY)
        cls.web = world.host.new_chat()
        world.host.turn(cls.web, "I keep bees on the roof.")
        host_kit.wait_for(lambda: f"chat-{cls.web.id}" in scope_sessions(), 30,
                          "the web-UI chat in its scope")

    def test_a_web_ui_chat_joins_the_custom_scope_under_the_owner(self) -> None:
        self.assertIn("user", peers(self.web))

    def test_a_telegram_chat_is_not_put_in_the_owners_scope(self) -> None:
        self.assertNotIn(f"chat-{self.telegram.id}", scope_sessions())

    def test_a_telegram_chats_session_has_its_sender_and_not_the_owner(self) -> None:
        self.assertEqual(peers(self.telegram) - {"agent-zero"}, {f"telegram-{TG_SENDER}"})


if __name__ == "__main__":
    unittest.main()
