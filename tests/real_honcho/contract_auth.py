"""The auth-on Honcho (HONCHO_REAL_AUTH_URL, admin key in HONCHO_REAL_ADMIN_KEY): a refused key is
our AuthError, delivery waits behind the auth circuit without burning attempts, and resumes once the
key the worker reads afresh is fixed; a key below workspace level cannot read through a scope."""

import os
import sqlite3
import unittest

import httpx
from real_kit import (
    AGENT,
    USER,
    fresh_workspace,
    real_gateway,
    real_settings,
    required_url,
    user_turns,
)

# isort: split
from outbox_helpers import ManualClock  # after real_kit, which puts tests/ on sys.path

from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.errors import AuthError
from honcho_hub.recall.recaller import Recaller


def required_admin_key() -> str:
    key = os.environ.get("HONCHO_REAL_ADMIN_KEY", "").strip()
    if not key:
        raise AssertionError("HONCHO_REAL_ADMIN_KEY is not set: export the auth-on server's "
                             "admin key (../shared/real-honcho: the state dir's admin_key file)")
    return key


def mint_key(url: str, admin: str, **scope: str) -> str:
    """A key limited to a workspace (and a peer), made by the server's admin-only key route."""
    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post("/v3/keys", params=scope,
                             headers={"Authorization": f"Bearer {admin}"})
    answer.raise_for_status()
    return answer.json()["key"]


class AuthCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url, cls.admin = required_url("HONCHO_REAL_AUTH_URL"), required_admin_key()
        cls.workspace_id = fresh_workspace(cls.__name__)

    def settings(self, secrets: dict, **plugin):
        return real_settings(self.addCleanup, self.url, self.workspace_id, secrets=secrets,
                             **plugin)

    def admin_gateway(self):
        return real_gateway(self.addCleanup, self.settings({"HONCHO_API_KEY": self.admin}))


class RefusedKeyTest(AuthCase):
    def test_a_wrong_missing_or_other_workspace_key_is_an_auth_error(self):
        self.assertNotIn("HONCHO_API_KEY", os.environ,
                         "the SDK would send HONCHO_API_KEY in place of no key")
        keys = {"wrong": "not-a-valid-key", "missing": "",
                "another workspace's": mint_key(self.url, self.admin,
                                                workspace_id="ct-someone-else")}
        for name, key in keys.items():
            with self.subTest(key=name):
                gateway = real_gateway(self.addCleanup, self.settings({"HONCHO_API_KEY": key}))
                with self.assertRaises(AuthError) as caught:
                    gateway.send(user_turns("chat-refused", ["hello"]))
                self.assertEqual(caught.exception.code, "auth_401")

    def test_the_admin_and_a_workspace_key_are_accepted(self):
        keys = {"admin": self.admin,
                "workspace": mint_key(self.url, self.admin, workspace_id=self.workspace_id)}
        for name, key in keys.items():
            with self.subTest(key=name):
                gateway = real_gateway(self.addCleanup, self.settings({"HONCHO_API_KEY": key}))
                gateway.send(user_turns(f"chat-{name}", ["hello"]))
                self.assertEqual(
                    gateway.existing_event_ids(f"chat-{name}", [f"ev_chat-{name}_u0000"]),
                    {f"ev_chat-{name}_u0000"})


class KeyRecoveryTest(AuthCase):
    def test_delivery_waits_behind_the_auth_circuit_and_resumes_with_the_fixed_key(self):
        secrets = {"HONCHO_API_KEY": "a-revoked-key"}
        settings = self.settings(secrets, auth_probe_interval_s=60)
        clock = ManualClock()
        capture = CaptureService(settings, clock=clock)
        self.addCleanup(capture.close)
        worker = DeliveryWorker(lambda: settings, clock=clock)
        self.addCleanup(worker.stop, 10)
        said = [("user", "I moved to Porto last week"), ("agent", "Noted, Porto."),
                ("user", "I work nights")]
        for n, (role, text) in enumerate(said):
            self.assertEqual(capture.capture(CaptureRequest("k1", Role(role), f"m{n}", text),
                                             settings).value,
                             "queued")
        worker.step()
        circuit = worker.state.circuit(settings.destination())
        self.assertEqual((circuit.kind, circuit.code), ("auth", "auth_401"))
        # Nothing dead, no attempt burned.
        self.assertEqual(self.rows(settings), [("pending", 0)] * 3)

        secrets["HONCHO_API_KEY"] = self.admin  # fixed under Settings → Secrets: no restart
        self.assertEqual(worker.step().state, "circuit_open")  # waits for the probe time
        clock.advance(61)
        self.assertEqual(worker.step().delivered, 3)
        self.assertIsNone(worker.state.circuit(settings.destination()).kind)
        gateway = self.admin_gateway()
        stored = gateway.call(lambda c: gateway.reader_session("chat-k1").messages()).items
        self.assertEqual([(m.peer_id, m.content) for m in stored],
                         [(USER if role == "user" else AGENT, text) for role, text in said])

    @staticmethod
    def rows(settings) -> list:
        conn = sqlite3.connect(settings.outbox_path)
        try:
            return conn.execute("SELECT state, attempts FROM events ORDER BY seq").fetchall()
        finally:
            conn.close()


class PeerKeyScopeTest(AuthCase):
    def test_a_peer_key_cannot_read_through_a_scope_so_recall_falls_back_and_says_so(self):
        admin = self.admin_gateway()
        admin.send(user_turns("chat-p", ["I like chess"], scope_id="proj-p"))
        peer_key = mint_key(self.url, self.admin, workspace_id=self.workspace_id, peer_id=AGENT)
        settings = self.settings({"HONCHO_API_KEY": peer_key}, recall_timeout_s=20,
                                 max_context_tokens=1000)
        recaller = Recaller()
        self.addCleanup(recaller.close)
        result = recaller.recall(settings, "chat-p", "what does the user like", "{{sections}}",
                                 "proj-p")
        self.assertEqual((result.source, recaller.scope_problem),
                         ("fresh", "scope unavailable: auth_401"))


if __name__ == "__main__":
    unittest.main()
