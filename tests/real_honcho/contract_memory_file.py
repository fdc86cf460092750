"""Export and import of the memory file (honcho_hub/ops/memory_file.py) against a real Honcho: the
conclusion listing it walks (level, session, time, pages; no source_ids, even for a dream's
conclusions), the creation it imports through (explicit, the server's own time, an existing session
only), and a file exported from one workspace imported into a fresh one, then again, creating
nothing the second time."""

import unittest
from datetime import UTC, datetime, timedelta

from real_kit import (
    AGENT,
    USER,
    RealHonchoCase,
    await_derivation,
    conclusions_about,
    fresh_workspace,
    real_gateway,
    real_settings,
    turns,
)

from honcho_hub.errors import PermanentError
from honcho_hub.gateway import queries
from honcho_hub.ops import memory_file
from honcho_hub.tool.actions import ActionContext


class ListingAndCreationTest(RealHonchoCase):
    quiet = True  # only the conclusions made here

    def test_created_conclusions_are_explicit_with_the_servers_time_in_their_session(self):
        gateway = self.gateway()
        before = datetime.now(UTC) - timedelta(seconds=5)
        made = queries.create_conclusions(gateway, AGENT, USER, ["likes tea", "likes maps"],
                                          "import-here")
        self.assertEqual([m.content for m in made], ["likes tea", "likes maps"])
        queries.create_conclusions(gateway, AGENT, USER, ["likes rain"], "import-here")
        first = queries.list_conclusions(gateway, AGENT, USER, 1, 2)
        second = queries.list_conclusions(gateway, AGENT, USER, 2, 2)
        self.assertEqual((first.total, first.pages, len(first.items), len(second.items)),
                         (3, 2, 2, 1))
        listed = [*first.items, *second.items]
        # Newest request first; the conclusions of one request share its time.
        self.assertEqual([c.content for c in listed][0], "likes rain")
        self.assertEqual(sorted(c.content for c in listed), ["likes maps", "likes rain",
                                                             "likes tea"])
        for c in listed:
            self.assertEqual((c.level, c.session_id, c.source_ids),
                             ("explicit", "import-here", ()))
            self.assertGreaterEqual(c.created_at, before)  # the server's time, not a file's

    def test_a_conclusion_naming_a_session_honcho_does_not_hold_is_refused(self):
        gateway = self.gateway()
        gateway.ensure_known(None)  # the peers, and no conclusion
        with self.assertRaises(PermanentError) as raised:
            gateway.call(lambda c: gateway.reader_peer(AGENT).conclusions_of(USER).create(
                [{"content": "x", "session_id": "never-made"}]))
        self.assertEqual(raised.exception.code, "http_404")


class DerivedLevelsTest(RealHonchoCase):
    def test_a_dreams_conclusions_are_listed_with_their_level_and_sources(self):
        gateway = self.gateway()
        gateway.send(turns("chat-dream", ["I keep bees", "Noted.", "I sell honey", "Nice."]))
        await_derivation(gateway, "the explicit conclusions",
                         until=lambda: len(conclusions_about(gateway, AGENT, USER)) >= 2)
        queries.schedule_dream(gateway, AGENT, USER, "chat-dream")
        derived = await_derivation(gateway, "the dream's derived conclusions", until=lambda: [
            c for c in queries.list_conclusions(gateway, AGENT, USER, 1, 50).items
            if c.level != "explicit"])
        self.assertLessEqual({c.level for c in derived}, {"deductive", "inductive"})
        # This server lists no source_ids, even for a derived conclusion: an export has none.
        self.assertEqual({c.source_ids for c in derived}, {()})


class RoundTripTest(RealHonchoCase):
    quiet = True

    def context(self, workspace_id: str) -> ActionContext:
        settings = real_settings(self.addCleanup, self.url, workspace_id)
        gateway = real_gateway(self.addCleanup, settings)
        return ActionContext(settings=settings, gateway=gateway)

    def test_a_file_exported_from_one_workspace_imports_once_into_a_fresh_one(self):
        source = self.context(self.workspace_id)
        queries.set_card(source.honcho(), AGENT, USER, ["IDENTITY: Ada", "ATTRIBUTE: sails"])
        queries.create_conclusions(source.honcho(), AGENT, USER,
                                   ["The user sails", "The user keeps  bees"], "chat-a")
        document = memory_file.export_memory(source, now=1_800_000_000.0)
        self.assertTrue(document["complete"], document["problems"])
        self.assertEqual(sorted((c["text"], c["level"], c["session_id"])
                                for c in document["conclusions"]),
                         [("The user keeps  bees", "explicit", "chat-a"),
                          ("The user sails", "explicit", "chat-a")])

        target = self.context(fresh_workspace("import"))
        read = memory_file.parse(memory_file.as_json(document))
        dry = memory_file.import_memory(target, read, dry_run=True)
        self.assertEqual((dry["created"], dry["to_create"], dry["card_to_add"]), (0, 2, 2))
        self.assertEqual(queries.list_conclusions(target.honcho(), AGENT, USER, 1, 10).total, 0)

        done = memory_file.import_memory(target, read)
        self.assertEqual((done["created"], done["already"], done["card_added"], done["state"]),
                         (2, 0, 2, "done"))
        listed = queries.list_conclusions(target.honcho(), AGENT, USER, 1, 10).items
        self.assertEqual(sorted((c.content, c.level, c.session_id) for c in listed),
                         [("The user keeps  bees", "explicit", memory_file.IMPORT_SESSION),
                          ("The user sails", "explicit", memory_file.IMPORT_SESSION)])
        self.assertEqual(queries.read_card(target.honcho(), AGENT, USER),
                         ["IDENTITY: Ada", "ATTRIBUTE: sails"])

        again = memory_file.import_memory(target, read)
        self.assertEqual((again["created"], again["already"], again["card_added"]), (0, 2, 0))
        self.assertEqual(sorted(c.id for c in queries.list_conclusions(
            target.honcho(), AGENT, USER, 1, 10).items), sorted(c.id for c in listed))


if __name__ == "__main__":
    unittest.main()
