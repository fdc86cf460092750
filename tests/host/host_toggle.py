"""Switching the plugin off and on with Agent Zero's own toggle (plugins.toggle_plugin).

Switched off for everyone, every thread the plugin started stops at once (not at a later tick), and
while off Agent Zero runs none of the plugin's extensions, so a turn is not captured at all; an
event already in the outbox (queued, as another Agent Zero process sharing the outbox would,
through the plugin's capture service) waits. Switched on again, the worker starts at once, with no
turn and no job-loop tick to start it, delivers that event, and new turns are captured again.
A capture already under way when the plugin is switched off or uninstalled (made real by the test
plugin tests/host/racing_stop) starts no thread again: what it captured waits for the switch-on.
"""

from __future__ import annotations

import os
import threading
import time
import unittest

import host_kit

RACING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "racing_stop")
RACING_ARM = "_racing_stop"  # tests/host/racing_stop's switch in a chat's context data
STOP_WAIT_S = 5.0  # "at once": far below the job loop's 60 s and the worker's idle poll

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld(plugins=(RACING,))


def hub_threads() -> list[str]:
    """Names of the live threads the plugin started (every one is named honcho-hub-…)."""
    return sorted(t.name for t in threading.enumerate()
                  if t.name.startswith("honcho-hub") and t.is_alive())


def settles(predicate, timeout_s: float) -> bool:
    """Whether `predicate` comes true within `timeout_s` (no failure here: the tests say which)."""
    try:
        return bool(host_kit.wait_for(predicate, timeout_s, "a condition"))
    except AssertionError:
        return False


def queue_directly(ctx, text: str, source_id: str) -> str:
    """Queue one event through the plugin's capture service, as a second process would."""
    bridge, capture = (host_kit.plugin_module("extensions.honcho_bridge.process_hub"),
                       host_kit.plugin_module("honcho_hub.capture.service"))
    settings = bridge.global_settings()
    request = capture.CaptureRequest(chat_id=ctx.id, role=capture.Role.USER, source_id=source_id,
                                     text=text)
    return bridge.hub().capture(settings).capture(request, settings, {}).value


class CaptureRacingTheStopTest(unittest.TestCase):
    """A capture under way when the plugin is switched off or uninstalled (the test plugin stops it
    between Agent Zero listing the call's extensions and running ours) starts no thread again; what
    it captured waits in the journal and is delivered once the plugin runs again. Runs first
    (alphabetical order) and leaves the plugin on and nothing held."""

    def setUp(self) -> None:
        self.addCleanup(host_kit.release_restart)

    def captured_while_stopping(self, stop: str, text: str):
        """A new chat whose message `text` is typed as `stop` happens (ours captures it after the
        stop); the chat."""
        ctx = world.host.new_chat()
        ctx.data[RACING_ARM] = stop
        host_kit.user_typed(ctx, text)
        return ctx

    def test_a_capture_racing_the_switch_off_starts_no_thread_and_waits_for_switch_on(self) -> None:
        ctx = self.captured_while_stopping("switch-off", "Typed as the plugin is switched off.")
        self.assertNotIn("honcho", world.host.enabled_plugins())
        self.assertEqual(hub_threads(), [])
        world.host.toggle("honcho", True)
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 1), 20,
                          "the message captured while switching off delivered after switching on")
        self.assertEqual(world.chat_texts(ctx), ["Typed as the plugin is switched off."])

    def test_a_capture_racing_the_uninstall_starts_no_thread(self) -> None:
        ctx = self.captured_while_stopping("uninstall", "Typed as the plugin is uninstalled.")
        self.assertEqual(hub_threads(), [])
        host_kit.release_restart()  # installed again
        host_kit.plugin_module("extensions.honcho_bridge.process_hub").hub().start()
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 1), 20,
                          "the message captured while uninstalling delivered after a reinstall")


class SwitchedOnDuringAnUpdateTest(unittest.TestCase):
    """Switching on lifts only the switch-off's hold: an update begun before or during the
    switch-off (pre_update) still holds the threads, for its own bounded time. Runs before
    ToggleTest (alphabetical order) and leaves the plugin on and nothing held."""

    def setUp(self) -> None:
        self.addCleanup(host_kit.release_restart)

    def test_the_update_still_holds_for_its_own_time_in_either_order(self) -> None:
        lifecycle = host_kit.plugin_module("honcho_hub.delivery.lifecycle")

        def after_the_update() -> float:
            return time.monotonic() + lifecycle.UPDATE_HOLD_S + 1

        for order in ("update, then off", "off, then update"):
            with self.subTest(order):
                host_kit.release_restart()
                steps = [lambda: world.host.hook("honcho", "pre_update"),
                         lambda: world.host.toggle("honcho", False)]
                for step in steps if order.startswith("update") else reversed(steps):
                    step()
                world.host.toggle("honcho", True)
                self.assertTrue(lifecycle.restart_held(), "the update still holds")
                self.assertEqual(host_kit.delivery_workers(), [])
                self.assertFalse(lifecycle.restart_held(after_the_update),
                                 "the update's hold ends in its own time")


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
        cls.worker = host_kit.plugin_module("extensions.honcho_bridge.process_hub").hub().worker()
        cls.threads_before_off = hub_threads()

        host.toggle("honcho", False)
        cls.enabled_while_off = "honcho" in host.enabled_plugins()
        cls.stopped = settles(lambda: hub_threads() == [], STOP_WAIT_S)
        cls.counts_before_off_turn = host_kit.outbox_counts(world.outbox_path)
        host.turn(ctx, "Typed while the plugin is off.")
        cls.counts_after_off_turn = host_kit.outbox_counts(world.outbox_path)
        cls.queued = queue_directly(ctx, "Queued by another process while off.",
                                    "host-toggle-queued")
        cls.status_while_off = host_kit.honcho_status(world.host)
        cls.threads_while_off = hub_threads()
        cls.in_honcho_while_off = [m.content for m in world.session_messages(cls.session_id)]

        host.toggle("honcho", True)  # no turn, no job-loop tick after this until delivered
        cls.enabled_after_on = "honcho" in host.enabled_plugins()
        cls.resumed = host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 3), 20,
                                        "the event queued while off delivered after switching on")
        cls.workers_after_on = host_kit.delivery_workers()
        host.turn(ctx, "Typed after the switch-on.")
        cls.final = host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 5), 30,
                                      "the turn after switching on delivered")

    def test_agent_zero_reports_the_plugin_off_then_on(self) -> None:
        self.assertFalse(self.enabled_while_off)
        self.assertTrue(self.enabled_after_on)

    def test_switching_off_stops_every_thread_of_the_plugin_at_once(self) -> None:
        self.assertIn("honcho-hub-delivery", self.threads_before_off)
        self.assertTrue(self.stopped)
        self.assertFalse(self.worker.is_alive())
        self.assertEqual(self.threads_while_off, [], "queueing or status while off starts none")

    def test_a_turn_while_off_is_not_captured(self) -> None:
        self.assertEqual(self.counts_after_off_turn, self.counts_before_off_turn)
        everything = [m.content for m in self.final]
        self.assertNotIn("Typed while the plugin is off.", everything)
        self.assertNotIn("While off: noted.", everything)

    def test_while_off_a_queued_event_waits_and_status_shows_the_worker_stopped(self) -> None:
        self.assertEqual(self.queued, "queued")
        self.assertEqual(self.status_while_off["worker"]["state"], "stopped")
        self.assertEqual(self.status_while_off["queue"]["pending"], 1)
        self.assertEqual(self.in_honcho_while_off,
                         ["Typed before the switch-off.", "Before: noted."])

    def test_switching_on_starts_a_new_worker_that_delivers_in_order(self) -> None:
        self.assertEqual(len(self.workers_after_on), 1)
        self.assertIsNot(self.workers_after_on[0], self.worker)
        self.assertEqual([m.content for m in self.final],
                         ["Typed before the switch-off.", "Before: noted.",
                          "Queued by another process while off.",
                          "Typed after the switch-on.", "After: noted."])


if __name__ == "__main__":
    unittest.main()
