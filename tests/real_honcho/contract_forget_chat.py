"""Forgetting a chat against a real Honcho: deleting a session answers 202 and the session is gone
from listings at once and its messages soon after (Honcho deletes them in the background), a second
delete answers 404 (the gateway's "gone"), and a forgotten chat's later messages land in a new
session."""

import threading
import time

import httpx
from real_kit import RealHonchoCase, turns

from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.chats.forget import DONE, forget_chat
from honcho_hub.delivery.worker import DeliveryWorker

GONE_WITHIN_S = 30.0  # measured: the messages were gone about a second after the 202


def session_ids(gateway) -> set[str]:
    return {s.id for s in gateway.call(lambda c: c.sessions(size=100)).items}


def message_count(gateway, session_id: str) -> int:
    return len(gateway.call(lambda c: gateway.reader_session(session_id).messages(size=100)).items)


def eventually_empty(gateway, session_id: str) -> int:
    """The session's message count once it reached 0, or the last count after GONE_WITHIN_S."""
    deadline, pause = time.monotonic() + GONE_WITHIN_S, threading.Event()
    while True:
        count = message_count(gateway, session_id)
        if count == 0 or time.monotonic() >= deadline:
            return count
        pause.wait(0.25)


class SessionDeleteTest(RealHonchoCase):
    quiet = True

    def test_delete_answers_202_then_the_session_is_gone_and_a_second_delete_answers_404(self):
        gateway = self.gateway()
        gateway.send(turns("forget-raw", ["a fact to forget", "Noted."]))
        with httpx.Client(base_url=self.url, timeout=30.0) as raw:
            answer = raw.delete(f"/v3/workspaces/{self.workspace_id}/sessions/forget-raw")
            self.assertEqual((answer.status_code, answer.json()),
                             (202, {"message": "Session deleted successfully"}))
            self.assertNotIn("forget-raw", session_ids(gateway), "gone from the listing at once")
            self.assertEqual(eventually_empty(gateway, "forget-raw"), 0)
            again = raw.delete(f"/v3/workspaces/{self.workspace_id}/sessions/forget-raw")
            self.assertEqual(again.status_code, 404)

    def test_the_gateway_says_accepted_then_gone(self):
        gateway = self.gateway()
        gateway.send(turns("forget-gw", ["another fact"]))
        self.assertEqual(gateway.delete_session("forget-gw"), "accepted")
        self.assertEqual(gateway.delete_session("forget-gw"), "gone")
        self.assertEqual(gateway.delete_session("forget-never-was"), "gone")


class ForgetChatTest(RealHonchoCase):
    quiet = True

    def test_a_forgotten_chats_session_is_deleted_and_its_later_messages_go_to_a_new_session(self):
        settings = self.settings()
        capture = CaptureService(settings)
        self.addCleanup(capture.close)
        worker = DeliveryWorker(lambda: settings)
        self.addCleanup(worker.stop, 10)
        for n, text in enumerate(["I keep bees", "Bees are good."]):
            role = Role.USER if n == 0 else Role.AGENT
            self.assertEqual(capture.capture(CaptureRequest("fc1", role, f"m{n}", text),
                                             settings).value, "queued")
        self.assertEqual(worker.drain(30.0)["delivered"], 2)
        gateway = self.gateway()
        self.assertEqual(message_count(gateway, "chat-fc1"), 2)
        report = forget_chat(settings, "fc1")
        self.assertEqual((report["state"], report["honcho"], report["next_session"]),
                         (DONE, {"chat-fc1": "accepted"}, "chat1-fc1"))
        self.assertNotIn("chat-fc1", session_ids(gateway))
        self.assertEqual(eventually_empty(gateway, "chat-fc1"), 0)
        self.assertEqual(capture.capture(CaptureRequest("fc1", Role.USER, "m2", "later words"),
                                         settings).value,
                         "queued")
        self.assertEqual(worker.drain(30.0)["delivered"], 1)
        self.assertEqual(message_count(gateway, "chat1-fc1"), 1)
        self.assertNotIn("chat-fc1", session_ids(gateway),
                         "nothing recreated the forgotten session")
