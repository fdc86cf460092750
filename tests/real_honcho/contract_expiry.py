"""Memories that expire against a real Honcho: a conclusion created takes no metadata (so the
lifetime is kept only in the local outbox), and the sweep's delete removes an expired conclusion;
one deleted already (a second delete of the same id) is answered 404 and counted as deleted."""

import unittest

import httpx
from real_kit import AGENT, USER, RealHonchoCase, admin_key, conclusions_about, user_turns

# isort: split
from outbox_helpers import ManualClock  # after real_kit, which puts tests/ on sys.path

from honcho_hub.delivery import expiry
from honcho_hub.storage import memory_log
from honcho_hub.storage.db import Database
from honcho_hub.tool.actions import ActionContext, run_action


class ExpiryContractTest(RealHonchoCase):
    quiet = True  # no derivation: only the tool's own conclusions are there

    def setUp(self):
        self.settings_ = self.settings()
        self.gw = self.gateway()
        self.gw.send(user_turns("chat-expiry", ["hello"]))  # the peers exist
        self.clock = ManualClock()

    def db(self):
        return Database.for_settings(self.settings_, clock=self.clock)

    def keep(self, write):
        db = self.db()
        try:
            memory_log.record(db, write)
        finally:
            db.close()

    def remember(self, content):
        ctx = ActionContext(settings=self.settings_, gateway=self.gw, record=self.keep)
        result = run_action("remember", {"content": content, "expires_in": "1m"}, ctx)
        self.assertTrue(result.ok, result.text)
        return result.text.split("conclusion ", 1)[1].split(".", 1)[0]

    def sweep(self):
        db = self.db()
        try:
            return expiry.sweep(db, self.gw, self.settings_, "contract")
        finally:
            db.close()

    def test_a_conclusion_created_with_metadata_keeps_none(self):
        # Straight over HTTP: the SDK's own parameters have no metadata field to send.
        with httpx.Client(base_url=self.url, timeout=30, headers=self.auth()) as http:
            made = http.post(f"/v3/workspaces/{self.workspace_id}/conclusions",
                             json={"conclusions": [{"content": "with metadata",
                                                    "observer_id": AGENT, "observed_id": USER,
                                                    "metadata": {"expires_at": 1}}]})
            self.assertEqual(made.status_code, 201, made.text)
            listed = http.post(f"/v3/workspaces/{self.workspace_id}/conclusions/list",
                               json={})
        self.assertNotIn("metadata", made.json()[0])
        self.assertEqual([c.get("metadata") for c in listed.json()["items"]
                          if c["content"] == "with metadata"], [None])

    def auth(self):
        key = admin_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def test_the_sweep_deletes_an_expired_conclusion_and_one_gone_already_counts_as_deleted(self):
        passing = self.remember("The user is in Lisbon until Friday.")
        gone = self.remember("The user's hotel is near the river.")
        self.gw.call(lambda c: self.gw.reader_peer(AGENT).conclusions_of(USER).delete(gone))
        self.clock.advance(61)
        report = self.sweep()
        self.assertEqual((report.deleted, report.retried, report.failed), (2, 0, 0))
        left = {c.id for c in conclusions_about(self.gw, AGENT, USER)}
        self.assertEqual(left & {passing, gone}, set())


if __name__ == "__main__":
    unittest.main()
