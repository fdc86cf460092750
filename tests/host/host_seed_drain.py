"""Seed guarantee: "Drain 5 s" is bounded and respects the plugin switch.

Real Agent Zero v1.7 (the sidebar's API handler, the capture extension, plugin toggles) and a real
Honcho behind a loopback proxy that can hold requests without answering or drop connections: the
faults happen on the network, nothing of the plugin is patched.
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import (  # noqa: E402
    ProxiedHostCase,
    honcho_action,
    honcho_status,
    outbox_counts,
    outbox_due,
    user_typed,
    wait_for,
)

PLUGIN = "honcho"
SDK_TIMEOUT_S = 30  # a drain that waited for the SDK would take this long
DRAIN_S = 5.0
SLACK_S = 3.0


class Drain(ProxiedHostCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Recall off: every request at the proxy is the delivery worker's.
        cls.host.save_config(PLUGIN, {"sdk_timeout_s": SDK_TIMEOUT_S, "circuit_base_s": 1,
                                      "concurrency": 1, "poll_interval_s": 0.5,
                                      "recall_enabled": False})
        # Agent Zero builds its API app on the first call (seconds): not timed.
        honcho_status(cls.host)

    def setUp(self):
        super().setUp()
        self.proxy.release()
        self.host.toggle(PLUGIN, True)

    def live(self, ctx):
        counts = outbox_counts(self.world.outbox_path, f"chat-{ctx.id}")
        return counts.get("pending", 0) + counts.get("leased", 0)

    def assert_drain_waits_for_the_switch(self, ctx, queued):
        """Switched off, a drain delivers nothing and the events stay; switched on, it delivers
        them."""
        self.assertEqual(honcho_action(self.host, "drain")["delivered"], 0)
        self.assertEqual(self.world.chat_texts(ctx), [], "nothing sent while the plugin is off")
        self.assertEqual(self.live(ctx), len(queued))
        self.host.toggle(PLUGIN, True)
        self.assertEqual(honcho_action(self.host, "drain")["delivered"], len(queued))
        self.assertEqual(self.world.chat_texts(ctx), queued)

    def test_drain_returns_in_about_5_s_when_the_server_never_answers_and_loses_nothing(self):
        self.proxy.hold()
        ctx = self.host.new_chat()
        sent = [f"held message {n}" for n in range(3)]
        for text in sent:
            user_typed(ctx, text)
        wait_for(lambda: self.proxy.seen(lambda r: r.outcome == "open"), 10,
                 "a request held at the proxy")

        started = time.monotonic()
        result = honcho_action(self.host, "drain")
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, DRAIN_S + SLACK_S,
                        "the drain is bounded, whatever the SDK timeout")
        self.assertGreaterEqual(elapsed, DRAIN_S - 0.5, "it kept trying for its 5 s")
        self.assertEqual(result["delivered"], 0)
        self.assertEqual(self.live(ctx), len(sent), "nothing lost while the server hangs")

        self.proxy.release()
        wait_for(lambda: self.world.chat_texts(ctx) == sent, 20,
                 "the held messages, once each, in order")

    def test_drain_delivers_nothing_while_the_plugin_is_switched_off(self):
        self.proxy.hold()
        first = self.host.new_chat()
        user_typed(first, "in flight when the plugin is switched off")
        wait_for(lambda: self.proxy.seen(lambda r: r.outcome == "open"), 10,
                 "a request held at the proxy")
        second = self.host.new_chat()
        queued = ["queued before the switch 1", "queued before the switch 2"]
        for text in queued:
            user_typed(second, text)
        self.host.toggle(PLUGIN, False)
        self.proxy.release()  # the send already on the wire may finish; nothing new may start
        wait_for(lambda: self.world.chat_texts(first), 20, "the send that was in flight")

        self.assert_drain_waits_for_the_switch(second, queued)

    def test_drain_delivers_nothing_while_switched_off_even_with_no_worker_running(self):
        self.proxy.mode = "drop"  # Honcho unreachable: the events wait for a later attempt
        ctx = self.host.new_chat()
        queued = ["waits while the plugin is off 1", "waits while the plugin is off 2"]
        for text in queued:
            user_typed(ctx, text)
        wait_for(lambda: honcho_status(self.host)["worker"]["circuit"], 10,
                 "the unreachable circuit")
        self.host.toggle(PLUGIN, False)
        self.host.hook(PLUGIN, "pre_update")  # stops the worker, as before an update
        self.proxy.release()  # Honcho is back
        wait_for(lambda: outbox_due(self.world.outbox_path, f"chat-{ctx.id}"), 10,
                 "the events to be due again")

        self.assert_drain_waits_for_the_switch(ctx, queued)


if __name__ == "__main__":
    unittest.main()
