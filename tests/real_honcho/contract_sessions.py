"""Session strategies and observation presets against a real Honcho: the peer configuration a
session is created with, what the server does when a session's peers are added again with other
flags (it keeps the ones it holds), status reading them back, and the session ids of every
strategy."""

import dataclasses
import unittest

from real_kit import AGENT, USER, RealHonchoCase, turns

from honcho_hub.names import ID_MAX, session_for
from honcho_hub.ops.status import build_status, gather_parts, status_text
from honcho_hub.runtime import process_state

SEED = {USER: {"observe_me": True, "observe_others": True},
        AGENT: {"observe_me": False, "observe_others": True}}
DIRECTIONAL = {USER: {"observe_me": True, "observe_others": True},
               AGENT: {"observe_me": True, "observe_others": True}}


class ObservationTest(RealHonchoCase):
    quiet = True  # the tests read configuration only: no derivation needed

    def server_flags(self, gateway, session_id: str, peer: str) -> tuple:
        config = gateway.call(lambda c: gateway.reader_session(session_id)
                              .get_peer_configuration(peer))
        return config.observe_me, config.observe_others

    def test_a_session_created_under_directional_models_the_agent_too(self):
        gateway = self.gateway(observation="directional")
        gateway.send(turns("chat-directional", ["I sail on weekends", "Sounds fun."]))
        self.assertEqual(self.server_flags(gateway, "chat-directional", AGENT), (True, True))
        self.assertEqual(gateway.session_peer_flags("chat-directional", [USER, AGENT]), DIRECTIONAL)

    def test_custom_flags_reach_the_server(self):
        gateway = self.gateway(observation="custom", observe_user_others=False,
                               observe_agent_me=True, observe_agent_others=False)
        gateway.send(turns("chat-custom", ["I collect stamps"]))
        self.assertEqual(gateway.session_peer_flags("chat-custom", [USER, AGENT]),
                         {USER: {"observe_me": True, "observe_others": False},
                          AGENT: {"observe_me": True, "observe_others": False}})

    def test_a_held_session_keeps_its_flags_when_its_peers_are_added_again_with_others(self):
        self.gateway().send(turns("chat-kept", ["I grow basil"]))  # created under seed
        # A new client: its sessions are not known.
        directional = self.gateway(observation="directional")
        directional.send(turns("chat-kept", ["x", "Basil is easy to grow."], tag="later")[1:])
        self.assertEqual(self.server_flags(directional, "chat-kept", AGENT), (False, True))
        # Asked outright (add_peers with other flags, as a new client of an older plugin would):
        # still kept.
        from honcho.api_types import SessionPeerConfig

        directional.call(lambda c: directional.reader_session("chat-kept").add_peers(
            [(AGENT, SessionPeerConfig(observe_me=True, observe_others=False))]))
        self.assertEqual(directional.session_peer_flags("chat-kept", [USER, AGENT]), SEED)
        settings = self.settings(observation="directional")
        parts = gather_parts(settings, process_state(), session_id="chat-kept",
                             session_peers=directional.session_peer_flags)
        status = build_status(settings, parts, 0.0)
        self.assertTrue(status["identity"]["observation"]["server_wins"])
        self.assertIn("agent me off, others on — the server's configuration wins",
                      status_text(status))

    def test_a_peer_new_to_an_existing_session_joins_with_its_roles_flags(self):
        self.gateway().send(turns("chat-joined", ["I like jazz"]))
        former = dataclasses.replace(
            turns("chat-joined", ["x", "an older agent's reply"], tag="former")[1],
            peer_id="former-agent")
        self.gateway(observation="directional").send([former])
        self.assertEqual(self.gateway().session_peer_flags("chat-joined", ["former-agent"]),
                         {"former-agent": {"observe_me": True, "observe_others": True}})

    def test_a_peer_added_by_a_message_alone_holds_no_flags_and_an_unknown_session_none(self):
        gateway = self.gateway()
        from honcho.api_types import MessageCreateParams

        gateway.call(lambda c: c.session("chat-bare").add_messages(
            MessageCreateParams(content="hi", peer_id=USER)))
        self.assertEqual(gateway.session_peer_flags("chat-bare", [USER]),
                         {USER: {"observe_me": None, "observe_others": None}})
        self.assertEqual(gateway.session_peer_flags("chat-never-created", [USER, AGENT]),
                         {USER: None, AGENT: None})


class SessionIdsTest(RealHonchoCase):
    quiet = True

    def test_every_strategys_session_ids_are_accepted(self):
        gateway = self.gateway()
        sessions = {"per-chat": session_for("per-chat", "Ab3dE6gH", None),
                    "per-project": session_for("per-project", "Ab3dE6gH", "Alpha"),
                    "per-project, a name changed to fit": session_for("per-project", "c",
                                                                      "Mon projet · été/2026"),
                    "per-project, the longest": session_for("per-project", "c", "p" * 900),
                    "global": session_for("global", "Ab3dE6gH", "Alpha")}
        self.assertEqual(len(sessions["per-project, the longest"]), ID_MAX)
        for name, session_id in sessions.items():
            with self.subTest(strategy=name):
                gateway.send(turns(session_id, [f"a message in {name}"], tag=f"ids-{len(name)}"))
                page = gateway.call(lambda c, sid=session_id:
                                    gateway.reader_session(sid).messages(size=10))
                self.assertEqual([m.content for m in page.items], [f"a message in {name}"])


if __name__ == "__main__":
    unittest.main()
