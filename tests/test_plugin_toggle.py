"""Agent Zero's toggle of the plugin (`plugins.toggle_plugin`'s start and end extensions), loaded as
Agent Zero loads them, against a stub host: switched off for everyone every thread of the plugin
stops and stays stopped; switched on, the worker and the capture writer start at once; a toggle for
a project or an agent profile, or for another plugin, changes nothing of ours."""

import math
import os
import unittest

from hub_testkit import (
    StubExtension,
    classes_in,
    hub_threads,
    import_by_path,
    release_restart,
    stub_agent_zero,
)
from outbox_helpers import ManualClock

from honcho_hub.delivery import lifecycle

POINT = os.path.join("extensions", "python", "_functions", "helpers", "plugins", "toggle_plugin")
SWITCH_OFF = os.path.join(POINT, "start", "_50_honcho_switch_off.py")
SWITCH_ON = os.path.join(POINT, "end", "_50_honcho_switch_on.py")


def toggle(plugin, enabled, project="", profile="", exception=None):
    """The `data` Agent Zero's @extensible hands both points for toggle_plugin(...)."""
    return {"args": (plugin, enabled, project, profile), "kwargs": {}, "exception": exception}


class ToggleExtensionsTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.addCleanup(release_restart)
        plugin = self.host.plugin_dir
        self.off = classes_in(import_by_path(os.path.join(plugin, SWITCH_OFF)), StubExtension)[0]
        self.on = classes_in(import_by_path(os.path.join(plugin, SWITCH_ON)), StubExtension)[0]
        from usr.plugins.honcho.extensions.honcho_bridge import process_hub
        from usr.plugins.honcho.honcho_hub import runtime
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        self.bridge, self.lifecycle, self.runtime = process_hub, lifecycle, runtime
        self.worker = process_hub.hub().start_worker_now()
        process_hub.hub().ensure_writer()

    def run_point(self, extension, data):
        extension(agent=None).execute(data=data)
        # what the extension left to a background thread (of the plugin's module generation)
        self.runtime.join_background(10)

    def names(self):
        return sorted(t.name for t in hub_threads())

    def test_switched_off_for_everyone_every_thread_stops_and_stays_stopped(self):
        self.assertIn("honcho-hub-delivery", self.names())
        self.run_point(self.off, toggle("honcho", False))
        self.assertEqual(self.names(), [])
        self.assertTrue(self.lifecycle.restart_held())
        self.assertIsNone(self.bridge.ensure_worker())  # a capture or job-loop tick starts none
        self.assertEqual(self.names(), [])

    def test_the_job_loop_lifts_a_switch_off_whose_switch_on_ran_no_extension(self):
        # A toggle file changed by hand turns the plugin on without toggle_plugin: Agent Zero runs
        # the job loop only while the plugin is on, so its tick ends the switch-off's hold.
        self.run_point(self.off, toggle("honcho", False))
        job_loop = classes_in(import_by_path(os.path.join(
            self.host.plugin_dir, "extensions", "python", "job_loop", "_50_honcho_worker.py")),
            StubExtension)[0]
        self.host.enabled_plugins = []  # still off: a tick (were one run) lifts nothing
        job_loop(agent=None).execute()
        self.assertTrue(self.lifecycle.restart_held())
        self.host.enabled_plugins = ["honcho"]  # on again, by hand
        job_loop(agent=None).execute()
        self.assertFalse(self.lifecycle.restart_held())
        self.assertIn("honcho-hub-delivery", self.names())

    def test_switched_on_the_worker_and_the_writer_start_at_once(self):
        self.run_point(self.off, toggle("honcho", False))
        self.run_point(self.on, toggle("honcho", True))
        self.assertFalse(self.lifecycle.restart_held())
        self.assertIn("honcho-hub-delivery", self.names())
        self.assertIn("honcho-hub-capture-writer", self.names())
        self.assertIsNot(self.bridge.hub().worker(), self.worker)

    def test_a_switch_off_that_failed_starts_the_threads_again(self):
        self.run_point(self.off, toggle("honcho", False))
        self.run_point(self.on, toggle("honcho", False, exception=OSError("disk full")))
        self.assertFalse(self.lifecycle.restart_held())
        self.assertIn("honcho-hub-delivery", self.names())

    def test_the_end_of_a_switch_off_keeps_the_threads_stopped(self):
        # v1.7 runs no extension of a plugin that is off; a host that did must not undo the stop
        self.run_point(self.off, toggle("honcho", False))
        self.run_point(self.on, toggle("honcho", False))
        self.assertTrue(self.lifecycle.restart_held())
        self.assertEqual(self.names(), [])

    def test_switched_on_during_an_update_nothing_starts_and_it_says_so(self):
        for order in ("update, then off", "off, then update"):
            with self.subTest(order):
                release_restart()
                if order.startswith("update"):
                    self.lifecycle.hold_restart(self.lifecycle.UPDATE_HOLD_S, "pre_update")
                self.run_point(self.off, toggle("honcho", False))
                if order.startswith("off"):
                    self.lifecycle.hold_restart(self.lifecycle.UPDATE_HOLD_S, "pre_update")
                self.assertEqual(self.bridge.after_toggle(toggle("honcho", True)), "held")
                self.runtime.join_background(10)
                self.assertTrue(self.lifecycle.restart_held())
                self.assertEqual(self.names(), [])

    def test_a_scoped_toggle_or_another_plugins_changes_nothing(self):
        calls = {"project": toggle("honcho", False, project="quiet"),
                 "profile": toggle("honcho", False, profile="researcher"),
                 "another plugin": toggle("other", False)}
        for name, data in calls.items():
            with self.subTest(name):
                self.run_point(self.off, data)
                self.run_point(self.on, data)
                self.assertTrue(self.worker.is_alive())
                self.assertFalse(self.lifecycle.restart_held())

    def test_arguments_by_keyword_are_read_as_agent_zero_passes_them(self):
        data = {"args": (), "kwargs": {"plugin_name": "honcho", "enabled": False,
                                       "project_name": "", "agent_profile": ""}}
        self.run_point(self.off, data)
        self.assertEqual(self.names(), [])


class ReleaseHoldTest(unittest.TestCase):
    """One hold a reason (switch-off, pre_update, uninstall), each with its own deadline: workers
    stay stopped while any of them runs, and switching on lifts only the switch-off's."""

    def setUp(self):
        self.clock = ManualClock(1000.0)
        self.addCleanup(release_restart)

    def held(self):
        return lifecycle.restart_held(self.clock)

    def test_only_the_reason_that_placed_the_hold_lifts_it(self):
        lifecycle.hold_restart(math.inf, "uninstall", self.clock)
        self.assertFalse(lifecycle.release_hold("switch-off"))
        self.assertTrue(self.held())
        lifecycle.hold_restart(math.inf, "switch-off", self.clock)
        self.assertTrue(lifecycle.release_hold("switch-off"))
        self.assertTrue(self.held(), "the uninstall's hold is still there")
        self.assertFalse(lifecycle.release_hold("switch-off"))
        self.assertTrue(lifecycle.release_hold("uninstall"))
        self.assertFalse(self.held())

    def test_switched_on_during_an_update_the_update_still_holds_for_its_own_time(self):
        lifecycle.hold_restart(lifecycle.UPDATE_HOLD_S, "pre_update", self.clock)
        lifecycle.hold_restart(math.inf, "switch-off", self.clock)
        self.assertTrue(lifecycle.release_hold("switch-off"))
        self.assertTrue(self.held())
        self.clock.advance(lifecycle.UPDATE_HOLD_S + 1)
        self.assertFalse(self.held())

    def test_an_update_while_off_ends_in_its_own_time_after_switching_on(self):
        lifecycle.hold_restart(math.inf, "switch-off", self.clock)
        lifecycle.hold_restart(lifecycle.UPDATE_HOLD_S, "pre_update", self.clock)
        self.assertTrue(lifecycle.release_hold("switch-off"))
        self.assertTrue(self.held())
        self.clock.advance(lifecycle.UPDATE_HOLD_S + 1)
        self.assertFalse(self.held(), "an update's hold is bounded, switched off or not")

    def test_the_same_reason_again_keeps_the_later_deadline(self):
        lifecycle.hold_restart(120, "pre_update", self.clock)
        self.clock.advance(100)
        lifecycle.hold_restart(10, "pre_update", self.clock)
        self.clock.advance(120 - 100 - 1)
        self.assertTrue(self.held())
        self.clock.advance(2)
        self.assertFalse(self.held())


if __name__ == "__main__":
    unittest.main()
