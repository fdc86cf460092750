"""Forgetting a chat completely (chats/leftovers.py): the chat's conclusion ids are recorded before
its session is deleted; afterwards the conclusions dreams derived from them and the card facts that
match its text are offered, removed only on confirmation, and what could not be removed is reported.
Through the function, the memory tool, the command line and the sidebar's API."""

import contextlib
import dataclasses
import io
import json
import os
import unittest

from delivery_helpers import Bench
from fake_honcho import FakeHoncho
from hub_testkit import stub_agent_zero
from loopback import serve
from outbox_helpers import event, temp_outbox_path

from honcho_hub.chats import leftovers
from honcho_hub.chats.forget import DONE, forget_chat, forget_leftovers, leftovers_text
from honcho_hub.cli import main as cli
from honcho_hub.storage.outbox import Outbox
from honcho_hub.tool.actions import ActionContext, run_action

AGENT, USER = "agent-zero", "user"


def seed(fake: FakeHoncho, workspace: str, cid: str, content: str, session: str | None,
         level: str = "explicit", sources: tuple[str, ...] = (), observer: str = AGENT) -> None:
    """A conclusion as Honcho holds it: explicit ones from a session's messages, derived ones (a
    dream's) under no session, citing their premises in `source_ids`."""
    fake.conclusions[cid] = {"id": cid, "content": content, "observer_id": observer,
                             "observed_id": USER, "session_id": session, "level": level,
                             "source_ids": list(sources) or None,
                             "created_at": "2026-01-01T00:00:00+00:00", "workspace_id": workspace}


def dreamt(fake: FakeHoncho, workspace: str) -> None:
    """Chat a said two things, chat b one; a dream derived one conclusion from a's, one from b's,
    one from both (and one from that), and wrote the card."""
    seed(fake, workspace, "ea1", "user said: I keep bees in the garden", "chat-a")
    seed(fake, workspace, "ea2", "user said: My dog is called Rex", "chat-a")
    seed(fake, workspace, "eb1", "user said: I live in Oslo", "chat-b")
    for cid, content, level, sources in (
            ("da1", "user keeps animals (deduction)", "deductive", ("ea1", "ea2")),
            ("db1", "user lives in Norway (deduction)", "deductive", ("eb1",)),
            ("dab", "user talks openly (induction)", "inductive", ("ea1", "eb1")),
            ("dd1", "user is outdoorsy (induction)", "inductive", ("da1",))):
        seed(fake, workspace, cid, content, None, level, sources)
    fake.cards[(AGENT, USER)] = ["IDENTITY: user", "ATTRIBUTE: I keep bees in the garden",
                                 "ATTRIBUTE: I live in Oslo", "ATTRIBUTE: Dog called Rex"]


def chat_a_bench(test: unittest.TestCase) -> Bench:
    bench = Bench(test)
    bench.say("a", 1)
    bench.say("b", 1)
    bench.run_until_idle()
    dreamt(bench.fake, bench.settings.workspace_id)
    return bench


def forget(bench: Bench, chat: str = "a") -> dict:
    return forget_chat(bench.settings, chat, gateway_factory=bench.gateway, clock=bench.clock)


def remove(bench: Bench, chat: str = "a") -> dict:
    return forget_leftovers(bench.settings, chat, gateway_factory=bench.gateway)


class CardFactMatchTest(unittest.TestCase):
    def test_a_card_fact_matches_a_conclusion_when_most_of_its_words_are_in_it(self):
        said = ["user said: I keep bees in the garden", "The user's dog is called Rex."]
        cases = {"ATTRIBUTE: I keep bees in the garden": True,
                 "Keeps bees": True,  # 'keeps' and 'keep' are one word here
                 "ATTRIBUTE: Dog called Rex": True,
                 "IDENTITY: user": False,  # one word, not the whole of a conclusion
                 "Bees": False,
                 "Lives in Oslo": False,
                 "Keeps bees and goats in Oslo": False,
                 "": False}
        for fact, expected in cases.items():
            with self.subTest(fact):
                self.assertEqual(leftovers.card_fact_matches(fact, said), expected)

    def test_the_peers_own_names_are_not_words_of_a_fact(self):
        said = ["user said: I keep bees"]
        self.assertTrue(leftovers.card_fact_matches("User keeps bees", said, ignored={"user"}))
        self.assertFalse(leftovers.card_fact_matches("IDENTITY: user", ["user is user"],
                                                     ignored={"user"}))

    def test_a_one_word_fact_matches_only_a_conclusion_saying_just_that(self):
        self.assertTrue(leftovers.card_fact_matches("ATTRIBUTE: Beekeeper",
                                                    ["user said: beekeeper"]))


class ForgetCompletelyTest(unittest.TestCase):
    def test_the_forget_offers_what_was_derived_from_the_chat_and_matching_card_facts(self):
        bench = chat_a_bench(self)
        report = forget(bench)
        self.assertEqual((report["state"], report["honcho"]), (DONE, {"chat-a": "accepted"}))
        offer = report["leftovers"]
        self.assertEqual(offer["recorded"], 2)
        self.assertEqual(sorted(c["id"] for c in offer["conclusions"]), ["da1", "dab", "dd1"],
                         "citing the chat's ids, and what was derived from those in turn")
        self.assertEqual([f["fact"] for f in offer["card_facts"]],
                         ["ATTRIBUTE: I keep bees in the garden", "ATTRIBUTE: Dog called Rex"])
        self.assertFalse(offer["more"])
        self.assertEqual(sorted(bench.fake.conclusions), ["da1", "dab", "db1", "dd1", "eb1"],
                         "the session's own went with it; nothing else deleted unasked")
        self.assertEqual(len(bench.fake.cards[(AGENT, USER)]), 4)

    def test_the_offer_shows_honchos_text_inert_redacted_and_bounded(self):
        # The sidebar lists the offer as it comes (JSON to the page): each text made safe there.
        bench = chat_a_bench(self)
        token = "ghp_" + "Q1w2E3r4T5" * 4
        seed(bench.fake, bench.settings.workspace_id, "dx1",
             f"user's token is {token} <b>bold</b>\n# Operator " + "long " * 2000, None,
             "deductive", ("ea1",))
        bench.fake.cards[(AGENT, USER)].append(f"ATTRIBUTE: I keep bees {token}")
        bench.fake.conclusions["ea1"]["content"] += f" {token}"
        offer = forget(bench)["leftovers"]
        shown = next(c["content"] for c in offer["conclusions"] if c["id"] == "dx1")
        self.assertFalse(token in json.dumps(offer), "a credential would reach the page")
        self.assertNotIn("<b>", shown)
        self.assertNotIn("\n", shown)
        self.assertLessEqual(len(shown), leftovers.SHOWN_CHARS)

    def test_on_confirmation_the_offered_ones_are_removed_and_the_rest_of_the_card_kept(self):
        bench = chat_a_bench(self)
        forget(bench)
        report = remove(bench)
        self.assertEqual((report["conclusions_removed"], report["card_facts_removed"],
                          report["not_removed"]), (3, 2, []))
        self.assertEqual(sorted(bench.fake.conclusions), ["db1", "eb1"])
        self.assertEqual(bench.fake.cards[(AGENT, USER)],
                         ["IDENTITY: user", "ATTRIBUTE: I live in Oslo"])
        self.assertIn("removed 3 derived conclusions and 2 card facts", leftovers_text(report))
        self.assertEqual(remove(bench), {"chat_id": "a", "error": "nothing_offered"},
                         "an offer is taken once")

    def test_what_could_not_be_removed_is_reported(self):
        bench = chat_a_bench(self)
        forget(bench)
        bench.fake.fail(r"/conclusions/dab$", status=503)
        bench.fake.fail(r"/peers/agent-zero/card$", status=503)
        report = remove(bench)
        self.assertEqual(report["conclusions_removed"], 2)
        self.assertEqual(report["not_removed"],
                         [{"conclusion": "dab", "code": "http_503"},
                          {"card": f"{AGENT} about {USER}", "facts": 2, "code": "http_503"}])
        text = leftovers_text(report)
        self.assertIn("NOT removed: conclusion dab (http_503)", text)
        self.assertIn(f"NOT removed: 2 facts of the card of {AGENT} about {USER} (http_503)", text)

    def test_what_was_not_removed_is_offered_again_and_a_second_removal_takes_it(self):
        bench = chat_a_bench(self)
        forget(bench)
        bench.fake.fail(r"/conclusions/dab$", status=503)
        self.assertEqual(remove(bench)["conclusions_removed"], 2)
        again = remove(bench)
        self.assertEqual((again["conclusions_removed"], again["card_facts_removed"],
                          again["not_removed"]), (1, 0, []))
        self.assertEqual(sorted(bench.fake.conclusions), ["db1", "eb1"])

    def test_an_offer_is_removed_only_where_it_was_made(self):
        # The same chat id in another workspace (the settings changed before the confirmation):
        # its cards may hold facts of the same text, which are not the offered ones.
        bench = chat_a_bench(self)
        forget(bench)
        elsewhere = dataclasses.replace(bench.settings, workspace_id="another-workspace")
        self.assertEqual(forget_leftovers(elsewhere, "a", gateway_factory=bench.gateway),
                         {"chat_id": "a", "error": "nothing_offered"})
        self.assertEqual(len(bench.fake.cards[(AGENT, USER)]), 4)
        self.assertEqual(remove(bench)["conclusions_removed"], 3, "still offered where made")

    def test_a_conclusion_deleted_meanwhile_counts_as_gone_not_failed(self):
        bench = chat_a_bench(self)
        forget(bench)
        del bench.fake.conclusions["dd1"]
        report = remove(bench)
        self.assertEqual((report["conclusions_removed"], report["conclusions_gone"],
                          report["not_removed"]), (2, 1, []))

    def test_when_the_record_cannot_be_read_the_chat_is_still_forgotten_and_that_is_said(self):
        bench = chat_a_bench(self)
        bench.fake.fail(r"/conclusions/list$", status=503)
        report = forget(bench)
        self.assertEqual((report["state"], report["honcho"]), (DONE, {"chat-a": "accepted"}))
        self.assertEqual(report["leftovers"]["error"], "http_503")
        self.assertIn("what dreams derived from it could not be looked for (http_503)",
                      leftovers_text(report))

    def test_the_search_is_bounded_and_says_when_more_may_exist(self):
        bench = Bench(self)
        bench.say("a", 1)
        bench.run_until_idle()
        ws = bench.settings.workspace_id
        seed(bench.fake, ws, "ea1", "user said: something", "chat-a")
        for n in range(leftovers.MAX_OFFERED + 5):
            seed(bench.fake, ws, f"d{n:04d}", f"derived {n}", None, "deductive", ("ea1",))
        offer = forget(bench)["leftovers"]
        self.assertEqual((len(offer["conclusions"]), offer["more"]),
                         (leftovers.MAX_OFFERED, True))

    def test_nothing_derived_nothing_offered(self):
        bench = Bench(self)
        bench.say("a", 1)
        bench.run_until_idle()
        report = forget(bench)
        self.assertEqual(report["leftovers"], {"recorded": 0, "conclusions": [], "card_facts": [],
                                               "more": False})
        self.assertNotIn("derived", leftovers_text(report))


class ForgetCompletelyToolTest(unittest.TestCase):
    def setUp(self):
        self.bench = chat_a_bench(self)
        gateway = self.bench.gateway(self.bench.settings)
        self.addCleanup(gateway.close)
        self.ctx = ActionContext(settings=self.bench.settings, session_id="chat-a",
                                 gateway=gateway, chat_id="a")

    def test_the_tool_offers_the_leftovers_then_removes_them_only_with_confirm(self):
        done = run_action("forget_chat", {"confirm": True}, self.ctx)
        self.assertIn("3 conclusions derived from this chat and 2 card facts matching it are"
                      " still in Honcho", done.text)
        self.assertIn("[da1] user keeps animals (deduction)", done.text)
        self.assertIn('"leftovers": "remove"', done.text)
        refused = run_action("forget_chat", {"leftovers": "remove"}, self.ctx)
        self.assertIn("Not removed. Ask the user to confirm", refused.text)
        self.assertEqual(len(self.bench.fake.conclusions), 5)
        removed = run_action("forget_chat", {"leftovers": "remove", "confirm": True}, self.ctx)
        self.assertTrue(removed.ok)
        self.assertIn("removed 3 derived conclusions and 2 card facts", removed.text)
        self.assertEqual(sorted(self.bench.fake.conclusions), ["db1", "eb1"])


class ForgetCompletelyCommandTest(unittest.TestCase):
    def setUp(self):
        self.server = serve(FakeHoncho())
        self.addCleanup(self.server.close)
        self.path = temp_outbox_path(self)
        self.env = {"HONCHO_API_URL": self.server.url, "HONCHO_OUTBOX_PATH": self.path,
                    "HOME": os.path.dirname(self.path)}
        settings = cli.load_settings(None, self.env)
        box = Outbox(self.path)
        queued = event(1, "chat-a", dest=settings.destination())
        queued.chat_id = "a"
        box.enqueue_batches([[queued]])
        box.close()
        self.server.fake._ensure_session(settings.workspace_id, "chat-a")
        dreamt(self.server.fake, settings.workspace_id)

    def run_cli(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["forget-chat", *args], environ=self.env, out=out)
        return code, out.getvalue(), err.getvalue()

    def test_completely_removes_the_leftovers_in_the_same_run(self):
        code, out, _ = self.run_cli("a", "--yes", "--completely", "--json")
        report = json.loads(out)
        self.assertEqual((code, report["state"], report["removed"]["conclusions_removed"],
                          report["removed"]["card_facts_removed"]), (0, DONE, 3, 2))
        self.assertEqual(sorted(self.server.fake.conclusions), ["db1", "eb1"])

    def test_completely_exits_3_when_what_survives_could_not_be_looked_for(self):
        self.server.fake.fail(r"/workspaces/[^/]+/conclusions/list$", status=503)
        code, out, _ = self.run_cli("a", "--yes", "--completely")
        self.assertIn("could not be looked for (http_503)", out)
        self.assertEqual(code, cli.EXIT_DEGRADED, "not done completely, as asked")

    def test_without_completely_the_leftovers_are_listed_and_kept(self):
        code, out, _ = self.run_cli("a", "--yes")
        self.assertEqual(code, 0)
        self.assertIn("3 conclusions derived from this chat and 2 card facts matching it are"
                      " still in Honcho", out)
        self.assertIn("--completely", out)
        self.assertEqual(len(self.server.fake.conclusions), 5)


class ForgetCompletelySidebarTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.server = serve(FakeHoncho())
        self.addCleanup(self.server.close)
        self.host.config = {**self.host.config, "api_url": self.server.url}
        from usr.plugins.honcho.extensions.honcho_bridge import operations
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import global_settings
        from usr.plugins.honcho.honcho_hub import hub
        from usr.plugins.honcho.honcho_hub.storage.outbox import Outbox as HostOutbox

        self.addCleanup(hub.shutdown)
        self.operations = operations
        settings = global_settings()
        box = HostOutbox.for_settings(settings)
        queued = event(1, "chat-a", dest=settings.destination())
        queued.chat_id = "a"
        box.enqueue_batches([[queued]])
        box.close()
        self.server.fake._ensure_session(settings.workspace_id, "chat-a")
        dreamt(self.server.fake, settings.workspace_id)

    def test_the_answer_carries_the_offer_and_a_confirmed_second_call_removes_it(self):
        done = self.operations.forget_document({"action": "forget_chat", "chat": "a",
                                                "confirmed": True})
        self.assertIn("3 conclusions derived from this chat and 2 card facts matching it are"
                      " still in Honcho.", done["text"])
        self.assertNotIn("da1", done["text"], "the toast counts; the sidebar lists them")
        self.assertEqual(sorted(c["id"] for c in done["result"]["leftovers"]["conclusions"]),
                         ["da1", "dab", "dd1"])
        refused = self.operations.forget_document({"action": "forget_leftovers", "chat": "a"})
        self.assertEqual(refused["ok"], False)
        self.assertIn("confirm", refused["error"])
        removed = self.operations.forget_document({"action": "forget_leftovers", "chat": "a",
                                                   "confirmed": True})
        self.assertEqual((removed["ok"], removed["result"]["conclusions_removed"],
                          removed["result"]["card_facts_removed"]), (True, 3, 2))
        self.assertEqual(sorted(self.server.fake.conclusions), ["db1", "eb1"])
