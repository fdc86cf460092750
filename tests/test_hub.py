"""The composition root: `Hub.stop` ends every thread the Hub started, once or fifty times over;
while a hold keeps the plugin's threads stopped, capture starts no writer."""

import math
import os
import socket
import threading
import unittest

from hub_testkit import hub_threads, release_restart
from loopback import ServerProcess
from outbox_helpers import temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, Outcome, Role
from honcho_hub.delivery import lifecycle
from honcho_hub.hub import Hub
from honcho_hub.runtime import join_background
from honcho_hub.settings.config import build_settings

KEY = "hch-hub-key-2468024680"
CHAT = "Ab3dE6gH"
# What a started Hub runs, by the start of each thread's name (every one of ours: honcho-hub-...).
KINDS = ("honcho-hub-capture-writer", "honcho-hub-delivery", "honcho-hub-sender",
         "honcho-hub-scopes", "honcho-hub-recall_", "honcho-hub-recall-chats")


class HubStopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # In a process of its own: the fake's threads and sockets are not counted as the Hub's.
        cls.honcho = ServerProcess(KEY)
        cls.addClassCleanup(cls.honcho.close)

    def setUp(self):
        plugin = {"outbox_path": temp_outbox_path(self), "api_url": self.honcho.url}
        self.settings = build_settings(plugin, {"HONCHO_API_KEY": KEY}, {})
        self.baseline = set(hub_threads())
        self.hub = Hub(lambda: self.settings)
        # the SDK imported: the worker starts on this thread
        self.assertTrue(self.hub.load_delivery())
        self.addCleanup(self.hub.stop)

    def run_everything(self, n: int = 0) -> set[str]:
        """Start the Hub and give each of its threads work: a typed message (the writer, then the
        worker and a sender), a project chat's scope (the registrar), a turn's recall and the
        chat's session (the recall pool and the chats' reader). Returns the kinds of thread
        running then."""
        self.hub.start()
        service = self.hub.capture(self.settings)
        typed = CaptureRequest(CHAT, Role.USER, f"h-{n}", f"message {n}")
        self.assertEqual(service.accept(typed, self.settings), Outcome.ACCEPTED)
        self.hub.ensure_writer().wake()
        self.hub.flush_capture()  # in the outbox now, whatever the writer's thread has done yet
        worker = self.hub.worker()
        self.assertIsNotNone(worker)
        self.assertEqual(worker.drain(10)["delivered"], 1)  # by a sender
        self.assertTrue(self.hub.registrar().submit(self.settings, f"chat-{CHAT}", "a0-alpha"))
        recaller = self.hub.recaller()
        self.assertTrue(recaller.prefetch(self.settings, f"chat-{CHAT}", f"message {n}"))
        self.hub.chats().session(self.settings, CHAT, wait_s=10)
        return {kind for kind in KINDS for thread in hub_threads() if thread.name.startswith(kind)}

    def started_since_setup(self) -> list[str]:
        return sorted(t.name for t in set(hub_threads()) - self.baseline)

    def test_stop_ends_the_capture_writer(self):
        writer = self.hub.ensure_writer()
        self.assertTrue(self.hub.stop())
        self.assertFalse(writer.is_alive())

    def test_stop_ends_every_thread_the_hub_started(self):
        self.assertEqual(self.run_everything(), set(KINDS))
        self.assertTrue(self.hub.stop())
        self.assertEqual(self.started_since_setup(), [])

    def test_stop_keeps_to_its_timeout_while_a_recall_load_hangs(self):
        # A server that takes the connection and never answers: the load holds a recall thread
        # until its deadline (30 s).
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        self.addCleanup(silent.close)
        hanging = build_settings(
            {"outbox_path": self.settings.outbox_path, "sdk_timeout_s": 60, "recall_timeout_s": 30,
             "api_url": f"http://127.0.0.1:{silent.getsockname()[1]}"},
            {"HONCHO_API_KEY": KEY}, {})
        self.assertTrue(self.hub.recaller().prefetch(hanging, f"chat-{CHAT}", "a question"))
        stopped: list[bool] = []
        stopping = threading.Thread(target=lambda: stopped.append(self.hub.stop(0.5)))
        stopping.start()
        stopping.join(10)
        waited_on = stopping.is_alive()
        silent.close()  # the load fails now: a stop still waiting for it returns too
        stopping.join(60)
        self.assertFalse(waited_on, "stop(0.5) was still waiting for the load after 10 s")
        self.assertEqual(stopped, [False])  # a thread had not ended, and stop says so

    def test_stop_leaves_no_descriptor_open_on_the_outbox_file(self):
        self.run_everything()
        self.hub.tool_gateway(self.settings)  # the memory tool's client too
        self.assertTrue(self.hub.stop())
        outbox = os.path.realpath(self.settings.outbox_path)
        open_on_it = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue  # closed meanwhile (the listing's own descriptor)
            if target.startswith(outbox):  # the file, its -wal and its -shm
                open_on_it.append(target)
        self.assertEqual(open_on_it, [])

    def test_a_stopped_hub_starts_again_on_its_next_use(self):
        self.run_everything()
        self.hub.stop()
        self.assertEqual(self.run_everything(1), set(KINDS))

    def test_start_and_stop_50_times_leaves_threads_and_file_descriptors_at_baseline(self):
        # imports, the process's journal (a stop keeps it) and the first clients
        self.run_everything()
        self.assertTrue(self.hub.stop())
        threads, descriptors = set(threading.enumerate()), len(os.listdir("/proc/self/fd"))
        for n in range(1, 51):
            self.assertEqual(self.run_everything(n), set(KINDS))
            self.assertTrue(self.hub.stop())
        self.assertEqual([t.name for t in set(threading.enumerate()) - threads], [])
        self.assertEqual(len(os.listdir("/proc/self/fd")), descriptors)


class WriterWhileHeldTest(unittest.TestCase):
    """A capture racing a switch-off or an uninstall (both hold the plugin's threads) wakes the
    writer: it is given, not started, and the journal keeps what was typed until the hold is lifted
    and the next ensure_writer starts it."""

    def setUp(self):
        self.settings = build_settings({"outbox_path": temp_outbox_path(self)}, {}, {})
        self.baseline = set(hub_threads())
        self.hub = Hub(lambda: self.settings)
        self.addCleanup(self.hub.stop)
        self.addCleanup(self.hub.flush_capture)  # the journal is the process's: leave it empty
        self.addCleanup(release_restart)

    def test_while_held_the_writer_is_not_started_and_the_journal_keeps_the_message(self):
        lifecycle.hold_restart(math.inf, "switch-off")
        service = self.hub.capture(self.settings)
        typed = CaptureRequest(CHAT, Role.USER, "h-held", "typed as the plugin is switched off")
        self.assertEqual(service.accept(typed, self.settings), Outcome.ACCEPTED)
        writer = self.hub.ensure_writer()
        writer.wake()
        self.assertFalse(writer.is_alive())
        self.assertIs(self.hub.ensure_writer(), writer)
        self.assertEqual(service.backlog(), 1)
        self.assertEqual(set(hub_threads()) - self.baseline, set())

    def test_once_the_hold_is_lifted_the_same_writer_starts(self):
        lifecycle.hold_restart(math.inf, "uninstall")
        writer = self.hub.ensure_writer()
        lifecycle.release_hold("uninstall")
        self.assertIs(self.hub.ensure_writer(), writer)
        self.assertTrue(writer.is_alive())

    def test_a_writer_never_started_stops_cleanly(self):
        lifecycle.hold_restart(math.inf, "switch-off")
        self.hub.ensure_writer()
        self.assertTrue(self.hub.stop())


class RecallWhileHeldTest(unittest.TestCase):
    """A recall hook, a tool call or a chat start racing a switch-off or an uninstall (both hold the
    plugin's threads) asks the Hub for its recall parts: they do their work from memory and start no
    thread (no recall pool, no chats' reader, no background build of the Recaller)."""

    def setUp(self):
        self.settings = build_settings({"outbox_path": temp_outbox_path(self)}, {}, {})
        self.baseline = set(hub_threads())
        self.hub = Hub(lambda: self.settings)
        self.addCleanup(self.hub.stop)
        self.addCleanup(release_restart)
        lifecycle.hold_restart(math.inf, "switch-off")

    def started(self) -> set[str]:
        return {thread.name for thread in set(hub_threads()) - self.baseline}

    def test_ready_recaller_builds_nothing_in_the_background(self):
        built = []
        self.assertIsNone(self.hub.ready_recaller(built.append))
        join_background(5.0)
        self.assertEqual((built, self.started()), ([], set()))

    def test_a_prefetch_and_a_recall_start_no_recall_thread(self):
        recaller = self.hub.recaller()
        self.assertFalse(recaller.prefetch(self.settings, f"chat-{CHAT}", "typed while off"))
        recaller.recall(self.settings, f"chat-{CHAT}", "asked while off", "{memory}", wait_s=0.1,
                        deliberate=True)
        self.assertFalse(recaller.warm(self.settings))
        self.assertEqual(self.started(), set())

    def test_a_chat_session_is_named_without_a_read_thread(self):
        self.assertEqual(self.hub.chats().session(self.settings, CHAT, wait_s=0.1), f"chat-{CHAT}")
        self.assertEqual(self.started(), set())


if __name__ == "__main__":
    unittest.main()
