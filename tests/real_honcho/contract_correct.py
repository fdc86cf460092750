"""Correct, with what evidence there is, against a real Honcho: every request the inspector's
correction, evidence, level listing, messages and card rebuild make (gateway/queries.py), and the
facts they rest on. A conclusion is found by `{"id": {"in": [...]}}` with its level, session and
time; derived conclusions come back without `source_ids` (so a conclusion's premises cannot be
shown) while `{"source_ids": {"contains": [id]}}` finds what rests on one; a level filter takes
`contradiction`; a session's messages list newest first up to a time; a `card_refresh` dream with
`rebuild` rewrites the card from the conclusions alone; a correction creates, then deletes.
"""

from datetime import timedelta

from real_kit import AGENT, USER, RealHonchoCase, await_derivation, conclusions_about, user_turns

from honcho_hub.gateway import queries
from honcho_hub.tool.actions import ActionContext, run_action

FACTS = ["I live in Bergen", "I row on Sundays", "My boat is called Wren"]


def card(gateway) -> list[str]:
    return queries.read_card(gateway, AGENT, USER)


class Dreamt(RealHonchoCase):
    """Three facts said in chat-c1, their explicit conclusions, then a dream over them (a workspace
    for the class)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gw = cls.gw = cls.class_gateway()
        gw.send(user_turns("chat-c1", FACTS))
        await_derivation(gw, "three explicit conclusions",
                         until=lambda: len(conclusions_about(gw, AGENT, USER)) >= 3)
        gw.call(lambda c: c.schedule_dream(observer=AGENT, observed=USER))
        await_derivation(gw, "the dream's derived conclusions", until=lambda: len(
            [c for c in conclusions_about(gw, AGENT, USER) if c.level != "explicit"]) >= 2)
        cls.explicit = [c for c in conclusions_about(gw, AGENT, USER) if c.level == "explicit"]
        cls.derived = [c for c in conclusions_about(gw, AGENT, USER) if c.level != "explicit"]


class EvidenceTest(Dreamt):
    def test_a_conclusion_is_found_by_id_with_level_session_and_time(self):
        first = self.explicit[0]
        found = queries.conclusion_by_id(self.gw, AGENT, USER, first.id)
        self.assertEqual((found.id, found.level, found.session_id, found.created_at),
                         (first.id, "explicit", "chat-c1", first.created_at))
        derived = queries.conclusion_by_id(self.gw, AGENT, USER, self.derived[0].id)
        self.assertEqual((derived.level in ("deductive", "inductive"), derived.source_ids),
                         (True, ()), "no source_ids come back: premises cannot be shown")
        self.assertIsNone(queries.conclusion_by_id(self.gw, USER, USER, first.id),
                          "another pair's view does not find it")

    def test_what_rests_on_a_conclusion_is_found_by_a_source_ids_list(self):
        cited = {c.id for e in self.explicit
                 for c in queries.citing_conclusions(self.gw, [e.id], 20)[0]}
        self.assertEqual(cited, {c.id for c in self.derived})

    def test_a_level_filter_lists_derived_ones_and_takes_contradiction(self):
        deductive = queries.conclusions_at_level(self.gw, AGENT, USER, "deductive", 1, 50)
        self.assertEqual([c.level for c in deductive.items], ["deductive"])
        self.assertEqual(queries.conclusions_at_level(self.gw, AGENT, USER, "contradiction", 1,
                                                      50).items, (),
                         "accepted; this server's fake LLM writes no contradiction")

    def test_the_sessions_messages_up_to_a_conclusions_time_come_newest_first_bounded(self):
        made = self.explicit[-1].created_at  # the oldest explicit conclusion
        said = queries.messages_before(self.gw, "chat-c1", made, 2)
        self.assertEqual(len(said), 2)
        self.assertTrue(all(m.created_at <= made for m in said))
        self.assertEqual([m.content for m in said], FACTS[::-1][:2])
        self.assertEqual(queries.messages_before(self.gw, "chat-c1",
                                                 made - timedelta(days=3650), 5), [])


class CardRefreshTest(Dreamt):
    def test_a_card_refresh_dream_with_rebuild_rewrites_the_card_from_the_conclusions(self):
        await_derivation(self.gw, "the dream's card", until=lambda: len(card(self.gw)) >= 2)
        queries.set_card(self.gw, AGENT, USER, ["ATTRIBUTE: Lives on the Moon"])
        queries.refresh_card(self.gw, AGENT, USER)
        rebuilt = await_derivation(self.gw, "the card rebuilt", until=lambda: [
            fact for fact in card(self.gw) if "Moon" not in fact])
        self.assertIn("ATTRIBUTE: I live in Bergen", rebuilt)
        self.assertNotIn("ATTRIBUTE: Lives on the Moon", card(self.gw))


class CorrectTest(RealHonchoCase):
    def test_a_correction_creates_the_right_one_and_deletes_the_wrong_one(self):
        gw = self.gateway()
        ctx = ActionContext(settings=self.settings(), session_id="chat-c2", gateway=gw)
        made = run_action("remember", {"content": "The user lives in Bergen"}, ctx)
        self.assertTrue(made.ok, made.text)
        wrong = made.text.split()[-1].rstrip(".")
        done = run_action("correct", {"id": wrong, "content": "The user lives in Oslo",
                                      "confirm": True}, ctx)
        self.assertTrue(done.ok, done.text)
        self.assertEqual([(c.content, c.session_id) for c in conclusions_about(gw, AGENT, USER)],
                         [("The user lives in Oslo", "chat-c2")])
