"""The prompt window: from a typed message to the turn's model call, the plugin's background
passes (the capture writer, the delivery worker) wait, so their work under the interpreter lock is
done while the turn waits on the model, not while Agent Zero builds its prompt on the event loop."""

import unittest

from outbox_helpers import ManualClock

from honcho_hub.prompt_window import PromptWindow


class PromptWindowTest(unittest.TestCase):
    def setUp(self):
        self.mono = ManualClock(100.0)
        self.closed = []
        self.window = PromptWindow(monotonic=self.mono, on_close=lambda: self.closed.append(1))

    def test_nothing_is_held_before_a_message(self):
        self.assertEqual(self.window.held_s(), 0.0)

    def test_a_message_holds_the_passes_until_the_model_call(self):
        self.window.opened()
        self.mono.advance(0.1)
        self.assertAlmostEqual(self.window.held_s(), PromptWindow.MAX_HOLD_S - 0.1)
        self.window.model_called()
        self.assertEqual(self.window.held_s(), 0.0)
        self.assertEqual(self.closed, [1])  # the held threads are woken at once

    def test_a_turn_that_never_calls_the_model_holds_no_longer_than_the_cap(self):
        self.window.opened()
        self.mono.advance(PromptWindow.MAX_HOLD_S)
        self.assertEqual(self.window.held_s(), 0.0)

    def test_messages_in_a_row_do_not_hold_past_the_cap_from_the_first(self):
        # A burst of typed messages (several chats, the hooks bench) must not starve the writer.
        self.window.opened()
        self.mono.advance(0.6)
        self.window.opened()
        self.mono.advance(PromptWindow.MAX_HOLD_S - 0.6)
        self.assertEqual(self.window.held_s(), 0.0)

    def test_a_model_call_with_nothing_held_wakes_no_one(self):
        self.window.model_called()  # each of a turn's later model calls
        self.window.opened()
        self.mono.advance(PromptWindow.MAX_HOLD_S)
        self.window.model_called()
        self.assertEqual(self.closed, [])


if __name__ == "__main__":
    unittest.main()
