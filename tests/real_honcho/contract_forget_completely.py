"""Forgetting a chat completely against a real Honcho: what a dream derived from the chat's
conclusions, and the card facts it wrote from them, survive the session's delete; the forget records
the chat's conclusion ids first, finds what cites them and what matches its text, and removes those
on confirmation.

The server facts this rests on, each checked here: conclusions list workspace-wide with
`filters={"session_id": ...}`; a dream scheduled without a session stores its derived conclusions
under no session; they come back without `source_ids`, yet `{"source_ids": {"contains": [id]}}` (a
list) finds them, while the SDK's own `derived()` (a bare string) is refused with 422; deleting the
session deletes its explicit conclusions and leaves the derived ones.
"""

from real_kit import AGENT, USER, RealHonchoCase, await_derivation, conclusions_about

from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.chats.forget import DONE, forget_chat, forget_leftovers
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.errors import PermanentError

FORGOTTEN = ["I keep bees in the garden", "My dog is called Rex"]
KEPT = "I live in Oslo"


def citing(gateway, conclusion_ids: list[str]) -> list:
    """Every conclusion of the workspace that cites one of `conclusion_ids` (first 100)."""
    anyof = {"OR": [{"source_ids": {"contains": [cid]}} for cid in conclusion_ids]}
    return list(gateway.call(lambda c: c.conclusions.list(size=100, filters=anyof)).items)


def of_session(gateway, session_id: str) -> list:
    return list(gateway.call(lambda c: c.conclusions.list(
        size=100, filters={"session_id": session_id})).items)


def card(gateway) -> list[str]:
    return list(gateway.call(lambda c: gateway.reader_peer(AGENT).get_card(target=USER)) or [])


class Dreamt(RealHonchoCase):
    """One chat with two facts, another with one, a dream over both (a workspace for each test
    class); then chat fa is forgotten."""

    def setUp(self) -> None:
        self.settings_ = self.settings()
        self.gw = self.gateway()
        capture = CaptureService(self.settings_)
        self.addCleanup(capture.close)
        worker = DeliveryWorker(lambda: self.settings_)
        self.addCleanup(worker.stop, 10)
        said = [("fa", text) for text in FORGOTTEN] + [("fb", KEPT)]
        for n, (chat, text) in enumerate(said):
            self.assertEqual(capture.capture(CaptureRequest(chat, Role.USER, f"m{n}", text),
                                             self.settings_).value, "queued")
        self.assertEqual(worker.drain(30.0)["delivered"], 3)
        await_derivation(self.gw, "the three explicit conclusions",
                         until=lambda: len(conclusions_about(self.gw, AGENT, USER)) >= 3)
        self.gw.call(lambda c: c.schedule_dream(observer=AGENT, observed=USER))
        await_derivation(self.gw, "the dream's derived conclusions and card", until=lambda: (
            len([c for c in conclusions_about(self.gw, AGENT, USER) if c.level != "explicit"]) >= 2
            and len(card(self.gw)) >= 4))
        self.chat_conclusions = of_session(self.gw, "chat-fa")
        self.chat_ids = [c.id for c in self.chat_conclusions]


class ServerFactsTest(Dreamt):
    def test_the_server_lists_by_session_finds_citing_ones_by_a_list_and_keeps_them_on_delete(self):
        # each peer's own and the agent's of the user
        self.assertEqual(sorted((c.observer_id, c.observed_id, c.level)
                                for c in self.chat_conclusions),
                         [(AGENT, USER, "explicit")] * 2 + [(USER, USER, "explicit")] * 2)
        derived = citing(self.gw, self.chat_ids)
        self.assertEqual(sorted(c.level for c in derived), ["deductive", "inductive"])
        self.assertEqual({(c.session_id, c.source_ids) for c in derived}, {(None, None)},
                         "no session, and no source_ids in the answer")
        with self.assertRaises(PermanentError) as refused:
            self.gw.call(lambda c: c.conclusions.list(
                filters={"source_ids": {"contains": self.chat_ids[0]}}))
        self.assertEqual(refused.exception.code, "http_422", "a bare string is refused")
        self.assertEqual(self.gw.delete_session("chat-fa"), "accepted")
        await_derivation(self.gw, "the session's conclusions deleted",
                         until=lambda: not of_session(self.gw, "chat-fa"))
        self.assertEqual({c.id for c in citing(self.gw, self.chat_ids)}, {c.id for c in derived},
                         "the derived ones survive the session's delete")


class ForgetCompletelyTest(Dreamt):
    def test_forget_offers_the_derived_ones_and_matching_card_facts_and_removes_them(self):
        derived = {c.id for c in citing(self.gw, self.chat_ids)}
        report = forget_chat(self.settings_, "fa")
        self.assertEqual((report["state"], report["honcho"]), (DONE, {"chat-fa": "accepted"}))
        offered = report["leftovers"]
        self.assertEqual(offered["recorded"], 4)
        self.assertEqual({c["id"] for c in offered["conclusions"]}, derived)
        self.assertEqual(sorted(f["fact"] for f in offered["card_facts"]),
                         sorted(f"ATTRIBUTE: {text}" for text in FORGOTTEN))
        removed = forget_leftovers(self.settings_, "fa")
        self.assertEqual((removed["conclusions_removed"], removed["card_facts_removed"],
                          removed["not_removed"]), (2, 2, []))
        self.assertEqual(citing(self.gw, self.chat_ids), [], "nothing left citing the chat's ids")
        self.assertEqual(sorted(card(self.gw)), [f"ATTRIBUTE: {KEPT}", "IDENTITY: user"])
        self.assertEqual([c.content for c in of_session(self.gw, "chat-fb")],
                         [f"user said: {KEPT}"] * 2, "the other chat's conclusions stay")
