"""Forgetting a chat (chats/forget.py): its rows leave the outbox and other chats' stay, a send on
the wire is waited for and nothing of the chat goes out after, its Honcho session is deleted, its
later messages go to a new session; the command line refuses without --yes."""

import contextlib
import io
import json
import os
import sqlite3
import tempfile
import threading
import unittest

from delivery_helpers import Bench
from fake_honcho import FakeHoncho
from hub_testkit import import_by_path, stub_agent_zero
from loopback import serve
from outbox_helpers import event, lease, on_disk, settle, temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.chats.forget import DONE, HONCHO_FAILED, SENDING, forget_chat
from honcho_hub.cli import main as cli
from honcho_hub.errors import ForgetRefused
from honcho_hub.storage.outbox import Outbox, Retry, Settlement
from honcho_hub.tool.actions import ActionContext, run_action

WAIT_S = 10.0  # a test's bound on what a real thread does; never reached when the code is right


def rows_by_session(bench: Bench) -> dict[str, dict[str, int]]:
    conn = sqlite3.connect(bench.path)
    try:
        found: dict[str, dict[str, int]] = {}
        for session, state, count in conn.execute(
                "SELECT session_id, state, count(*) FROM events GROUP BY session_id, state"):
            found.setdefault(session, {})[state] = count
        return found
    finally:
        conn.close()


def mapped_chats(bench: Bench) -> set[tuple[str, str]]:
    conn = sqlite3.connect(bench.path)
    try:
        return set(conn.execute("SELECT chat_id, session_id FROM chat_sessions").fetchall())
    finally:
        conn.close()


def forget(bench: Bench, chat: str, **options):
    return forget_chat(bench.settings, chat, gateway_factory=bench.gateway, clock=bench.clock,
                       **options)



def event_count(path: str) -> int:
    """Rows of the outbox's events table."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        conn.close()


class ForgetChatTest(unittest.TestCase):
    def test_the_chats_rows_are_deleted_other_chats_rows_kept_and_its_honcho_session_deleted(self):
        bench = Bench(self)
        bench.say("a", 2)
        kept = bench.say("b", 2)
        bench.run_until_idle()  # delivered rows of both chats stay for delivered_retention_h
        bench.say("a", 1)
        later_b = bench.say("b", 1)
        self.assertEqual(rows_by_session(bench), {"chat-a": {"delivered": 2, "pending": 1},
                                                  "chat-b": {"delivered": 2, "pending": 1}})
        report = forget(bench, "a")
        self.assertEqual((report["state"], report["rows_deleted"], report["sessions"],
                          report["honcho"]),
                         (DONE, 3, ["chat-a"], {"chat-a": "accepted"}))
        self.assertEqual(rows_by_session(bench), {"chat-b": {"delivered": 2, "pending": 1}})
        self.assertEqual(mapped_chats(bench), {("b", "chat-b")})
        self.assertEqual(bench.fake.deleted_sessions, ["chat-a"])
        self.assertEqual(bench.fake.session_messages("chat-a"), [])
        bench.run_until_idle()
        bench.assert_exactly_once("b", kept + later_b)
        self.assertEqual(bench.fake.session_messages("chat-a"), [],
                         "nothing of the forgotten chat sent after")

    def test_the_forgotten_chats_text_is_left_neither_in_the_outbox_file_nor_in_its_wal(self):
        bench = Bench(self)
        bench.say("a", 2, text="FORGOTTEN-TEXT")
        bench.run_until_idle()  # delivered rows, kept for delivered_retention_h
        bench.say("a", 1, text="FORGOTTEN-TEXT")  # and one still queued
        kept = bench.say("b", 1, text="KEPT-TEXT")
        self.assertEqual(forget(bench, "a")["state"], DONE)
        sizes, texts = on_disk(bench.path)
        for suffix, data in texts.items():
            self.assertFalse(b"FORGOTTEN-TEXT" in data,
                             f"forgotten text found in {suffix or 'the main file'}")
        self.assertTrue(kept[0].encode() in texts[""] + texts["-wal"], "the other chat's row stays")

    def test_a_send_in_flight_is_awaited_then_the_session_deleted_and_the_chat_sends_no_more(self):
        cases = {"the send succeeds": None, "the send fails and would be retried": 503}
        for name, status in cases.items():
            with self.subTest(name):
                self._forget_during_a_send(status)

    def _forget_during_a_send(self, status: int | None) -> None:
        """A real worker thread sends chat a's batch through a gated transport; the chat is
        forgotten while the request is held (its answer then `status`, or stored)."""
        bench = Bench(self)
        bench.say("a", 2)
        on_wire, release, waiting = threading.Event(), threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def hold(request) -> None:
            if request.url.path.endswith("/sessions/chat-a/messages"):
                on_wire.set()
                release.wait(WAIT_S)
                if status:
                    bench.fake.fail(r"/sessions/chat-a/messages$", status=status)

        bench.on_request = hold
        bench.worker.start()
        self.assertTrue(on_wire.wait(WAIT_S), "the worker sent the chat's batch")
        result: dict = {}
        forgetting = threading.Thread(target=lambda: result.update(
            forget(bench, "a", on_waiting=lambda leased: waiting.set())))
        forgetting.start()
        self.assertTrue(waiting.wait(WAIT_S), "the forget waits for the leased rows")
        self.assertTrue(forgetting.is_alive())
        self.assertEqual(bench.fake.deleted_sessions, [], "not deleted under a send on the wire")
        release.set()
        forgetting.join(WAIT_S)
        self.assertFalse(forgetting.is_alive())
        self.assertEqual((result["state"], result["waited_for"], result["honcho"]),
                         (DONE, 2, {"chat-a": "accepted"}))
        self.assertEqual(rows_by_session(bench), {})
        bench.on_request = None
        bench.worker.drain(WAIT_S)  # whatever the worker would still do
        deleted_at = next(i for i, r in enumerate(bench.sent) if r.method == "DELETE")
        after = [r.url.path for r in bench.sent[deleted_at + 1:]
                 if "/sessions/chat-a" in r.url.path]
        self.assertEqual(after, [], "nothing of the chat reached Honcho after its deletion")
        self.assertEqual(bench.fake.session_messages("chat-a"), [])
        bench.worker.stop(WAIT_S)

    def test_a_timed_out_wait_deletes_nothing_in_honcho_leases_nothing_again_2nd_forget_ends(self):
        bench = Bench(self)
        bench.say("a", 2)
        bench.say("b", 1)
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        # a live worker elsewhere: its lease has not run out
        held = lease(box, "another-process", 10)
        self.assertEqual({e.session_id for e in held}, {"chat-a"})
        report = forget(bench, "a", wait_s=0)
        self.assertEqual((report["state"], report["still_sending"], report["honcho"]),
                         (SENDING, 2, {}))
        self.assertEqual(bench.fake.deleted_sessions, [])
        # Its send failed and it gives the rows back for a retry: the lease skips the forgotten
        # session.
        settle(box, "another-process", Settlement(
            retries=[Retry([e.id for e in held], bench.clock(), "http_503", True)]))
        self.assertEqual(bench.worker.step().leased, 1, "only chat b's row")
        again = forget(bench, "a", wait_s=0)
        self.assertEqual((again["state"], again["rows_deleted"]), (DONE, 2))
        self.assertEqual(set(again["sessions"]), {"chat-a", "chat1-a"})
        # never sent anything there
        self.assertEqual(again["honcho"], {"chat-a": "gone", "chat1-a": "gone"})
        self.assertNotIn("chat-a", rows_by_session(bench))

    def test_a_lease_whose_holder_died_is_not_waited_for(self):
        bench = Bench(self)
        bench.say("a", 2)
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        lease(box, "dead-process", 10, lease_s=60.0)
        bench.clock.advance(61.0)
        report = forget(bench, "a", wait_s=0)
        self.assertEqual((report["state"], report["rows_deleted"], report["waited_for"]),
                         (DONE, 2, 0))

    def test_later_messages_of_the_chat_go_to_a_new_session_each_forget(self):
        bench = Bench(self)
        bench.say("a", 1)
        bench.run_until_idle()
        self.assertEqual(forget(bench, "a")["next_session"], "chat1-a")
        bench.clock.advance(1.0)
        later = bench.say("a", 1)
        bench.run_until_idle()
        self.assertEqual([m["content"] for m in bench.fake.session_messages("chat1-a")], later)
        self.assertEqual(bench.fake.session_messages("chat-a"), [])
        self.assertEqual(mapped_chats(bench), {("a", "chat1-a")})
        second = forget(bench, "a")
        self.assertEqual((second["sessions"], second["honcho"], second["next_session"]),
                         (["chat1-a"], {"chat1-a": "accepted"}, "chat2-a"))
        bench.clock.advance(1.0)
        bench.say("a", 1)
        self.assertEqual(set(rows_by_session(bench)), {"chat2-a"})

    def test_a_message_captured_before_the_forget_and_queued_after_it_is_not_queued(self):
        bench = Bench(self)
        outcome = bench.capture_service.accept(
            CaptureRequest("a", Role.USER, "s1", "said just before"), bench.settings)
        # in the journal; the writer has not queued it yet
        self.assertEqual(outcome.value, "accepted")
        forget(bench, "a")
        bench.capture_service.write_pending(bench.settings)
        self.assertEqual(rows_by_session(bench), {})
        self.assertEqual(bench.capture_service.backlog(), 0, "it left the journal")

    def test_a_session_shared_with_other_chats_is_left_alone(self):
        bench = Bench(self, session_strategy="per-project")
        request = CaptureRequest("a", Role.USER, "s1", "in a project", project="Alpha")
        self.assertEqual(bench.capture_service.capture(request, bench.settings).value, "queued")
        bench.say("a", 1)  # and one outside the project: the chat's own session
        report = forget(bench, "a")
        self.assertEqual((report["sessions"], report["shared_sessions"]),
                         (["chat-a"], ["project-Alpha"]))
        self.assertEqual(rows_by_session(bench), {"project-Alpha": {"pending": 1}})
        self.assertNotIn("project-Alpha", report["honcho"])

    def test_a_honcho_failure_is_reported_and_a_second_forget_deletes_the_session(self):
        bench = Bench(self)
        bench.say("a", 1)
        bench.run_until_idle()
        bench.fake.fail(r"/sessions/chat-a$", status=503)
        first = forget(bench, "a")
        self.assertEqual((first["state"], first["honcho"]), (HONCHO_FAILED, {"chat-a": "http_503"}))
        second = forget(bench, "a")
        self.assertEqual((second["state"], second["honcho"]["chat-a"]), (DONE, "accepted"))
        self.assertEqual(bench.fake.deleted_sessions, ["chat-a"])

    def test_a_chat_id_that_cannot_be_one_is_refused_and_nothing_changes(self):
        bench = Bench(self)
        bench.say("a", 1)
        for bad in ("", "   ", None, 7, "x" * 257, "a\nb"):
            with self.subTest(repr(bad)[:20]), self.assertRaises(ForgetRefused):
                forget(bench, bad)
        self.assertEqual(rows_by_session(bench), {"chat-a": {"pending": 1}})


OFFER_EXT = ("extensions/python/_functions/agent/AgentContext/remove/end/"
             "_50_honcho_forget_offer.py")

# Agent Zero's callers of AgentContext.remove, as their frames look: the chat-delete handler, and
# the external API's expiry/termination, which must make no offer. Compiled under the host's file
# names (no file needed).
CALLERS = """
class {cls}:
    def process(self, remove):
        return remove()
"""


def called_from(path: str, cls: str, remove):
    namespace: dict = {}
    exec(compile(CALLERS.format(cls=cls), path, "exec"), namespace)
    return namespace[cls]().process(remove)


class ChatDeleteOfferTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.server = serve(FakeHoncho())
        self.addCleanup(self.server.close)
        self.host.config = {**self.host.config, "api_url": self.server.url}
        module = import_by_path(os.path.join(self.host.plugin_dir, OFFER_EXT))
        self.extension = module.HonchoForgetOffer
        from usr.plugins.honcho.extensions.honcho_bridge import operations
        from usr.plugins.honcho.extensions.honcho_bridge.process_hub import global_settings
        from usr.plugins.honcho.honcho_hub import hub
        from usr.plugins.honcho.honcho_hub.storage.outbox import Outbox as HostOutbox

        self.addCleanup(hub.shutdown)
        self.operations = operations
        settings = global_settings()
        box = HostOutbox.for_settings(settings)
        queued = event(1, "chat-Ab3dE6gH", dest=settings.destination())
        queued.chat_id = "Ab3dE6gH"
        box.enqueue_batches([[queued]])
        box.close()
        self.path = settings.outbox_path

    def removed(self, path: str, cls: str, chat: str = "Ab3dE6gH") -> None:
        data = {"args": (chat,), "kwargs": {}, "result": None, "exception": None}
        called_from(path, cls, lambda: self.extension(agent=None).execute(data=data))

    def rows(self) -> int:
        return event_count(self.path)

    def test_the_chat_delete_action_records_an_offer_and_deletes_nothing(self):
        self.removed(os.path.join(os.sep, "a0", "api", "chat_remove.py"), "RemoveChat")
        offers = self.operations.forget_document({"action": "offers"})["offers"]
        self.assertEqual([o["chat_id"] for o in offers], ["Ab3dE6gH"])
        self.assertEqual(self.rows(), 1)
        self.assertEqual(self.server.fake.requests, [])

    def test_other_removals_make_no_offer(self):
        cases = {"the external API's chat expiry": ("api_message.py", "ApiMessage"),
                 "the external API's terminate": ("api_terminate_chat.py", "ApiTerminateChat"),
                 "a class named like the handler elsewhere": ("chat_remove_copy.py", "RemoveChat")}
        for name, (file, cls) in cases.items():
            with self.subTest(name):
                self.removed(os.path.join(os.sep, "a0", "api", file), cls)
                self.assertEqual(
                    self.operations.forget_document({"action": "offers"})["offers"], [])

    def test_the_offer_is_forgotten_only_when_confirmed(self):
        self.removed(os.path.join(os.sep, "a0", "api", "chat_remove.py"), "RemoveChat")
        refused = self.operations.forget_document({"action": "forget_chat", "chat": "Ab3dE6gH"})
        self.assertEqual((refused["ok"], self.rows(), self.server.fake.requests), (False, 1, []))
        self.assertIn("confirm", refused["error"])
        done = self.operations.forget_document({"action": "forget_chat", "chat": "Ab3dE6gH",
                                                "confirmed": True})
        self.assertEqual((done["ok"], done["result"]["honcho"], self.rows()),
                         (True, {"chat-Ab3dE6gH": "gone"}, 0))
        self.assertEqual(self.operations.forget_document({"action": "offers"})["offers"], [],
                         "the offer is withdrawn")

    def test_an_offer_can_be_dismissed(self):
        self.removed(os.path.join(os.sep, "a0", "api", "chat_remove.py"), "RemoveChat")
        self.assertEqual(self.operations.forget_document({"action": "dismiss", "chat": "Ab3dE6gH"}),
                         {"ok": True, "dismissed": True})
        self.assertEqual((self.operations.forget_document({"action": "offers"})["offers"],
                          self.rows()), ([], 1))


class ForgetChatToolTest(unittest.TestCase):
    def test_the_tool_forgets_its_chat_only_with_confirm_true(self):
        bench = Bench(self)
        bench.say("a", 1)
        bench.run_until_idle()
        gateway = bench.gateway(bench.settings)
        self.addCleanup(gateway.close)
        ctx = ActionContext(settings=bench.settings, session_id="chat-a", gateway=gateway,
                            chat_id="a")
        for args in ({}, {"confirm": False}, {"confirm": "no"}):
            with self.subTest(args=args):
                refused = run_action("forget_chat", args, ctx)
                self.assertIn("Not forgotten. Ask the user to confirm", refused.text)
        self.assertEqual((rows_by_session(bench), bench.fake.deleted_sessions),
                         ({"chat-a": {"delivered": 1}}, []))
        done = run_action("forget_chat", {"confirm": True}, ctx)
        self.assertTrue(done.ok)
        self.assertIn("Honcho session chat-a: deletion accepted", done.text)
        self.assertEqual((rows_by_session(bench), bench.fake.deleted_sessions), ({}, ["chat-a"]))

    def test_outside_a_chat_the_tool_refuses(self):
        bench = Bench(self)
        result = run_action("forget_chat", {"confirm": True},
                            ActionContext(settings=bench.settings))
        self.assertEqual((result.ok, result.text),
                         (False, "honcho_memory: forget_chat works inside a chat; this call"
                                 " has none."))


class ForgetChatCommandTest(unittest.TestCase):
    def setUp(self):
        self.server = serve(FakeHoncho())
        self.addCleanup(self.server.close)
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.path = temp_outbox_path(self)
        self.env = {"HONCHO_API_URL": self.server.url, "HONCHO_OUTBOX_PATH": self.path,
                    "HOME": folder.name}
        box = Outbox(self.path)
        queued = event(1, "chat-c1", dest=cli.load_settings(None, self.env).destination())
        queued.chat_id = "c1"
        box.enqueue_batches([[queued]])
        box.close()

    def run_cli(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["forget-chat", *args], environ=self.env, out=out)
        return code, out.getvalue(), err.getvalue()

    def rows(self) -> int:
        return event_count(self.path)

    def test_without_yes_it_refuses_and_nothing_is_forgotten(self):
        code, out, err = self.run_cli("c1")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("add --yes", err)
        self.assertEqual(self.rows(), 1)
        self.assertEqual(self.server.fake.requests, [])

    def test_with_yes_it_forgets_the_chat(self):
        code, out, err = self.run_cli("c1", "--yes", "--json")
        report = json.loads(out)
        self.assertEqual((code, report["state"], report["rows_deleted"]), (0, DONE, 1))
        self.assertEqual(self.rows(), 0)
        self.assertEqual([m for m, p in self.server.fake.requests
                          if p.endswith("/sessions/chat-c1")], ["DELETE"])
        self.assertNotIn(self.path, out + err)


if __name__ == "__main__":
    unittest.main()
