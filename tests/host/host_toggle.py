"""Switching the plugin off and on with Agent Zero's own toggle (plugins.toggle_plugin, no hook).

While off, Agent Zero runs none of the plugin's extensions, so a turn is not captured at all; the
process's delivery worker keeps its thread but pauses, so an event already in the outbox (queued, as
another Agent Zero process sharing the outbox would, through the plugin's capture service) waits.
After switching on, the worker delivers it by itself and new turns are captured again.
"""

from __future__ import annotations

import sys
import unittest

import host_kit

PLUGIN = "usr.plugins.honcho"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def module(name: str):
    """The plugin module Agent Zero imported (its current generation)."""
    __import__(f"{PLUGIN}.{name}")
    return sys.modules[f"{PLUGIN}.{name}"]


def queue_directly(ctx, text: str, source_id: str) -> str:
    """Queue one event through the plugin's capture service, as a second process would."""
    bridge, capture = (module("extensions.honcho_bridge.process_hub"),
                       module("honcho_hub.capture.service"))
    settings = bridge.global_settings()
    request = capture.CaptureRequest(chat_id=ctx.id, role=capture.Role.USER, source_id=source_id,
                                     text=text)
    return bridge.hub().capture(settings).capture(request, settings, {}).value


class ToggleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        host.script("Before: noted.", "While off: noted.", "After: noted.")
        cls.ctx = ctx = host.new_chat()
        cls.session_id = f"chat-{ctx.id}"
        host.turn(ctx, "Typed before the switch-off.")
        host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 2), 30,
                          "the first turn delivered")
        cls.worker = module("extensions.honcho_bridge.process_hub").hub().worker()

        host.toggle("honcho", False)
        cls.enabled_while_off = "honcho" in host.enabled_plugins()
        cls.counts_before_off_turn = host_kit.outbox_counts(world.outbox_path)
        host.turn(ctx, "Typed while the plugin is off.")
        cls.counts_after_off_turn = host_kit.outbox_counts(world.outbox_path)
        cls.queued = queue_directly(ctx, "Queued by another process while off.",
                                    "host-toggle-queued")
        cls.drained_while_off = cls.worker.drain(5.0)
        cls.status_while_off = host_kit.honcho_status(world.host)
        cls.in_honcho_while_off = [m.content for m in world.session_messages(cls.session_id)]

        host.toggle("honcho", True)
        cls.enabled_after_on = "honcho" in host.enabled_plugins()
        cls.resumed = host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 3), 20,
                                        "the event queued while off delivered after switching on")
        host.turn(ctx, "Typed after the switch-on.")
        cls.final = host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 5), 30,
                                      "the turn after switching on delivered")

    def test_agent_zero_reports_the_plugin_off_then_on(self) -> None:
        self.assertFalse(self.enabled_while_off)
        self.assertTrue(self.enabled_after_on)

    def test_a_turn_while_off_is_not_captured(self) -> None:
        self.assertEqual(self.counts_after_off_turn, self.counts_before_off_turn)
        everything = [m.content for m in self.final]
        self.assertNotIn("Typed while the plugin is off.", everything)
        self.assertNotIn("While off: noted.", everything)

    def test_the_worker_pauses_while_off_and_delivers_nothing(self) -> None:
        self.assertEqual(self.queued, "queued")
        self.assertEqual(self.drained_while_off["delivered"], 0, self.drained_while_off)
        self.assertEqual(self.status_while_off["worker"]["state"], "paused")
        self.assertEqual(self.status_while_off["queue"]["pending"], 1)
        self.assertEqual(self.in_honcho_while_off,
                         ["Typed before the switch-off.", "Before: noted."])

    def test_after_switching_on_waiting_event_and_new_turns_are_delivered_in_order(self) -> None:
        self.assertEqual([m.content for m in self.final],
                         ["Typed before the switch-off.", "Before: noted.",
                          "Queued by another process while off.",
                          "Typed after the switch-on.", "After: noted."])

    def test_the_same_worker_thread_paused_and_resumed(self) -> None:
        self.assertTrue(self.worker.is_alive())
        self.assertEqual(host_kit.delivery_workers(), [self.worker])


if __name__ == "__main__":
    unittest.main()
