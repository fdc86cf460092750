"""Seed guarantee: the SDK timeout (`sdk_timeout_s`) and the sender concurrency (`concurrency`)
take effect.

Real Agent Zero v1.7 (settings saved as the settings page does, the capture extension, the worker it
starts) and a real Honcho behind a loopback proxy that holds or delays requests and counts how many
are in flight at once.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import ProxiedHostCase, honcho_status, user_typed, wait_for  # noqa: E402

PLUGIN = "honcho"


class DeliverySettings(ProxiedHostCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()

    def setUp(self):
        super().setUp()
        self.proxy.release()
        self.proxy.delay_s = 0.0

    def test_a_send_to_a_server_that_never_answers_gives_up_after_sdk_timeout_s(self):
        self.host.save_config(PLUGIN, {"sdk_timeout_s": 1, "circuit_base_s": 1,
                                       "poll_interval_s": 0.5})
        self.proxy.hold()
        ctx = self.host.new_chat()
        user_typed(ctx, "a send that meets a hanging server")
        # The worker's own attempt, not only any request's: others pass the proxy too, and the
        # worker's first step waits for the prompt window (at most 1 s: this turn calls no model).
        wait_for(lambda: honcho_status(self.host)["worker"]["last_error_code"] == "timeout", 10,
                 "the worker to give up on a held request")
        gave_up = self.proxy.seen(lambda r: r.outcome == "client_gave_up")
        held_s = [round(r.ended_mono - r.arrived_mono, 2) for r in gave_up]
        self.assertTrue(held_s)
        self.assertTrue(all(s >= 0.8 for s in held_s), f"none before sdk_timeout_s: {held_s}")
        self.assertLess(min(held_s), 2.5, f"about 1 s: {held_s}")
        self.assertTrue(all(s < 5.0 for s in held_s), f"none near the default 10 s: {held_s}")

        self.proxy.release()
        wait_for(lambda: self.world.chat_texts(ctx) == ["a send that meets a hanging server"], 15,
                 "delivery once the server answers again")
        self.assertEqual(honcho_status(self.host)["worker"]["last_error_code"], "timeout")

    def test_concurrency_bounds_the_sends_in_flight_and_uses_them_all(self):
        senders = 3
        self.host.save_config(PLUGIN, {"concurrency": senders, "poll_interval_s": 0.5,
                                       "recall_enabled": False})
        self.proxy.hold()
        chats = [self.host.new_chat() for _ in range(senders + 2)]
        user_typed(chats[0], "message of chat 0")
        wait_for(lambda: self.proxy.seen(lambda r: r.outcome == "open"), 10,
                 "the first chat's send, held")
        for n, ctx in enumerate(chats[1:], start=1):
            user_typed(ctx, f"message of chat {n}")  # queued while the first send hangs
        self.proxy.delay_s = 0.3  # every answer takes a while: sends of different chats overlap
        self.proxy.release()
        for n, ctx in enumerate(chats):
            # The lambda is polled at once, within its own turn of the loop.
            wait_for(lambda: self.world.chat_texts(ctx) == [f"message of chat {n}"],  # noqa: B023
                     20, f"chat {n}'s message")
        # Only the sends: recall's background reads of Honcho's derivation queue (made after the
        # worker's steps) pass the same proxy and are not bounded by `concurrency`.
        sends = self.proxy.seen(lambda r: r.method == "POST"
                                and r.path.rstrip("/").endswith("/messages"))
        self.assertEqual(most_at_once(sends), senders,
                         "never more than `concurrency` sends, and all of them used")


def most_at_once(requests) -> int:
    """The most of these requests that were in the proxy at once, arrival to end."""
    edges = sorted([(r.arrived_mono, 1) for r in requests]
                   + [(r.ended_mono, -1) for r in requests])  # at a tie, an end comes first
    at_once = most = 0
    for _, step in edges:
        at_once += step
        most = max(most, at_once)
    return most


if __name__ == "__main__":
    unittest.main()
