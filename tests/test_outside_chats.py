"""Chats that are not the owner's (issue 24, item 8): a chat integration's sender or group, or an
external API caller, gets a peer of its own unless `sender_peers` maps it; `outside_chats` keeps the
owner's way or captures nothing; nothing the owner's chats loaded reaches a sender's chat. Through a
real Agent Zero: tests/host/host_outside_chats.py."""

import asyncio
import sys
import types
import unittest

from fake_honcho import FakeHoncho
from hub_testkit import StubAgent, StubContext, stub_agent_zero
from loopback import serve
from test_memory_tool import ToolBench
from test_recall import SESSION, RecallBench

from honcho_hub.chats.rules import (
    ChatFacts,
    HumanFacts,
    Sender,
    chat_kind,
    chat_view,
    confined_chat,
    human_peer,
    sender_peer_id,
    skip_reason_for_chat,
)
from honcho_hub.gateway.scopes import resolve_scope
from honcho_hub.names import ID_MAX, ID_RE
from honcho_hub.settings.config import build_settings
from honcho_hub.tool.actions import run_action

TELEGRAM = Sender("telegram", "12345")
GROUP = Sender("whatsapp", "120363000000000001@g.us", group=True)
EMAIL = Sender("email", "bob@example.org")


def settings(**values):
    return build_settings(values, {}, {})


def facts(sender=None, profile="agent0"):
    return HumanFacts(profile=profile, sender=sender)


class SenderPeerTest(unittest.TestCase):
    def test_a_sender_gets_a_stable_peer_of_its_own(self):
        self.assertEqual(human_peer(facts(TELEGRAM), settings()), "telegram-12345")
        self.assertEqual(sender_peer_id(Sender("api", "Ab3dE6gH")), "api-Ab3dE6gH")
        self.assertEqual(sender_peer_id(Sender("telegram", "-1001234")), "telegram--1001234")

    def test_an_id_outside_honchos_alphabet_or_too_long_gets_a_digest(self):
        for sender in (EMAIL, GROUP, Sender("email", "b" * 600 + "@example.org")):
            with self.subTest(sender.key[:40]):
                peer = sender_peer_id(sender)
                self.assertRegex(peer, ID_RE)
                self.assertLessEqual(len(peer), ID_MAX)
                self.assertTrue(peer.startswith(f"{sender.channel}-"))
                self.assertEqual(peer, sender_peer_id(Sender(sender.channel, sender.id)))
        # two addresses that read the same once fitted are still two peers
        self.assertNotEqual(sender_peer_id(Sender("email", "a.b@x.org")),
                            sender_peer_id(Sender("email", "a_b@x_org")))

    def test_sender_peers_maps_a_sender_whatever_outside_chats_says(self):
        mapped = "telegram:12345=user,email:bob@example.org=bob"
        for mode in ("own-peer", "owner", "no-capture"):
            with self.subTest(mode):
                given = settings(sender_peers=mapped, outside_chats=mode)
                self.assertEqual(human_peer(facts(TELEGRAM), given), "user")
                self.assertEqual(human_peer(facts(EMAIL), given), "bob")

    def test_outside_chats_owner_keeps_the_owners_rule_and_no_capture_names_no_one(self):
        owner = settings(outside_chats="owner", profile_peers="agent0=carol")
        self.assertEqual(human_peer(facts(TELEGRAM), owner), "carol")
        self.assertEqual(human_peer(facts(TELEGRAM, profile="x"), owner), "user")
        self.assertIsNone(human_peer(facts(TELEGRAM), settings(outside_chats="no-capture")))
        chat = ChatFacts(background=False, scheduler_run=False, human=facts(TELEGRAM))
        self.assertEqual(skip_reason_for_chat(chat, settings(outside_chats="no-capture")),
                         "unmapped_chat")
        self.assertIsNone(skip_reason_for_chat(chat, settings()))

    def test_a_group_is_never_the_owners_unless_mapped(self):
        self.assertEqual(human_peer(facts(GROUP), settings(outside_chats="owner")),
                         sender_peer_id(GROUP))
        self.assertEqual(human_peer(facts(GROUP), settings(
            sender_peers=f"{GROUP.key}=family", outside_chats="owner")), "family")

    def test_status_tells_the_kinds_of_chats_apart(self):
        def kind(sender=None, background=False, scheduler_run=False):
            return chat_kind(ChatFacts(background=background, scheduler_run=scheduler_run,
                                       human=facts(sender)))
        self.assertEqual([kind(), kind(TELEGRAM), kind(GROUP), kind(background=True),
                          kind(scheduler_run=True)],
                         ["web_ui", "telegram", "whatsapp_group", "background", "scheduler"])

    def test_a_web_ui_chat_is_the_owners_as_before(self):
        for mode in ("own-peer", "owner", "no-capture"):
            with self.subTest(mode):
                self.assertEqual(human_peer(facts(), settings(outside_chats=mode)), "user")


class SenderSessionTest(unittest.TestCase):
    """chat_view: a sender never shares the owner's session; a sender mapped to the owner does."""

    def test_under_a_shared_strategy_a_sender_gets_a_session_of_its_own(self):
        for strategy, project in (("global", None), ("per-project", "Alpha")):
            with self.subTest(strategy):
                given = settings(session_strategy=strategy)
                view = chat_view(given, facts(TELEGRAM), project, given)
                self.assertEqual((view.user_peer_id, view.session_strategy),
                                 ("telegram-12345", "per-chat"))
                mapped = settings(session_strategy=strategy, sender_peers="telegram:12345=user")
                view = chat_view(mapped, facts(TELEGRAM), project, mapped)
                self.assertEqual((view.user_peer_id, view.session_strategy), ("user", strategy))


class ConfinedChatTest(unittest.TestCase):
    """A chat from outside the web UI whose human is not the owner reads only its own peer's
    memory and its own session: no scope, no self-model of the agent, no workspace search."""

    def test_a_chat_is_confined_when_a_sender_names_someone_other_than_the_owner(self):
        cases = {
            "web ui": (facts(), settings(), False),
            "an unmapped sender": (facts(TELEGRAM), settings(), True),
            "an api chat": (facts(Sender("api", "Ab3dE6gH")), settings(), True),
            "a group under outside_chats owner": (facts(GROUP), settings(outside_chats="owner"),
                                                  True),
            "a sender mapped to another peer": (
                facts(EMAIL), settings(sender_peers="email:bob@example.org=bob"), True),
            "a sender mapped to the owner": (
                facts(TELEGRAM), settings(sender_peers="telegram:12345=user"), False),
            "a sender under outside_chats owner": (facts(TELEGRAM),
                                                   settings(outside_chats="owner"), False),
            "a sender mapped to the project's human": (
                facts(TELEGRAM), settings(human_peer_id="alice",
                                          sender_peers="telegram:12345=alice"), False),
        }
        for name, (chat_facts, given, expected) in cases.items():
            with self.subTest(name):
                self.assertIs(confined_chat(chat_facts, given), expected)

    def test_a_confined_chat_is_seen_with_no_scope_no_self_model_and_a_session_of_its_own(self):
        given = settings(scope_strategy="project", include_agent_representation=True,
                         session_strategy="global")
        view = chat_view(given, facts(TELEGRAM), "Alpha", given)
        self.assertEqual((view.user_peer_id, view.session_strategy), ("telegram-12345", "per-chat"))
        self.assertIsNone(resolve_scope(view, "Alpha"))
        self.assertFalse(view.include_agent_representation)
        mapped = settings(scope_strategy="project", include_agent_representation=True,
                          sender_peers="telegram:12345=user")
        owners = chat_view(mapped, facts(TELEGRAM), "Alpha", mapped)
        self.assertEqual(resolve_scope(owners, "Alpha"), "a0-alpha")
        self.assertTrue(owners.include_agent_representation)


class ConfinedToolTest(unittest.TestCase):
    """The memory tool in a confined chat: the workspace and any scope are refused in one line
    with no request; the chat's own peer and session are read as anywhere."""

    def setUp(self):
        self.bench = ToolBench(self, user_peer_id="telegram-12345")
        self.bench.ctx.confined = True

    def run_verb(self, action, **args):
        return run_action(action, args, self.bench.ctx)

    def test_a_workspace_search_is_refused_in_one_line_and_nothing_is_sent(self):
        for args in ({"target": "workspace"}, {"target": " Workspace ", "scope": "a0-alpha"}):
            with self.subTest(args=args):
                result = self.run_verb("search", query="kayak", **args)
                self.assertFalse(result.ok)
                self.assertIn("workspace", result.text)
                self.assertEqual(len(result.text.splitlines()), 1)
        self.assertEqual(self.bench.fake.requests, [])

    def test_a_scope_is_refused_for_recall_ask_and_search_and_nothing_is_sent(self):
        for action in ("recall", "ask", "search"):
            with self.subTest(action):
                result = self.run_verb(action, query="kayak", scope="a0-alpha")
                self.assertFalse(result.ok)
                self.assertIn("scope", result.text)
                self.assertEqual(len(result.text.splitlines()), 1)
        self.assertEqual((self.bench.fake.requests, self.bench.recalls), ([], []))

    def test_the_chats_own_peer_and_session_are_read_as_anywhere(self):
        self.bench.fake.cards[("agent-zero", "telegram-12345")] = ["Rows a red canoe"]
        self.assertIn("red canoe", self.run_verb("profile").text)
        self.assertTrue(self.run_verb("search", target="conclusions", query="canoe").ok)
        self.assertTrue(self.run_verb("search", target="session", query="canoe").ok)
        self.assertTrue(self.run_verb("ask", query="What does the user row?").ok)
        asked = self.bench.fake.chat_requests[-1]
        self.assertEqual((asked["target"], asked["session_id"]),
                         ("telegram-12345", "chat-T0000001"))
        self.assertTrue(self.run_verb("recall", query="canoe").ok)
        self.assertEqual(self.bench.recalls, [("canoe", None)])

    def test_an_ask_or_a_dream_without_the_chats_session_is_refused(self):
        # Honcho answers a question or runs a dream that names no session from every session the
        # agent is in.
        self.bench.ctx.session_id = None
        for action, args in (("ask", {"query": "What does the user row?"}), ("dream", {})):
            with self.subTest(action):
                self.assertFalse(self.run_verb(action, **args).ok)
        self.assertEqual((self.bench.fake.chat_requests, self.bench.fake.dreams), ([], []))


class ChatDataTest(unittest.TestCase):
    """What a chat's own data says of it (chats/chat_data.py), read alike off a live chat by the
    bridge and off a saved one by the backfill."""

    def test_a_chats_data_names_its_sender_and_its_remember_state(self):
        from honcho_hub.chats.chat_data import chat_remember, sender_of
        from honcho_hub.chats.rules import Remember

        data = {"email_sender": "Bob <Bob@Example.org>", "honcho_remember": "no-capture"}
        self.assertEqual(sender_of(data, "Ab3dE6gH"), Sender("email", "bob@example.org"))
        self.assertIs(chat_remember(data), Remember.NO_CAPTURE)
        self.assertIs(chat_remember({}), Remember.YES)
        self.assertIs(chat_remember(None), Remember.YES)  # no data: nothing asked


class SenderMapSettingTest(unittest.TestCase):
    def test_sender_peers_is_kept_without_spaces_and_read_as_a_map(self):
        given = settings(sender_peers=" telegram:12345 = user , whatsapp:346000=ana ")
        self.assertEqual(given.sender_peers, "telegram:12345=user,whatsapp:346000=ana")
        self.assertEqual(given.sender_peer_map, {"telegram:12345": "user",
                                                 "whatsapp:346000": "ana"})
        self.assertEqual(given.warnings, ())

    def test_an_email_key_is_read_in_lower_case_as_the_senders_address_is(self):
        given = settings(sender_peers="email:Bob@Example.org=user,telegram:AbC=ana,api:Ab3dE6gH=x")
        self.assertEqual(given.sender_peer_map, {"email:bob@example.org": "user",
                                                 "telegram:AbC": "ana", "api:Ab3dE6gH": "x"})
        self.assertEqual(human_peer(facts(EMAIL), given), "user")
        twice = settings(sender_peers="email:Bob@Example.org=user,email:bob@example.org=bob")
        self.assertEqual((twice.sender_peers, len(twice.warnings)), ("", 1))


class OwnerLoadsStayTheOwnersTest(unittest.TestCase):
    """What a chat's start warmed for the owner (the base pack, the recall of the same session)
    is keyed by the peer it was read for: a sender's chat in that session never gets it."""

    def test_a_sessions_last_load_for_the_owner_is_not_reused_for_a_sender(self):
        bench = RecallBench(self, context_cadence=3, recall_wait_ms=2_000)
        bench.remember(representation="The user paddles a kayak.", card=("Lives in Bergen",))
        owner = bench.settings
        bench.recaller.warm(owner)
        bench.recaller.prefetch(owner, SESSION, "where do I paddle?")
        self.assertIn("kayak", bench.recall("where do I paddle?").block)
        # The same chat, now known to be a sender's (the integration set its data after the
        # chat's start): the turn between context calls reuses the session's last load.
        sender = build_settings({**_values(owner), "user_peer_id": "telegram-12345"}, {}, {})
        bench.recaller.prefetch(sender, SESSION, "where do I paddle?")
        block = bench.recall("where do I paddle?", settings=sender).block
        for word in ("kayak", "Bergen"):
            self.assertNotIn(word, block)


def _values(given):
    return {"api_url": given.api_url, "outbox_path": given.outbox_path,
            "context_cadence": given.context_cadence, "recall_wait_ms": given.recall_wait_ms}


class ChatSenderFactsTest(unittest.TestCase):
    """The bridge reads the sender off what Agent Zero v1.7's integrations keep on a chat."""

    def setUp(self):
        stub = stub_agent_zero()
        self.host_stub = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        from usr.plugins.honcho.extensions.honcho_bridge import host

        self.host = host

    def sender(self, **data):
        """The sender the bridge reads off a chat with `data`, as this module's `Sender` (the
        bridge's is the plugin folder's copy of the class)."""
        context = StubContext(id="Ab3dE6gH")
        context.data = data
        found = self.host.chat_sender(context)
        return Sender(found.channel, found.id, found.group) if found is not None else None

    def test_each_integration_names_its_sender_or_group(self):
        cases = {
            "telegram private": (dict(telegram_user_id=12345, telegram_chat_id=12345),
                                 Sender("telegram", "12345")),
            "telegram group": (dict(telegram_user_id=12345, telegram_chat_id=-100777),
                               Sender("telegram", "-100777", group=True)),
            "whatsapp private": (dict(wa_chat_id="346@s.whatsapp.net", wa_sender_number="346",
                                      wa_is_group=False), Sender("whatsapp", "346")),
            "whatsapp group": (dict(wa_chat_id="1203@g.us", wa_sender_number="346",
                                    wa_is_group=True), Sender("whatsapp", "1203@g.us", True)),
            "email": (dict(email_sender="Bob Example <Bob@Example.org>"),
                      Sender("email", "bob@example.org")),
            "external api": (dict(honcho_chat_origin="api"), Sender("api", "Ab3dE6gH")),
            "web ui": (dict(honcho_chat_origin="ui"), None),
            "saved before origins": ({}, None),
        }
        for name, (data, expected) in cases.items():
            with self.subTest(name):
                self.assertEqual(self.sender(**data), expected)

    def test_the_first_request_tags_the_chat_and_none_overwrites_it(self):
        context = StubContext()
        context.data = {}
        self.host.note_chat_origin(context, "/api/api_message")
        self.host.note_chat_origin(context, "/api/message")
        self.assertEqual(context.data, {"honcho_chat_origin": "api"})
        for path in ("/api/message", "/api/message_async", "/api/message_queue_send",
                     "/api/plugins/honcho/honcho_action"):
            with self.subTest(path):
                context.data = {}
                self.host.note_chat_origin(context, path)
                self.assertEqual(context.data, {"honcho_chat_origin": "ui"})

    def test_status_counts_the_chats_seen_by_kind_and_names_this_chats_sender(self):
        chats = {"a1": {}, "a2": {}, "t1": {"telegram_user_id": 1, "telegram_chat_id": 1},
                 "g1": {"wa_chat_id": "12@g.us", "wa_is_group": True},
                 "x1": {"honcho_chat_origin": "api"}}
        for chat_id, data in chats.items():
            agent = StubAgent(0, StubContext(id=chat_id))
            agent.context.data = data
            agent.context.agent0 = agent
            self.host.chat_facts(agent)
            self.host.chat_facts(agent)  # a chat is counted once
        self.assertEqual(self.host.chats_seen(), {"web_ui": 2, "telegram": 1,
                                                  "whatsapp_group": 1, "api": 1})
        from usr.plugins.honcho.honcho_hub.ops.status import StatusParts, build_status

        status = build_status(settings(), StatusParts(chats_seen=self.host.chats_seen(),
                                                      chat_kind="telegram",
                                                      chat_sender="telegram:1"), 0.0)
        self.assertEqual(status["chats"], {"seen": {"api": 1, "telegram": 1, "web_ui": 2,
                                                    "whatsapp_group": 1},
                                           "kind": "telegram", "sender": "telegram:1",
                                           "not_remembered": {"no-capture": 0, "off": 0}})

    def test_status_counts_the_newest_1000_chats_seen_not_10000(self):
        # Each chat seen is an entry kept for the process's life (about 130 bytes): a soak opens
        # thousands of chats an hour, a user's chat list holds hundreds at most.
        for n in range(1_001):
            agent = StubAgent(0, StubContext(id=f"Seen{n:04d}"))
            agent.context.data = {}
            agent.context.agent0 = agent
            self.host.chat_facts(agent)
        self.assertEqual(self.host.chats_seen(), {"web_ui": 1_000})

    def test_opening_status_on_a_chat_does_not_count_it_as_seen(self):
        from usr.plugins.honcho.extensions.honcho_bridge import operations

        agent = StubAgent(0, StubContext(id="Tg000002"))
        agent.context.data = {"telegram_user_id": 7, "telegram_chat_id": 7}
        agent.context.agent0 = agent
        sys.modules["agent"] = types.SimpleNamespace(
            AgentContext=types.SimpleNamespace(get={"Tg000002": agent.context}.get,
                                               all=lambda: [agent.context]))
        self.addCleanup(sys.modules.pop, "agent", None)
        for _ in range(2):
            status = operations.status_document({"context": "Tg000002", "light": True})["status"]
            self.assertEqual((status["chats"]["kind"], status["chats"]["seen"]), ("telegram", {}))
        self.assertEqual(self.host.chats_seen(), {})

    def test_in_a_telegram_chat_a_workspace_search_finds_none_of_the_owners_words(self):
        fake = FakeHoncho(api_key="hch-outside-key-13579")
        fake.messages.append({"id": "m1", "content": "My kayak is moored at Bergen",
                              "peer_id": "user", "session_id": "chat-OwnerChat",
                              "workspace_id": "agent-zero", "metadata": {},
                              "created_at": "2026-01-01T00:00:00Z", "token_count": 6})
        server = serve(fake)
        self.addCleanup(server.close)
        from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

        self.host_stub.config.update(api_url=server.url)
        self.host_stub.secrets = {"HONCHO_API_KEY": "hch-outside-key-13579"}
        agent = StubAgent(0, StubContext(id="Tg000001", project="Alpha"))
        agent.context.data = {"telegram_user_id": 12345, "telegram_chat_id": 12345}
        agent.context.agent0 = agent
        answer = asyncio.run(run_tool(agent, {"action": "search", "target": "workspace",
                                              "query": "kayak"}))
        self.assertNotIn("kayak", answer)
        self.assertEqual(len(answer.splitlines()), 1)
        self.assertEqual([path for _, path in fake.requests if path.endswith("/search")], [])

    def test_a_chat_of_a_sender_is_seen_through_its_peer(self):
        agent = StubAgent(0, StubContext(id="Ab3dE6gH"))
        agent.context.data = {"telegram_user_id": 12345, "telegram_chat_id": 12345}
        agent.context.agent0 = agent
        self.assertEqual(self.host.settings_for(agent).user_peer_id, "telegram-12345")
        self.assertEqual(self.host.chat_human(agent), "telegram-12345")


if __name__ == "__main__":
    unittest.main()
