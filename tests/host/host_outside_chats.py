"""Chats that are not the owner's, in a real Agent Zero v1.7 against a real Honcho (issue 24, 8).

The owner's memory is the agent's card of `user`, set in the real Honcho first, so a turn recalled
under `user` holds it. Chats come in through Agent Zero's bundled integrations' own code and its
external API: a Telegram chat (private and group), a WhatsApp chat (private, and a group two members
write in), an e-mail and an `api_message` call. None of them is captured under `user` (the real
Honcho's session messages and peers) or receives the card; a group is one peer, whoever wrote. A
Telegram sender mapped to the owner (`sender_peers: telegram:<id>=user`) is the owner, and a web-UI
chat still is: both are captured under `user` and recall the card. The memory tool run in the
Telegram chat finds none of the owner's words: a workspace search is refused, and the chat's own
reads (its session, the card, recall) hold only the sender's memory.

What the test bypasses, because it needs the network: the integrations' poll loops (Telegram's bot,
the WhatsApp bridge's poll, IMAP), whose handlers it calls directly, and the function each
integration sends its replies with (`send_telegram_reply`, `send_wa_reply`, `send_email_reply`),
replaced in this process by one that records the reply as sent; the integrations' own
`process_chain_end` extensions still find the answer and call it. Telegram's `handle_message` needs
a live aiogram bot: the test calls its context creation (`_get_or_create_context_from_user`) and
then sends the message as `handle_message` does (its prompt, `log_user_message`, `communicate`).
aiogram is not installed here: it is made importable with the harness's stub finder (calling any of
it raises), and the code run never calls it.
"""

from __future__ import annotations

import asyncio
import unittest
import uuid

import host_kit

PLUGIN = "honcho"
CARD_FACT = "Paddles a green kayak around Bergen every Sunday"
CARD_WORDS = ("kayak", "Bergen")  # found nowhere else in a prompt
REPLY = "Noted."
TG_SENDER, TG_MAPPED, TG_MEMBER, TG_GROUP = 4242001, 4242003, 4242002, -1001234567
WA_SENDER, WA_MEMBER_A, WA_MEMBER_B = "34600000001", "34600000002", "34600000003"
WA_GROUP = "120363000000000001@g.us"
EMAIL_SENDER = "Bob Example <bob@example.org>"
OWNER_WORDS = "my locker code is heron"  # typed only in the owner's web-UI chat
TURN_S = 60

world: host_kit.HostWorld
sent: list[tuple[str, str]] = []  # (chat id, reply) the integrations sent


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    honcho = world.honcho()
    honcho.peer("user")  # get-or-create, as the first delivery would
    honcho.peer("agent-zero").set_card([CARD_FACT], target="user")
    world.host.save_config(PLUGIN, {"recall_timeout_s": 15,
                                    "sender_peers": f"telegram:{TG_MAPPED}=user"})
    host_kit.integration_handlers(sent)


def finished(ctx, replies: int = 1):
    """Wait for the chat's running turn and for its integration to have sent `replies` replies in
    all; its context."""
    ctx.task.result_sync(TURN_S)
    host_kit.wait_for(lambda: sent.count((ctx.id, REPLY)) >= replies, 30,
                      "the integration's reply")
    return ctx


def telegram_chat(user_id: int, chat_id: int, text: str):
    """A Telegram message as `handle_message` sends it, into the context the integration made."""
    from agent import UserMessage
    from helpers import message_queue as mq
    from plugins._telegram_integration.helpers import handler

    world.host.script(REPLY)
    bot_cfg = {"name": "testbot"}
    ctx = asyncio.run(handler._get_or_create_context_from_user(
        "testbot", bot_cfg, user_id, f"user{user_id}", chat_id))
    user_msg = ctx.agent0.read_prompt("fw.telegram.user_message.md",
                                      sender=f"Tester (@user{user_id})", body=text)
    msg_id = str(uuid.uuid4())
    mq.log_user_message(ctx, user_msg, [], message_id=msg_id, source=" (telegram)")
    ctx.communicate(UserMessage(message=user_msg, attachments=[], id=msg_id))
    return finished(ctx)


def whatsapp_message(sender: str, chat_id: str, text: str, group: bool) -> dict:
    return {"chatId": chat_id, "senderNumber": sender, "senderName": f"Member {sender[-2:]}",
            "isGroup": group, "chatName": "Kayak club" if group else "", "body": text,
            "messageId": uuid.uuid4().hex}


def whatsapp_chat(messages: list[dict]):
    """The WhatsApp handler's own new chat for the first message, then its routing of the others
    into the chat it found by JID (`_dispatch_message` does the same after the bridge's poll)."""
    from agent import AgentContext
    from plugins._whatsapp_integration.helpers import handler

    world.host.script(*[REPLY] * len(messages))
    asyncio.run(handler._start_new_chat({"project": ""}, messages[0]))
    ctx = AgentContext.get(handler._find_chats_by_jid(messages[0]["chatId"])[0])
    finished(ctx)
    for replies, message in enumerate(messages[1:], start=2):
        asyncio.run(handler._route_to_chat(message, ctx.id))
        finished(ctx, replies)
    return ctx


def email_chat(text: str):
    """An e-mail through the e-mail handler's dispatch (its dispatcher asks the utility model,
    which answers nothing here: a new chat)."""
    from agent import AgentContext
    from plugins._email_integration.helpers import handler
    from plugins._email_integration.helpers.imap_client import InboundMessage

    world.host.script(REPLY)
    message = InboundMessage(sender=EMAIL_SENDER, subject="Weekend plans", body=text,
                             message_id=f"<{uuid.uuid4().hex}@example.org>")
    asyncio.run(handler._dispatch_all({"name": "testbox", "username": "agent@example.org"},
                                      [message]))
    found = handler._find_handler_chats("testbox", EMAIL_SENDER)
    return finished(AgentContext.get(found[0]["context_id"]))


def api_chat(text: str):
    """A message to Agent Zero's external API (`api_message`, with its API key)."""
    from agent import AgentContext
    from helpers.settings import get_settings

    world.host.script(REPLY)
    response = world.host.api("api_message", {"message": text,
                                              "api_key": get_settings()["mcp_server_token"]},
                              csrf=False)
    body = response.get_json(silent=True) or {}
    if response.status_code != 200 or body.get("response") != REPLY:
        raise AssertionError(f"api_message: {response.status_code} "
                             f"{response.get_data(as_text=True)[:300]}")
    return AgentContext.get(body["context_id"])


def ui_chat(text: str):
    """A new chat and its first message as the web UI makes them (`chat_create`, then
    `message`)."""
    from agent import AgentContext

    created = world.host.api("chat_create", {}).get_json(silent=True) or {}
    world.host.script(REPLY)
    response = world.host.api("message", {"text": text, "context": created.get("ctxid", "-")})
    body = response.get_json(silent=True) or {}
    if response.status_code != 200 or body.get("message") != REPLY:
        raise AssertionError(f"message: {response.status_code} "
                             f"{response.get_data(as_text=True)[:300]}")
    return AgentContext.get(body["context"])


class OutsideChatsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.telegram = telegram_chat(TG_SENDER, TG_SENDER, "Where do I paddle on Sundays?")
        cls.telegram_group = telegram_chat(TG_MEMBER, TG_GROUP, "Where do we paddle on Sundays?")
        cls.mapped = telegram_chat(TG_MAPPED, TG_MAPPED, "Where do I paddle on Sundays? (me)")
        cls.whatsapp = whatsapp_chat([whatsapp_message(WA_SENDER, f"{WA_SENDER}@s.whatsapp.net",
                                                       "Where do I paddle on Sundays?", False)])
        cls.whatsapp_group = whatsapp_chat([
            whatsapp_message(WA_MEMBER_A, WA_GROUP, "Where does the club paddle?", True),
            whatsapp_message(WA_MEMBER_B, WA_GROUP, "And on Sundays?", True)])
        cls.email = email_chat("Where do I paddle on Sundays?")
        cls.api = api_chat("Where do I paddle on Sundays? (api)")
        cls.ui = ui_chat(f"Where do I paddle on Sundays? (ui) By the way, {OWNER_WORDS}.")
        cls.outsiders = {"telegram": cls.telegram, "telegram group": cls.telegram_group,
                         "whatsapp": cls.whatsapp, "whatsapp group": cls.whatsapp_group,
                         "email": cls.email, "api": cls.api}
        expected = {cls.whatsapp_group.id: 4}
        for ctx in (*cls.outsiders.values(), cls.mapped, cls.ui):
            host_kit.wait_for(
                lambda ctx=ctx: host_kit.delivered(world, f"chat-{ctx.id}",
                                                   expected.get(ctx.id, 2)),
                60, "a chat's messages in the real Honcho")

    def peers_of(self, ctx) -> list[str]:
        """The peer of each message the real Honcho holds for the chat, oldest first."""
        return [m.peer_id for m in world.session_messages(f"chat-{ctx.id}")]

    def session_peers(self, ctx) -> set[str]:
        return {peer.id for peer in world.honcho().session(f"chat-{ctx.id}").peers()}

    def owner_memory_in_prompts(self, ctx) -> list[str]:
        """The words of the owner's card found in what the model got in this chat."""
        prompts = world.host.prompts(ctx)
        self.assertTrue(prompts, "the chat's turn made no model call")
        return [word for word in CARD_WORDS if any(word in prompt for prompt in prompts)]

    def test_no_outside_chat_is_captured_under_the_owner(self) -> None:
        for kind, ctx in self.outsiders.items():
            with self.subTest(kind):
                peers = self.peers_of(ctx)
                self.assertNotIn("user", peers)
                self.assertEqual(peers.count("agent-zero"), len(peers) // 2)
                self.assertNotIn("user", self.session_peers(ctx))

    def test_no_outside_chat_receives_the_owners_memory(self) -> None:
        for kind, ctx in self.outsiders.items():
            with self.subTest(kind):
                self.assertEqual(self.owner_memory_in_prompts(ctx), [])

    def test_each_sender_and_each_group_is_a_peer_of_its_own(self) -> None:
        humans = {kind: {p for p in self.peers_of(ctx) if p != "agent-zero"}
                  for kind, ctx in self.outsiders.items()}
        for kind, peers in humans.items():
            with self.subTest(kind):
                self.assertEqual(len(peers), 1)
        self.assertEqual(len(set().union(*humans.values())), len(humans))
        self.assertEqual(self.session_peers(self.whatsapp_group),
                         {*humans["whatsapp group"], "agent-zero"})
        for member in (WA_MEMBER_A, WA_MEMBER_B, str(TG_MEMBER)):
            self.assertFalse(any(member in p for p in humans["whatsapp group"]
                                 | humans["telegram group"]))

    def test_a_sender_mapped_to_the_owner_is_the_owner(self) -> None:
        self.assertEqual(self.peers_of(self.mapped), ["user", "agent-zero"])
        self.assertEqual(self.owner_memory_in_prompts(self.mapped), list(CARD_WORDS))

    def test_a_web_ui_chat_is_the_owners(self) -> None:
        self.assertEqual(self.peers_of(self.ui), ["user", "agent-zero"])
        self.assertEqual(self.owner_memory_in_prompts(self.ui), list(CARD_WORDS))

    def test_status_shows_a_chats_kind_and_sender_key_and_counts_the_kinds_seen(self) -> None:
        chats = host_kit.honcho_status(world.host, self.telegram_group)["chats"]
        self.assertEqual((chats["kind"], chats["sender"]),
                         ("telegram_group", f"telegram:{TG_GROUP}"))
        self.assertEqual({kind: chats["seen"].get(kind) for kind in (
            "telegram", "telegram_group", "whatsapp", "whatsapp_group", "email", "api")},
            {"telegram": 2, "telegram_group": 1, "whatsapp": 1, "whatsapp_group": 1, "email": 1,
             "api": 1})
        self.assertGreaterEqual(chats["seen"].get("web_ui", 0), 1)

    def tool(self, ctx, **args) -> str:
        """The honcho_memory result as Agent Zero added it to the chat's history."""
        final, result = world.host.run_tool(ctx, "honcho_memory", **args)
        self.assertIsNone(final)
        self.assertIsInstance(result, str)
        return result

    def test_the_tool_in_a_telegram_chat_cannot_find_the_owners_words(self) -> None:
        # In the owner's own chat the search finds them: the refusal below is not an empty search.
        self.assertIn(OWNER_WORDS, self.tool(self.ui, action="search", target="workspace",
                                             query=OWNER_WORDS).lower())
        refused = self.tool(self.telegram, action="search", target="workspace",
                            query=OWNER_WORDS)
        self.assertNotIn(OWNER_WORDS, refused.lower())
        self.assertIn("workspace", refused)
        self.assertEqual(len(refused.splitlines()), 1)
        own_reads = {"session search": dict(action="search", target="session", query=OWNER_WORDS),
                     "profile": dict(action="profile"),
                     "recall": dict(action="recall", query="Where do I paddle on Sundays?")}
        for name, args in own_reads.items():
            with self.subTest(name):
                text = self.tool(self.telegram, **args).lower()
                self.assertNotIn(OWNER_WORDS, text)
                for word in CARD_WORDS:
                    self.assertNotIn(word.lower(), text)

    def test_requests_tag_their_chats_origin(self) -> None:
        self.assertEqual(self.api.data.get("honcho_chat_origin"), "api")
        self.assertEqual(self.ui.data.get("honcho_chat_origin"), "ui")
        self.assertNotIn("honcho_chat_origin", self.telegram.data)


if __name__ == "__main__":
    unittest.main()
