"""Seed guarantee: "Retry dead" requeues at most 100 dead letters and lets auth circuits probe at
once.

Real Agent Zero v1.7 (the sidebar's API handler, the capture extension) and a real Honcho. Dead
letters are made honestly: the plugin points at a wrong path of the real server, which answers 404
to every request, and the worker dead-letters each event. The auth circuit is opened by the real
auth-on API refusing a wrong key (401).
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import (  # noqa: E402
    HostWorld,
    honcho_action,
    honcho_status,
    outbox_counts,
    outbox_rows,
    real_admin_key,
    required_env,
    user_typed,
    wait_for,
)

PLUGIN = "honcho"
DEAD_LETTERS = 105  # more than one retry_dead may requeue


def set_global_secret(name: str, value: str) -> None:
    """Settings → Secrets: Agent Zero's secrets manager writes usr/secrets.env in the tree."""
    from helpers.secrets import get_default_secrets_manager

    get_default_secrets_manager().save_secrets_with_merge(f"{name}={value}\n")


class RetryDead(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.world = HostWorld()
        cls.host = cls.world.host
        cls.real_url = cls.world.honcho_url
        cls.auth_url = required_env("HONCHO_REAL_AUTH_URL")
        cls.admin_key = real_admin_key()
        # An hour between auth probes: only the reset by retry_dead can make the worker probe in
        # time.
        cls.host.save_config(PLUGIN, {"auth_probe_interval_s": 3600})

    def setUp(self):
        self.host.toggle(PLUGIN, True)

    def action(self, name):
        return honcho_action(self.host, name)

    def status(self):
        return honcho_status(self.host)

    def test_retry_dead_requeues_at_most_100_dead_letters(self):
        # The real server: 404 for everything.
        os.environ["HONCHO_API_URL"] = self.real_url + "/not-the-api"
        ctx = self.host.new_chat()
        for n in range(DEAD_LETTERS):
            user_typed(ctx, f"dead letter number {n}")
        wait_for(lambda: outbox_counts(self.world.outbox_path).get("dead", 0) >= DEAD_LETTERS, 60,
                 f"{DEAD_LETTERS} dead letters")
        codes = {code for _, code, _ in outbox_rows(self.world.outbox_path, f"chat-{ctx.id}")}
        self.assertEqual(codes, {"http_404"}, "each event refused by the real server")
        self.host.toggle(PLUGIN, False)  # the worker pauses: requeued rows stay visible as pending
        before = outbox_counts(self.world.outbox_path)

        first = self.action("retry_dead")
        after_first = outbox_counts(self.world.outbox_path)
        self.assertEqual(first["requeued"], 100)
        self.assertEqual(after_first.get("pending", 0) - before.get("pending", 0), 100)
        self.assertEqual(after_first.get("dead", 0), before["dead"] - 100)

        second = self.action("retry_dead")
        after_second = outbox_counts(self.world.outbox_path)
        self.assertEqual(second["requeued"], before["dead"] - 100)
        self.assertEqual(after_second.get("dead", 0), 0)

    def test_retry_dead_makes_an_open_auth_circuit_probe_at_once(self):
        os.environ["HONCHO_API_URL"] = self.auth_url
        set_global_secret("HONCHO_API_KEY", "not-the-key")
        ctx = self.host.new_chat()
        user_typed(ctx, "a message that waits for a good key")
        circuit = wait_for(lambda: self.status()["worker"]["circuit"], 30,
                           "the auth circuit to open")
        self.assertEqual((circuit["kind"], circuit["reason"]), ("auth", "auth_401"))
        self.assertGreater(circuit["retry_in_s"], 3000, "next probe an hour away")

        # The key is fixed under Settings → Secrets.
        set_global_secret("HONCHO_API_KEY", self.admin_key)
        drained = self.action("drain")  # a step now: the circuit still holds until its probe time
        self.assertEqual(drained["delivered"], 0)
        self.assertEqual(self.world.chat_texts(ctx), [])

        started = time.monotonic()
        result = self.action("retry_dead")
        self.assertEqual(result["circuits_reset"], 1)
        messages = wait_for(lambda: self.world.chat_texts(ctx), 10,
                            "delivery after the probe with the fixed key")
        self.assertLess(time.monotonic() - started, 10, "far sooner than the hour between probes")
        self.assertEqual(messages, ["a message that waits for a good key"])
        self.assertIsNone(self.status()["worker"]["circuit"], "the probe succeeded: circuit closed")


if __name__ == "__main__":
    unittest.main()
