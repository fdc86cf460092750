"""Seed guarantee: the delivery worker starts when a chat is initialised (agent_init), before any
turn.

Real Agent Zero v1.7 and a real Honcho; one Agent Zero in this process (run through tests/host/run).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import HostWorld, delivery_workers, outbox_counts, wait_for  # noqa: E402


class WorkerStartsAtChatInit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.world = HostWorld()
        cls.host = cls.world.host
        # Agent Zero is imported and running, but no chat exists yet: no worker may run.
        cls.before_chat = delivery_workers()
        cls.ctx = cls.host.new_chat()
        # agent_init returns at once; the delivery modules load and the worker starts on a thread of
        # ours.
        cls.after_chat = wait_for(delivery_workers, 30, "the delivery coordinator")

    def test_new_chat_starts_the_delivery_coordinator_before_any_turn(self):
        self.assertEqual(self.before_chat, [], "no worker before the first chat")
        self.assertEqual(len(self.after_chat), 1,
                         "agent_init starts exactly one delivery coordinator")
        self.assertTrue(self.after_chat[0].is_alive())
        self.assertEqual(self.host.model_calls(self.ctx), [],
                         "no turn ran: the model was never called")
        self.assertEqual(outbox_counts(self.world.outbox_path), {},
                         "nothing was captured: no turn ran")

    def test_another_chat_reuses_the_running_coordinator(self):
        self.host.new_chat()
        self.assertEqual(delivery_workers(), self.after_chat,
                         "one worker per process, not one per chat")


if __name__ == "__main__":
    unittest.main()
