"""Several humans on one Agent Zero (issue 16): a chat's human peer named by its project's
`human_peer_id`, else its agent profile's entry in `profile_peers`, else `user_peer_id`
(`unmapped_chats: default-peer`) or no one (`no-capture`: nothing of the chat is captured or
recalled).

The rule is tested on plain facts; the adapters, loaded as Agent Zero loads them, against the fake
Honcho over loopback: where each human's messages land, and what each chat's recall reads.
"""

import asyncio
import json
import os
import sys
import types
import unittest

from fake_honcho import FakeHoncho
from hub_testkit import (
    StubAgent,
    StubContext,
    StubHistoryMessage,
    import_by_path,
    stub_agent_zero,
)
from idle import wait_idle
from loopback import serve
from outbox_helpers import stub_host_events

from honcho_hub.capture.rules import (
    UserMessageFacts,
    skip_reason_for_tool_result,
    skip_reason_for_user_message,
)
from honcho_hub.chats.rules import ChatFacts, HumanFacts, human_peer
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.spec import OBSERVATION_PRESETS

KEY = "hch-several-humans-key-24680"
USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
RESPONSE_EXT = "extensions/python/tool_execute_after/_50_honcho_capture_response.py"
RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
INIT_EXT = "extensions/python/agent_init/_50_honcho_worker.py"
ALICE_FACT, BOB_FACT, DEFAULT_FACT = ("Keeps three beehives.", "Restores old clocks.",
                                      "Sails on weekends.")


def settings(**values):
    return build_settings(values, {}, {})


class HumanPeerRuleTest(unittest.TestCase):
    """human_peer on plain facts: the first source that names a human wins."""

    def test_the_project_then_the_profile_then_the_unmapped_policy(self):
        cases = {
            # name: (settings, agent profile, expected peer)
            "project names the human": (dict(human_peer_id="alice"), "agent0", "alice"),
            "project wins over the profile":
                (dict(human_peer_id="alice", profile_peers="agent0=carol"), "agent0", "alice"),
            "profile names the human":
                (dict(profile_peers="research=carol,coder=dave"), "coder", "dave"),
            "unmapped, default-peer":
                (dict(profile_peers="research=carol", user_peer_id="pat"), "agent0", "pat"),
            "unmapped, no-capture":
                (dict(profile_peers="research=carol", unmapped_chats="no-capture"), "agent0", None),
            "no profile, no-capture":
                (dict(profile_peers="research=carol", unmapped_chats="no-capture"), "", None),
            "no mapping anywhere, default-peer": (dict(user_peer_id="pat"), "agent0", "pat"),
            # Fail closed: no-capture asks that only mapped chats be captured, so with no mapping at
            # all none is.
            "no mapping anywhere, no-capture": (dict(unmapped_chats="no-capture"), "agent0", None),
        }
        for name, (values, profile, expected) in cases.items():
            with self.subTest(case=name):
                self.assertEqual(human_peer(HumanFacts(profile=profile), settings(**values)),
                                 expected)

    def test_an_unmapped_chat_under_no_capture_is_skipped_with_its_own_reason(self):
        no_capture = settings(profile_peers="research=carol", unmapped_chats="no-capture")
        unmapped = ChatFacts(background=False, scheduler_run=False,
                             human=HumanFacts(profile="agent0"))
        mapped = ChatFacts(background=False, scheduler_run=False,
                           human=HumanFacts(profile="research"))
        for chat, expected in ((unmapped, "unmapped_chat"), (mapped, None)):
            with self.subTest(profile=chat.human.profile):
                typed = UserMessageFacts(agent_number=0, intervention=False, is_nudge=False,
                                         chat=chat)
                self.assertEqual(skip_reason_for_user_message(typed, no_capture), expected)
                self.assertEqual(skip_reason_for_tool_result(0, "response", chat, no_capture),
                                 expected)


class SeveralHumansAdapterTest(unittest.TestCase):
    """Two projects, each naming its human; chats told apart by agent profile; the unmapped
    policy."""

    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        for target, fact in (("alice", ALICE_FACT), ("bob", BOB_FACT), ("user", DEFAULT_FACT),
                             ("carol", "Carol's fact."), ("dave", "Dave's fact.")):
            self.fake.representations[("agent-zero", target)] = fact
        self.server = serve(self.fake)
        self.addCleanup(self.server.close)
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        # Scopes off: recall reads the agent's global view of the target, the case no scope keeps
        # apart.
        self.host.config.update(api_url=self.server.url, recall_timeout_s=10, scope_strategy="off")
        self.host.secrets = {"HONCHO_API_KEY": KEY}
        self.save_project("Alpha", human_peer_id="alice")
        self.save_project("Beta", human_peer_id="bob")

    # -- helpers -----------------------------------------------------------------------------------

    def save_project(self, name, **values):
        """A project's settings as the settings page saves them: its config.json."""
        path = self.host.project_meta(name, "plugins", "honcho", "config.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        spare = path + ".new"
        with open(spare, "w", encoding="utf-8") as handle:
            json.dump(values, handle)
        # a new file: the settings cache sees the change within one clock tick
        os.replace(spare, path)

    def load(self, rel):
        module = import_by_path(os.path.join(self.host.plugin_dir, rel))
        return next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def chat(self, chat_id, project=None, profile="agent0"):
        agent = StubAgent(0, StubContext(id=chat_id, project=project))
        agent.config = types.SimpleNamespace(profile=profile)
        agent.context.agent0 = agent
        return agent

    def typed(self, agent, text, history_id="h-1", intervention=False):
        data = {"args": (agent, types.SimpleNamespace(message=text, id="")),
                "kwargs": {"intervention": True} if intervention else {},
                "result": StubHistoryMessage(False, history_id), "exception": None}
        self.load(USER_EXT)(agent=agent).execute(data=data)

    def responded(self, agent, text, ai_id="ai-1"):
        agent.history.current.messages.append(StubHistoryMessage(True, ai_id))
        self.load(RESPONSE_EXT)(agent=agent).execute(
            response=types.SimpleNamespace(message=text, break_loop=True), tool_name="response")

    def queued(self):
        """(session, peer, role, content) of every queued event, in capture order."""
        return stub_host_events(self, self.host)

    def deliver(self):
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import global_settings, hub
        from usr.plugins.honcho.honcho_hub.ops import operator

        self.queued()
        the_hub = hub()
        result = operator.drain(global_settings(), 10, worker=the_hub.worker(),
                                flush_capture=the_hub.flush_capture)
        self.assertEqual(result.get("pending"), 0, result)

    def recall(self, agent, text):
        """The recall extension's block for this turn (None when nothing was injected)."""
        data = types.SimpleNamespace(
            iteration=0, extras_persistent={},
            user_message=types.SimpleNamespace(
                content={"system_message": [], "user_message": text, "attachments": []}))
        asyncio.run(self.load(RECALL_EXT)(agent=agent).execute(loop_data=data))
        return data.extras_persistent.get("honcho_memory")

    def delivered(self):
        """Session -> the peers of its messages in the fake Honcho, in arrival order (sessions are
        sent concurrently: only the order within one is kept)."""
        peers = {}
        for message in self.fake.messages:
            peers.setdefault(message["session_id"], []).append(message["peer_id"])
        return peers

    # -- where messages land -----------------------------------------------------------------------

    def test_two_projects_mapped_to_two_humans_land_under_two_peers(self):
        alpha, beta = self.chat("ChatAlph", "Alpha"), self.chat("ChatBeta", "Beta")
        self.typed(alpha, "I keep three beehives")
        self.responded(alpha, "Noted: bees.")
        self.typed(beta, "I restore old clocks")
        self.responded(beta, "Noted: clocks.")
        self.assertEqual([row[:3] for row in self.queued()],
                         [("chat-ChatAlph", "alice", "user"),
                          ("chat-ChatAlph", "agent-zero", "agent"),
                          ("chat-ChatBeta", "bob", "user"),
                          ("chat-ChatBeta", "agent-zero", "agent")])
        self.deliver()
        self.assertEqual(self.delivered(), {"chat-ChatAlph": ["alice", "agent-zero"],
                                            "chat-ChatBeta": ["bob", "agent-zero"]})

    def test_a_projects_human_joins_its_session_with_the_human_roles_observation(self):
        # The worker runs with the global settings, whose user_peer_id is not alice: her role
        # travels on the event, and her session peer gets the human's flags, not the agent's.
        self.typed(self.chat("ChatAlph", "Alpha"), "I keep three beehives")
        self.deliver()
        me, others = OBSERVATION_PRESETS["seed"]["user"]
        peers = self.fake.sessions[("agent-zero", "chat-ChatAlph")]["peers"]
        self.assertEqual(peers["alice"], {"observe_me": me, "observe_others": others})
        # Only the chat's peers: the default human would form its own views of alice from her
        # session.
        self.assertEqual(set(peers), {"alice", "agent-zero"})

    # -- what recall reads -------------------------------------------------------------------------

    def test_each_projects_recall_reads_its_own_human_and_never_the_others_session(self):
        alpha, beta = self.chat("ChatAlph", "Alpha"), self.chat("ChatBeta", "Beta")
        self.typed(beta, "My locker number is 4711")
        self.responded(beta, "Locker 4711, noted.")
        self.deliver()
        alpha_block = self.recall(alpha, "Which number is my locker?")
        self.assertIn(ALICE_FACT, alpha_block)
        for foreign in (BOB_FACT, DEFAULT_FACT, "4711"):
            self.assertNotIn(foreign, alpha_block)
        self.assertEqual(self.fake.context_queries[-1]["peer_target"], "alice")
        beta_block = self.recall(beta, "Which number is my locker?")
        self.assertIn(BOB_FACT, beta_block)
        self.assertIn("4711", beta_block)  # its own session's messages
        self.assertNotIn(ALICE_FACT, beta_block)

    def test_a_chat_whose_project_changes_its_human_is_not_served_the_previous_humans_pack(self):
        alpha = self.chat("ChatAlph", "Alpha")
        self.assertIn(ALICE_FACT, self.recall(alpha, "What do I keep?"))
        self.save_project("Alpha", human_peer_id="bob")
        block = self.recall(alpha, "What do I keep?")  # the same chat, session and query
        self.assertIn(BOB_FACT, block)
        self.assertNotIn(ALICE_FACT, block)

    def test_a_shared_session_strategy_never_puts_two_humans_in_one_session(self):
        # A session's recent messages and summary reach every pack read through it: under global
        # and per-project, only the chats of the human a shared session is for share it; any other
        # keeps its own.
        self.host.config["profile_peers"] = "research=carol"
        self.save_project("Gamma")  # names no human: its session is user_peer_id's
        cases = {
            # strategy: [(chat, project, profile, session)]
            "global": [("ChatAlph", "Alpha", "agent0", "chat-ChatAlph"),
                       ("ChatBeta", "Beta", "agent0", "chat-ChatBeta"),
                       ("ChatRsch", None, "research", "chat-ChatRsch"),
                       ("ChatPlan", None, "agent0", "global"),
                       ("ChatPla2", "Gamma", "agent0", "global")],
            "per-project": [("ChatAlph", "Alpha", "agent0", "project-Alpha"),
                            # the project's human wins
                            ("ChatAlp2", "Alpha", "research", "project-Alpha"),
                            ("ChatGamm", "Gamma", "agent0", "project-Gamma"),
                            ("ChatGRsc", "Gamma", "research", "chat-ChatGRsc"),
                            ("ChatPlan", None, "agent0", "chat-ChatPlan")],
        }
        from usr.plugins.honcho.extensions.honcho_bridge import chat_sessions, host

        for strategy, chats in cases.items():
            self.host.config["session_strategy"] = strategy
            for chat_id, project, profile, session in chats:
                with self.subTest(strategy=strategy, chat=chat_id):
                    agent = self.chat(chat_id, project, profile)
                    self.assertEqual(
                        chat_sessions.chat_session(agent, host.settings_for(agent), project),
                        session)

    def test_under_the_global_strategy_one_projects_recall_never_reads_the_others_messages(self):
        self.host.config["session_strategy"] = "global"
        alpha, beta = self.chat("ChatAlph", "Alpha"), self.chat("ChatBeta", "Beta")
        self.typed(beta, "My locker number is 4711")
        self.deliver()
        self.assertEqual([row[:2] for row in self.queued()], [("chat-ChatBeta", "bob")])
        block = self.recall(alpha, "Which number is my locker?")
        self.assertIn(ALICE_FACT, block)
        self.assertNotIn("4711", block)

    # -- agent profiles ----------------------------------------------------------------------------

    def test_the_agent_profile_names_the_human_of_a_chat_without_a_project_human(self):
        self.host.config["profile_peers"] = "research=carol,coder=dave"
        research = self.chat("ChatRsch", profile="research")
        self.typed(research, "I study lichens")
        subordinate = StubAgent(1, research.context)
        subordinate.config = types.SimpleNamespace(profile="coder")
        # Typed while a subordinate of another profile runs: still the chat's human (agent 0's
        # profile).
        self.typed(subordinate, "and mosses too", history_id="h-2", intervention=True)
        self.assertEqual([row[1] for row in self.queued()], ["carol", "carol"])
        self.assertIn("Carol's fact.", self.recall(research, "What do I study?"))
        self.assertEqual(self.fake.context_queries[-1]["peer_target"], "carol")

    def test_a_projects_human_wins_over_the_agent_profiles(self):
        self.host.config["profile_peers"] = "research=carol"
        alpha = self.chat("ChatAlph", "Alpha", profile="research")
        self.typed(alpha, "I keep three beehives")
        self.assertEqual([row[1] for row in self.queued()], ["alice"])
        self.assertIn(ALICE_FACT, self.recall(alpha, "What do I keep?"))

    def test_the_tool_and_its_status_name_the_chats_human(self):
        from usr.plugins.honcho.extensions.honcho_bridge import tool

        context = tool.action_context(self.chat("ChatAlph", "Alpha"))
        self.assertEqual(context.settings.user_peer_id, "alice")
        self.assertIn("alice", context.status())

    def test_the_dialectic_asks_about_the_chats_human(self):
        self.host.config.update(dialectic_enabled=True, dialectic_cadence=1)
        self.typed(self.chat("ChatAlph", "Alpha"), "Which hive needs a new queen?")
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
        from usr.plugins.honcho.honcho_hub import runtime

        # the recall modules load, then the prefetch starts
        self.assertTrue(runtime.join_background(10))
        self.assertTrue(wait_idle(30, hub().recaller(), hub().chats()))
        self.assertEqual({(r["peer"], r.get("target")) for r in self.fake.chat_requests},
                         {("agent-zero", "alice")})

    def test_the_chats_settings_are_built_once_per_project_and_profile(self):
        from usr.plugins.honcho.extensions.honcho_bridge import host

        self.host.config["profile_peers"] = "research=carol"
        first = host.settings_for(self.chat("ChatRsch", profile="research"))
        self.assertIs(host.settings_for(self.chat("ChatRsc2", profile="research")), first)
        other = host.settings_for(self.chat("ChatPlan", profile="agent0"))
        self.assertEqual((first.user_peer_id, other.user_peer_id), ("carol", "user"))
        self.host.config["profile_peers"] = "research=erin"  # a save: built again
        self.assertEqual(host.settings_for(self.chat("ChatRsch", profile="research")).user_peer_id,
                         "erin")

    # -- chats nothing maps ------------------------------------------------------------------------

    def test_an_unmapped_chat_under_no_capture_is_neither_captured_nor_recalled(self):
        self.host.config.update(profile_peers="research=carol", unmapped_chats="no-capture")
        plain = self.chat("ChatPlan", profile="agent0")
        self.load(INIT_EXT)(agent=plain).execute()
        self.typed(plain, "I keep a diary")
        self.responded(plain, "Noted.")
        self.assertEqual(self.queued(), [])
        self.assertIsNone(self.recall(plain, "What do I keep?"))
        from usr.plugins.honcho.honcho_hub import runtime

        self.assertTrue(runtime.join_background(10))  # chat start's work, had it queued any
        self.assertEqual(self.fake.requests, [])  # no context, no base pack, no session created

    def test_in_an_unmapped_chat_under_no_capture_the_tool_is_neither_offered_nor_run(self):
        self.host.config.update(profile_peers="research=carol", unmapped_chats="no-capture")
        from usr.plugins.honcho.extensions.honcho_bridge.tool import offer_tool_in_prompt, run_tool

        plain, mapped = (self.chat("ChatPlan", profile="agent0"),
                         self.chat("ChatRsch", profile="research"))
        self.assertFalse(offer_tool_in_prompt(plain))
        self.assertTrue(offer_tool_in_prompt(mapped))
        answer = asyncio.run(run_tool(plain, {"action": "remember", "content": "I keep a diary"}))
        self.assertIn("unmapped_chats", answer)
        self.assertEqual(self.fake.requests, [])  # nothing read or written under user_peer_id

    def test_the_sidebars_status_and_card_are_of_the_chat_shown_and_its_human(self):
        from usr.plugins.honcho.extensions.honcho_bridge import operations

        alpha = self.chat("ChatAlph", "Alpha")
        self.fake.cards[("agent-zero", "alice")] = ["Keeps three beehives"]
        self.fake.cards[("agent-zero", "user")] = ["Sails on weekends"]
        sys.modules["agent"] = types.SimpleNamespace(
            AgentContext=types.SimpleNamespace(get={"ChatAlph": alpha.context}.get,
                                               all=lambda: [alpha.context]))
        self.addCleanup(sys.modules.pop, "agent", None)
        status = operations.status_document({"context": "ChatAlph", "light": True})["status"]
        self.assertEqual((status["identity"]["user_peer_id"], status["identity"]["session_id"]),
                         ("alice", "chat-ChatAlph"))
        self.assertEqual(operations.card_document({"context": "ChatAlph"})["facts"],
                         ["Keeps three beehives"])
        # no chat shown
        self.assertEqual(operations.card_document({})["facts"], ["Sails on weekends"])

    def test_an_unmapped_chat_under_default_peer_is_the_user_peer_ids(self):
        self.host.config.update(profile_peers="research=carol", unmapped_chats="default-peer")
        plain = self.chat("ChatPlan", profile="agent0")
        self.typed(plain, "I sail on weekends")
        self.assertEqual([row[1] for row in self.queued()], ["user"])
        self.assertIn(DEFAULT_FACT, self.recall(plain, "What do I do on weekends?"))
        self.assertEqual(self.fake.context_queries[-1]["peer_target"], "user")


if __name__ == "__main__":
    unittest.main()
