"""Correct, with what evidence there is (ops/inspector.py, tool/actions.py `correct`), against the
fake Honcho: a wrong conclusion replaced by the right one in one step (created first, deleted
second, a half-done step said plainly, undo as for a forget), a card fact replaced, the card
rebuilt by a card_refresh dream, a conclusion's level, session, chats and premises (or the server's
"cannot"), the chat's messages before it was made, and the listing by level."""

import json
import unittest
from datetime import timedelta

from test_inspector import CREATED, HOST_SECRET, LEAKED, SESSION, TEMPLATE, InspectorBench
from test_memory_expiry import NOW, ExpiryBench

from honcho_hub.ops import inspector
from honcho_hub.ops.inspector import Inspector
from honcho_hub.recall.recaller import Recaller
from honcho_hub.tool.actions import run_action


class CorrectConclusionTest(unittest.TestCase):
    def setUp(self):
        self.bench = InspectorBench(self)
        self.bench.peers_seen()

    def test_a_correction_creates_the_right_one_then_deletes_the_wrong_one_and_keeps_both(self):
        b = self.bench
        wrong = b.conclusion("The user lives in Bergen", SESSION)
        answer = inspector.correct(b.ins, wrong, f"The user lives in Oslo {LEAKED}", True)
        self.assertTrue(answer["ok"], answer)
        right = next(cid for cid, c in b.fake.conclusions.items()
                     if c["content"].startswith("The user lives in Oslo"))
        self.assertEqual(b.fake.conclusions[right]["content"],
                         "The user lives in Oslo [REDACTED:github_token]")
        self.assertNotIn(wrong, b.fake.conclusions)
        self.assertEqual(answer["message"],
                         f"Corrected conclusion {wrong}: the right one is {right}; the wrong one"
                         " was forgotten (undo restores it).")
        order = [(verb, path.rsplit("/", 1)[-1]) for verb, path, _ in b.sent
                 if verb in ("DELETE",) or path.endswith("/conclusions")]
        self.assertEqual(order, [("POST", "conclusions"), ("DELETE", wrong)])
        writes = inspector.view(b.ins)["writes"]["items"]
        self.assertEqual([(w["kind"], w["id"]) for w in writes],
                         [("forget", wrong), ("remember", right)])
        self.assertIsNotNone(writes[0]["undo_until"])
        restored = inspector.undo(b.ins, wrong)
        self.assertTrue(restored["ok"], restored)
        self.assertIn("The user lives in Bergen",
                      [c["content"] for c in b.fake.conclusions.values()])

    def test_a_failed_create_deletes_nothing_and_says_the_wrong_one_is_kept(self):
        b = self.bench
        wrong = b.conclusion("The user lives in Bergen", SESSION)
        b.fake.fail(r"/conclusions$", status=500)
        answer = inspector.correct(b.ins, wrong, "The user lives in Oslo", True)
        self.assertFalse(answer["ok"])
        self.assertIn(wrong, b.fake.conclusions)
        self.assertIn(f"Conclusion {wrong} was not deleted", answer["message"])
        self.assertEqual([verb for verb, _, _ in b.sent if verb == "DELETE"], [])

    def test_a_failed_delete_is_reported_as_half_done_with_both_ids(self):
        b = self.bench
        wrong = b.conclusion("The user lives in Bergen", SESSION)
        b.fake.fail(rf"/conclusions/{wrong}$", status=503)
        answer = inspector.correct(b.ins, wrong, "The user lives in Oslo", True)
        self.assertFalse(answer["ok"])
        right = next(cid for cid, c in b.fake.conclusions.items()
                     if c["content"] == "The user lives in Oslo")
        self.assertIn(wrong, b.fake.conclusions)
        self.assertEqual(answer["message"],
                         f"Half done: the right one was created as {right}, but conclusion"
                         f" {wrong} could not be deleted (http_503), so both are in memory now."
                         f" Forget {wrong} to finish.")
        self.assertEqual([w["kind"] for w in inspector.view(b.ins)["writes"]["items"]],
                         ["remember"])

    def test_a_correction_needs_confirmed_an_own_conclusion_and_new_text(self):
        b = self.bench
        wrong = b.conclusion("The user lives in Bergen", SESSION)
        others = b.conclusion("The assistant likes tea", observer="user")
        cases = {
            "not confirmed": ((wrong, "The user lives in Oslo", None), "needs `confirmed: true`"),
            "not the agent's": ((others, "The user lives in Oslo", True),
                                "is not one of the agent's conclusions about the user"),
            "empty text": ((wrong, "  ", True), "`content` is required"),
            "bad id": (("../x", "The user lives in Oslo", True), "`id` must be a conclusion id"),
        }
        for name, (args, said) in cases.items():
            with self.subTest(name):
                answer = inspector.correct(b.ins, *args)
                self.assertFalse(answer["ok"], answer)
                self.assertIn(said, answer["message"])
        self.assertEqual([verb for verb, _, _ in b.sent if verb == "DELETE"], [])
        self.assertEqual(len(b.fake.conclusions), 2)

    def test_the_tool_corrects_only_with_confirm(self):
        b = self.bench
        wrong = b.conclusion("The user lives in Bergen", SESSION)
        asked = run_action("correct", {"id": wrong, "content": "The user lives in Oslo"},
                           b.actions)
        self.assertTrue(asked.ok)
        self.assertTrue(asked.text.startswith("Not corrected. Ask the user to confirm"), asked.text)
        self.assertIn(wrong, b.fake.conclusions)
        done = run_action("correct", {"id": wrong, "content": "The user lives in Oslo",
                                      "confirm": True}, b.actions)
        self.assertTrue(done.ok, done.text)
        self.assertNotIn(wrong, b.fake.conclusions)


class CorrectCardTest(unittest.TestCase):
    def setUp(self):
        self.bench = InspectorBench(self)
        self.bench.peers_seen()
        self.card = self.bench.fake.cards[("agent-zero", "user")] = [
            "IDENTITY: user", "ATTRIBUTE: Lives in Bergen", f"ATTRIBUTE: pass {HOST_SECRET}"]

    def test_a_card_fact_is_replaced_in_place_and_the_old_card_kept(self):
        b = self.bench
        answer = inspector.correct_fact(b.ins, "ATTRIBUTE: Lives in Bergen",
                                        "ATTRIBUTE: Lives in Oslo", True)
        self.assertTrue(answer["ok"], answer)
        self.assertEqual(b.fake.cards[("agent-zero", "user")],
                         ["IDENTITY: user", "ATTRIBUTE: Lives in Oslo",
                          f"ATTRIBUTE: pass {HOST_SECRET}"])
        self.assertEqual(answer["message"], "Corrected a fact of the agent's card of the user.")
        kept = inspector.view(b.ins)["writes"]["items"][0]
        self.assertEqual(kept["kind"], "profile")
        self.assertNotIn(HOST_SECRET, json.dumps(kept))

    def test_a_fact_is_found_by_the_text_the_inspector_shows(self):
        b = self.bench
        shown = inspector.view(b.ins)["card"]["facts"][2]
        self.assertNotIn(HOST_SECRET, shown)
        answer = inspector.correct_fact(b.ins, shown, "ATTRIBUTE: uses a password manager", True)
        self.assertTrue(answer["ok"], answer)
        self.assertEqual(b.fake.cards[("agent-zero", "user")][2],
                         "ATTRIBUTE: uses a password manager")

    def test_an_unknown_fact_or_no_confirm_changes_nothing(self):
        b = self.bench
        for args, said in ((("ATTRIBUTE: Lives in Rome", "x", True), "No fact of the card"),
                           (("ATTRIBUTE: Lives in Bergen", "x", False), "`confirmed: true`")):
            with self.subTest(said):
                answer = inspector.correct_fact(b.ins, *args)
                self.assertFalse(answer["ok"])
                self.assertIn(said, answer["message"])
        self.assertEqual(b.fake.cards[("agent-zero", "user")], self.card)
        self.assertEqual(b.requests("PUT", "/card"), [])

    def test_the_card_is_rebuilt_by_a_card_refresh_dream_after_confirm(self):
        b = self.bench
        self.assertFalse(inspector.rebuild_card(b.ins, None)["ok"])
        self.assertEqual(b.fake.dreams, [])
        answer = inspector.rebuild_card(b.ins, True)
        self.assertTrue(answer["ok"], answer)
        self.assertEqual(b.fake.dreams, [{"observer": "agent-zero", "observed": "user",
                                          "dream_type": "card_refresh", "rebuild": True}])
        self.assertIn("rebuilds the card in the background", answer["message"])
        kept = inspector.view(b.ins)["writes"]["items"][0]
        self.assertEqual(kept["kind"], "profile")
        self.assertTrue(kept["text"].startswith("Card rebuild asked (it had 3 facts)"), kept)


class EvidenceTest(unittest.TestCase):
    def setUp(self):
        self.bench = InspectorBench(self)
        self.bench.peers_seen()

    def derived(self, content, cites, level="deductive"):
        cid = self.bench.conclusion(content)
        self.bench.fake.conclusions[cid].update(level=level, source_ids=list(cites))
        return cid

    def test_the_view_shows_each_conclusions_level(self):
        b = self.bench
        b.conclusion("The user lives in Bergen", SESSION)
        self.derived("The user likes the coast", ["c0001"])
        items = inspector.view(b.ins)["conclusions"]["items"]
        self.assertEqual([i["level"] for i in items], ["deductive", "explicit"])

    def test_evidence_shows_level_session_chats_what_rests_on_it_and_what_the_server_cannot(self):
        b = self.bench
        b.captured_chat("T0000001", SESSION)
        premise = b.conclusion("The user lives in Bergen", SESSION)
        derived = self.derived("The user likes the coast", [premise])
        self.derived("The user talks about places", [premise], level="inductive")
        shown = inspector.evidence(b.ins, premise)
        self.assertTrue(shown["ok"], shown)
        self.assertEqual({k: shown["conclusion"][k] for k in ("level", "session", "chats")},
                         {"level": "explicit", "session": SESSION, "chats": ["T0000001"]})
        self.assertEqual([(i["text"], i["level"]) for i in shown["rested_on_by"]["items"]],
                         [("The user talks about places", "inductive"),
                          ("The user likes the coast", "deductive")])
        self.assertEqual(shown["premises"]["state"], "from_messages")
        up = inspector.evidence(b.ins, derived)
        self.assertEqual(up["premises"]["state"], "unavailable")
        self.assertIn("does not say which conclusions", up["premises"]["message"])
        self.assertEqual(up["rested_on_by"]["items"], [])
        sent = [json.loads(body) for body in b.requests("POST", "/conclusions/list")]
        self.assertIn({"filters": {"OR": [{"source_ids": {"contains": [premise]}}]}}, sent)

    def test_a_conclusion_the_tool_wrote_is_not_said_to_be_drawn_from_messages(self):
        b = self.bench
        self.assertTrue(inspector.remember(b.ins, "The user likes tea")["ok"])
        written, = b.fake.conclusions
        shown = inspector.evidence(b.ins, written)
        self.assertEqual(shown["premises"]["state"], "written", shown["premises"])
        self.assertNotIn("Drawn from the chat's messages", shown["premises"]["message"])

    def test_the_chats_messages_before_the_conclusion_are_bounded_and_oldest_first(self):
        b = self.bench
        for n in range(15):
            b.fake.messages.append({
                "id": f"m{n}", "content": f"message {n} {LEAKED}", "peer_id": "user",
                "session_id": SESSION, "workspace_id": "agent-zero", "metadata": {},
                "created_at": (CREATED + timedelta(seconds=n - 10)).isoformat(),
                "token_count": 3})
        cid = b.conclusion("The user lives in Bergen", SESSION)  # made at CREATED
        shown = inspector.messages(b.ins, cid)
        self.assertTrue(shown["ok"], shown)
        self.assertEqual([m["text"] for m in shown["items"]],
                         [f"message {n} [REDACTED:github_token]"
                          for n in range(11 - inspector.MESSAGES_SHOWN, 11)])
        self.assertEqual(shown["session"], SESSION)

    def test_a_conclusion_without_a_session_has_no_messages_to_show(self):
        b = self.bench
        cid = self.derived("The user likes the coast", ["c0009"])
        shown = inspector.messages(b.ins, cid)
        self.assertEqual((shown["ok"], shown["items"]), (True, []))
        self.assertIn("names no chat", shown["message"])

    def test_conclusions_are_listed_by_level_and_a_bad_level_is_refused(self):
        b = self.bench
        b.conclusion("The user lives in Bergen", SESSION)
        clash = self.derived("The user said Bergen and Oslo", ["c0001", "c0001"],
                             level="contradiction")
        listed = inspector.at_level(b.ins, "contradiction", 1)
        self.assertEqual([i["id"] for i in listed["items"]], [clash])
        self.assertEqual(inspector.at_level(b.ins, "inductive", 1)["items"], [])
        self.assertIn("level must be one of", inspector.at_level(b.ins, "wrong", 1)["error"])


class CorrectExpiringTest(unittest.TestCase):
    """A memory remembered for a while, corrected or listed by level."""

    def setUp(self):
        self.bench = ExpiryBench(self)
        recaller = Recaller(lambda settings: self.bench.gateway)
        self.addCleanup(recaller.close)
        self.ins = Inspector(self.bench.ctx, recaller, TEMPLATE, clock=self.bench.clock)

    def test_the_right_one_keeps_the_wrong_ones_end(self):
        b = self.bench
        wrong = b.remember("The user is in Lisbon this week.", "7d")
        done = run_action("correct", {"id": wrong, "content": "The user is in Porto this week.",
                                      "confirm": True}, b.ctx)
        self.assertTrue(done.ok, done.text)
        right, = b.fake.conclusions
        self.assertIn((right, "pending", NOW + 7 * 86_400, 0, None), b.rows())
        self.assertIn("It expires when the wrong one would have", done.text)

    def test_a_listing_by_level_shows_the_time_left(self):
        self.bench.remember("The user is in Lisbon this week.", "2h")
        item, = inspector.at_level(self.ins, "explicit", 1)["items"]
        self.assertEqual(item["expires_in_s"], 7_200)


if __name__ == "__main__":
    unittest.main()
