"""Backfill against a real Honcho: saved chats imported, drained twice, imported again after the
outbox pruned what it delivered, drained again — every kept message is in its session exactly once,
in order; a chat forgotten after its import is not brought back by the next backfill."""

import os
import random
import tempfile
import time

from real_kit import RealHonchoCase

# isort: split
# After real_kit, which puts tests/ on sys.path; a module import collects none of its tests.
import test_backfill

from honcho_hub.capture.service import event_id
from honcho_hub.chats.forget import DONE, forget_chat
from honcho_hub.cli import agent_zero_files, backfill
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.storage.outbox import Outbox


class BackfillDeliveryTest(RealHonchoCase):
    quiet = True

    def test_backfill_drained_twice_then_imported_and_drained_again_leaves_each_message_once(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        chats = os.path.join(folder.name, "usr", "chats")
        expected = {}
        for chat_id in ("bfchat01", "bfchat02"):
            chat, ids = test_backfill.conversation(chat_id)
            chat.write(chats)
            expected[chat_id] = [event_id(chat_id, role, ids[name], 0)
                                 for name, role in test_backfill.KEPT]
        settings = self.settings()
        clock = [time.time()]
        worker = DeliveryWorker(lambda: settings, clock=lambda: clock[0], rng=random.Random(3))
        self.addCleanup(worker.stop, 10)

        def run() -> dict:
            return backfill.Backfill(settings, lambda project: settings,
                                     clock=lambda: clock[0]).run(
                agent_zero_files.saved_chats(chats))

        self.assertEqual(run()["events"], {"already_queued": 0, "queued": 12})
        self.assertEqual(worker.drain(60)["delivered"], 12)
        self.assertEqual(worker.drain(60)["delivered"], 0)
        clock[0] += 2 * 86_400
        box = Outbox(settings.outbox_path, clock=lambda: clock[0])
        self.addCleanup(box.close)
        self.assertEqual(box.prune(86_400), 12)  # the outbox no longer knows they were delivered
        self.assertEqual(run()["events"], {"already_queued": 0, "queued": 12})
        worker.drain(60)
        # All found in Honcho: none sent again.
        self.assertEqual(worker.state.metrics.reconciled, 12)
        gateway = self.gateway()
        for chat_id, ids in expected.items():
            with self.subTest(chat=chat_id):
                held = gateway.call(lambda c, s=f"chat-{chat_id}":
                                    gateway.reader_session(s).messages(size=100))
                self.assertEqual([m.metadata["event_id"] for m in held.items], ids)

    def test_a_chat_forgotten_after_its_import_is_not_brought_back_by_the_next_backfill(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        chats = os.path.join(folder.name, "usr", "chats")
        for chat_id in ("bfforgot", "bfkept01"):
            chat, _ = test_backfill.conversation(chat_id)
            chat.typed("A question the log no longer dates.", logged=False)  # dated by the import
            chat.write(chats)
        settings = self.settings()
        worker = DeliveryWorker(lambda: settings, rng=random.Random(5))
        self.addCleanup(worker.stop, 10)

        def run() -> dict:
            return backfill.Backfill(settings, lambda project: settings).run(
                agent_zero_files.saved_chats(chats))

        self.assertEqual(run()["events"], {"already_queued": 0, "queued": 14})
        self.assertEqual(worker.drain(60)["delivered"], 14)
        self.assertEqual(forget_chat(settings, "bfforgot")["state"], DONE)
        report = run()
        worker.drain(60)
        gateway = self.gateway()
        held = {s.id for s in gateway.call(lambda c: c.sessions(size=100)).items}
        self.assertEqual({s for s in held if "bfforgot" in s}, set(),
                         "the forgotten chat came back")
        self.assertIn("chat-bfkept01", held)
        self.assertEqual(report["forgotten"], {"skipped": ["bfforgot"], "included": []})
