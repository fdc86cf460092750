"""Seed guarantee: uninstall() keeps the configured outbox file with its queued rows and stops the worker.

Real Agent Zero v1.7 (the hook called as the installer calls it, the capture extension) and a real
Honcho behind a loopback proxy that drops connections, so the captured messages stay queued.
"""

import os
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import (HonchoProxy, HostWorld, honcho_status, outbox_counts, plugin_threads,  # noqa: E402
                      required_env, user_typed, wait_for)

PLUGIN = "honcho"
WORKER_THREAD = "honcho-hub-delivery"


def sender_threads():
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("honcho-hub-sender") and t.is_alive()]


class Uninstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proxy = HonchoProxy(required_env("HONCHO_REAL_URL"), mode="drop")  # Honcho unreachable
        cls.world = HostWorld(env={"HONCHO_API_URL": cls.proxy.url})
        cls.host = cls.world.host

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()

    def test_uninstall_keeps_the_outbox_and_its_queued_rows_and_stops_the_worker(self):
        ctx = self.host.new_chat()
        queued = [f"queued before uninstall {n}" for n in range(3)]
        for text in queued:
            user_typed(ctx, text)
        wait_for(lambda: honcho_status(self.host)["worker"]["circuit"], 15, "the worker to try and fail")
        self.assertEqual(len(plugin_threads(WORKER_THREAD)), 1)

        report = self.host.hook(PLUGIN, "uninstall")

        self.assertEqual(plugin_threads(WORKER_THREAD), [], "the delivery coordinator has ended")
        self.assertEqual(sender_threads(), [], "its sender threads have ended")
        self.assertGreaterEqual(report["workers"], 1)
        self.assertEqual(report["stopped"], report["workers"])
        self.assertTrue(os.path.isfile(self.world.outbox_path), "the configured outbox file is kept")
        self.assertEqual(outbox_counts(self.world.outbox_path), {"pending": len(queued)})
        conn = sqlite3.connect(f"file:{self.world.outbox_path}?mode=ro", uri=True)
        try:
            kept = [row[0] for row in conn.execute("SELECT content FROM events ORDER BY seq")]
        finally:
            conn.close()
        self.assertEqual(kept, queued, "the queued messages are intact, in order")


if __name__ == "__main__":
    unittest.main()
