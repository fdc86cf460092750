"""A session's peer configuration read and set on a real Honcho, as ops/observation.py does it
(gateway/queries.py `peer_configuration`, `set_peer_configuration`), and the preset applied to the
sessions of a real outbox's chat map. Also what the fake Honcho encodes of these calls: a read of a
peer not in the session is 404; a write replaces the flags it names; a write for a peer not in the
session ADDS it (so the plugin never writes one); a write for a session Honcho does not hold is
404."""

from __future__ import annotations

import dataclasses
import unittest

from real_kit import AGENT, USER, RealHonchoCase, turns

# isort: split
from outbox_helpers import event  # after real_kit, which puts tests/ on sys.path

from honcho_hub.errors import PermanentError
from honcho_hub.gateway import queries
from honcho_hub.ops import observation
from honcho_hub.storage.outbox import Outbox


def flags(me: bool | None, others: bool | None) -> dict:
    return {"observe_me": me, "observe_others": others}


class PeerConfigurationTest(RealHonchoCase):
    quiet = True

    def setUp(self):
        self.gw = self.gateway()  # seed: the human (on, on), the agent (off, on)
        self.sid = f"chat-cfg-{self.id().rsplit('_', 1)[-1]}"
        self.gw.send(turns(self.sid, ["hello", "hi"]))

    def test_a_read_gives_the_flags_the_session_was_created_with(self):
        self.assertEqual(queries.peer_configuration(self.gw, self.sid, USER), flags(True, True))
        self.assertEqual(queries.peer_configuration(self.gw, self.sid, AGENT), flags(False, True))

    def test_a_write_replaces_the_flags_and_a_read_shows_them(self):
        queries.set_peer_configuration(self.gw, self.sid, AGENT, flags(True, False))
        self.assertEqual(queries.peer_configuration(self.gw, self.sid, AGENT), flags(True, False))
        self.assertEqual(queries.peer_configuration(self.gw, self.sid, USER), flags(True, True))

    def test_a_peer_not_in_the_session_reads_as_none_and_a_write_would_add_it(self):
        self.gw.call(lambda client: client.peer("stranger-cfg"))  # known to the workspace
        self.assertIsNone(queries.peer_configuration(self.gw, self.sid, "stranger-cfg"))
        queries.set_peer_configuration(self.gw, self.sid, "stranger-cfg", flags(False, False))
        members = self.gw.call(lambda client: [p.id for p in
                                               self.gw.reader_session(self.sid).peers()])
        self.assertIn("stranger-cfg", members)

    def test_a_write_for_a_session_honcho_does_not_hold_is_404(self):
        with self.assertRaises(PermanentError) as caught:
            queries.set_peer_configuration(self.gw, "chat-cfg-never-made", AGENT,
                                           flags(True, True))
        self.assertEqual(caught.exception.code, "http_404")
        self.assertIsNone(queries.peer_configuration(self.gw, "chat-cfg-never-made", AGENT))


class ApplyToExistingSessionsTest(RealHonchoCase):
    quiet = True

    def test_a_dry_run_then_apply_sets_the_saved_presets_flags_on_the_mapped_sessions(self):
        made = self.gateway()  # created under seed
        settings = self.settings(observation="directional")
        for sid in ("chat-old-a", "chat-old-b", "not-mine"):
            made.send(turns(sid, ["hello", "hi"], tag=sid))
        box = Outbox.for_settings(settings)
        try:
            box.enqueue_batches([[dataclasses.replace(
                event(1, sid, dest=settings.destination()), chat_id=f"c-{sid}")]
                for sid in ("chat-old-a", "chat-old-b")])
        finally:
            box.close()
        gw = self.gateway(observation="directional")
        dry = observation.check(settings, gw)
        self.assertEqual((dry["total"], dry["differ"], dry["changes"]),
                         (2, 2, {"agent observe_me: off → on": 2}))
        self.assertEqual(queries.peer_configuration(gw, "chat-old-a", AGENT), flags(False, True))
        done = observation.apply(settings, gw)
        self.assertEqual((done["applied"], done["failed"], done["stopped"]), (2, [], None))
        for sid in ("chat-old-a", "chat-old-b"):
            self.assertEqual(queries.peer_configuration(gw, sid, AGENT), flags(True, True))
        self.assertEqual(queries.peer_configuration(gw, "not-mine", AGENT), flags(False, True))
        self.assertEqual(observation.check(settings, gw)["differ"], 0)


if __name__ == "__main__":
    unittest.main()
