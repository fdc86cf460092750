"""Seed guarantee: uninstall() keeps the configured outbox file with its queued rows and stops the
worker.

Real Agent Zero v1.7 (the hook called as the installer calls it, the capture extension) and a real
Honcho behind a loopback proxy that drops connections (so the captured messages stay queued) or
forwards them and counts the connections left open.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import (  # noqa: E402
    ProxiedHostCase,
    delivered,
    delivery_workers,
    honcho_status,
    outbox_counts,
    outbox_rows,
    user_typed,
    wait_for,
)

PLUGIN = "honcho"
HANGING_SDK_TIMEOUT_S = 7  # longer than uninstall's 5 s wait for the worker


def sender_threads():
    import threading

    return [t for t in threading.enumerate()
            if t.name.startswith("honcho-hub-sender") and t.is_alive()]


class Uninstall(ProxiedHostCase):
    def test_uninstall_keeps_the_outbox_and_its_queued_rows_and_stops_the_worker(self):
        self.proxy.mode = "drop"  # Honcho unreachable: the messages stay queued
        ctx = self.host.new_chat()
        queued = [f"queued before uninstall {n}" for n in range(3)]
        for text in queued:
            user_typed(ctx, text)
        wait_for(lambda: honcho_status(self.host)["worker"]["circuit"], 15,
                 "the worker to try and fail")
        self.assertEqual(len(delivery_workers()), 1)

        report = self.host.hook(PLUGIN, "uninstall")

        self.assertEqual(delivery_workers(), [], "the delivery coordinator has ended")
        self.assertEqual(sender_threads(), [], "its sender threads have ended")
        self.assertGreaterEqual(report["workers"], 1)
        self.assertEqual(report["stopped"], report["workers"])
        self.assertTrue(os.path.isfile(self.world.outbox_path),
                        "the configured outbox file is kept")
        session = f"chat-{ctx.id}"
        self.assertEqual(outbox_counts(self.world.outbox_path, session),
                         {"pending": len(queued)})
        kept = [content for _, _, content in outbox_rows(self.world.outbox_path, session)]
        self.assertEqual(kept, queued, "the queued messages are intact, in order")

    def test_uninstall_closes_the_workers_connections_to_honcho(self):
        self.proxy.mode = "forward"
        ctx = self.host.new_chat()
        user_typed(ctx, "delivered before uninstall")
        wait_for(lambda: delivered(self.world, f"chat-{ctx.id}", 1), 15,
                 "the message in the real Honcho")
        self.assertGreaterEqual(self.proxy.open_connections, 1,
                                "the worker keeps its connection alive")

        self.host.hook(PLUGIN, "uninstall")

        self.assertEqual(delivery_workers(), [])
        wait_for(lambda: self.proxy.open_connections == 0, 5,
                 "every connection of the stopped worker closed")

    def test_uninstall_during_a_hanging_send_reports_the_worker_as_not_yet_stopped(self):
        # Recall off: every request at the proxy is the delivery worker's.
        self.host.save_config(PLUGIN, {"sdk_timeout_s": HANGING_SDK_TIMEOUT_S,
                                       "recall_enabled": False})
        self.proxy.hold()  # Honcho takes the request and never answers
        try:
            ctx = self.host.new_chat()
            user_typed(ctx, "on the wire when uninstall comes")
            wait_for(lambda: self.proxy.seen(lambda r: r.outcome == "open"), 10,
                     "a send hanging at the proxy")

            report = self.host.hook(PLUGIN, "uninstall")

            still_running = delivery_workers()
            self.assertEqual(len(still_running), 1,
                             "the hanging send outlives uninstall's 5 s wait")
            self.assertEqual(report["stopped"], report["workers"] - 1, "the report says so")
            wait_for(lambda: not still_running[0].is_alive(), HANGING_SDK_TIMEOUT_S,
                     "the worker to end")
            self.assertEqual(outbox_counts(self.world.outbox_path, f"chat-{ctx.id}"),
                             {"pending": 1})
        finally:
            self.proxy.release()
            self.host.save_config(PLUGIN, {})


if __name__ == "__main__":
    unittest.main()
