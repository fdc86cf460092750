"""An update through Agent Zero's plugin Hub, in parts: the install hook after the pull ends
pre_update's hold (whichever module generation placed it) and starts delivery again; status says
when the code on disk is not the code running, and that Agent Zero must restart to run it
(docs/updating.md)."""

import math
import os
import tempfile
import unittest
from unittest import mock

from hub_testkit import hub_threads, import_by_path, release_restart, stub_agent_zero
from outbox_helpers import ManualClock

from honcho_hub.delivery import lifecycle
from honcho_hub.ops.running_code import RunningCode, read_running_code, restart_sentence
from honcho_hub.ops.status import StatusParts, build_status
from honcho_hub.runtime import process_state
from honcho_hub.settings.config import build_settings

LOADED_AT = 1_800_000_000.0
BEFORE, AFTER = LOADED_AT - 60, LOADED_AT + 60


class RunningCodeTest(unittest.TestCase):
    def setUp(self):
        made = tempfile.TemporaryDirectory(prefix="honcho-code-")
        self.addCleanup(made.cleanup)
        self.folder = made.name
        self.write("plugin.yaml", "name: honcho\nversion: 2.1.0\n", BEFORE)
        for path in ("hooks.py", "honcho_hub/hub.py", "extensions/honcho_bridge/host.py",
                     "api/honcho_status.py", "tests/test_x.py", "docs/notes.md"):
            self.write(path, "# as loaded\n", BEFORE)

    def write(self, path, text, mtime):
        full = os.path.join(self.folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.utime(full, (mtime, mtime))

    def read(self, running_version="2.1.0"):
        return read_running_code(self.folder, LOADED_AT, running_version)

    def test_nothing_changed_since_the_code_loaded_needs_no_restart(self):
        code = self.read()
        self.assertEqual(code, RunningCode("2.1.0", "2.1.0", 0))
        self.assertFalse(code.restart_needed)
        self.assertIsNone(restart_sentence(code))

    def test_a_python_file_changed_after_the_load_needs_a_restart_to_run(self):
        for path in ("hooks.py", "honcho_hub/hub.py", "extensions/honcho_bridge/host.py",
                     "api/honcho_status.py", "honcho_hub/new_module.py"):
            with self.subTest(path):
                self.write(path, "# pulled\n", AFTER)
                self.assertTrue(self.read().restart_needed)
                self.write(path, "# as loaded\n", BEFORE)

    def test_files_no_process_imports_need_no_restart(self):
        for path in ("docs/notes.md", "tests/test_x.py", "webui/honcho-store.js",
                     "honcho_hub/__pycache__/hub.cpython-312.pyc", ".git/hooks/x.py",
                     "README.md", "bench/load.py", "prompts/honcho.md"):
            with self.subTest(path):
                self.write(path, "pulled\n", AFTER)
        self.assertEqual(self.read().changed_files, 0)

    def test_the_sentence_names_the_version_on_disk_and_the_one_running(self):
        self.write("plugin.yaml", "name: honcho\nversion: '2.2.0'\n", AFTER)
        self.write("honcho_hub/hub.py", "# pulled\n", AFTER)
        code = self.read()
        self.assertEqual((code.disk_version, code.changed_files), ("2.2.0", 1))
        self.assertEqual(restart_sentence(code), "Updated to 2.2.0 on disk; restart Agent Zero to"
                                                 " run it (2.1.0 is running)")

    def test_a_change_without_a_new_version_or_plugin_yaml_is_still_said(self):
        self.write("honcho_hub/hub.py", "# pulled\n", AFTER)
        same = self.read()
        os.remove(os.path.join(self.folder, "plugin.yaml"))
        unknown = self.read()
        self.assertIsNone(unknown.disk_version)
        for code in (same, unknown):
            self.assertEqual(restart_sentence(code), "The plugin's code changed on disk; restart"
                                                     " Agent Zero to run it (2.1.0 is running)")


class RestartInStatusTest(unittest.TestCase):
    settings = build_settings({}, {}, {"HONCHO_API_URL": "http://honcho.test",
                                       "HONCHO_API_KEY": "hch-update-key-1357",
                                       "HONCHO_OUTBOX_PATH": "/tmp/never-opened/outbox.sqlite3"})

    def status(self, code):
        parts = StatusParts(worker={"state": "idle", "metrics": {"last_success_at": 1.0},
                                    "circuits": {}}, code=code)
        return build_status(self.settings, parts, 2.0)

    def test_a_restart_needed_is_an_amber_reason_in_plain_words(self):
        status = self.status(RunningCode("2.1.0", "2.2.0", 3))
        self.assertEqual(status["code"], {
            "running_version": "2.1.0", "disk_version": "2.2.0", "changed_files": 3,
            "restart_needed": True,
            "restart": "Updated to 2.2.0 on disk; restart Agent Zero to run it (2.1.0 is running)"})
        self.assertEqual((status["health"], status["health_reasons"]),
                         ("amber", [status["code"]["restart"]]))

    def test_the_code_on_disk_running_or_unread_changes_no_health(self):
        running = self.status(RunningCode("2.1.0", "2.1.0", 0))
        self.assertEqual((running["health"], running["code"]["restart"]), ("green", None))
        unread = self.status(None)  # the command line: its own process, just started
        self.assertEqual((unread["health"], unread["code"]), ("green", None))


class EndUpdateHoldTest(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(1000.0)
        self.addCleanup(release_restart)

    def test_it_lifts_only_pre_updates_hold_of_whichever_generation_placed_it(self):
        with stub_agent_zero():  # the plugin as Agent Zero imports it: another module generation
            import importlib

            older = importlib.import_module("usr.plugins.honcho.honcho_hub.delivery.lifecycle")
            older.hold_restart(lifecycle.UPDATE_HOLD_S, older.UPDATE, self.clock)
            older.hold_restart(math.inf, "uninstall", self.clock)
            self.assertTrue(lifecycle.end_update_hold(), "this generation lifts the older one's")
            self.assertTrue(older.restart_held(self.clock), "the uninstall's hold is kept")
            self.assertEqual(set(process_state().restart_hold["holds"]), {"uninstall"})
            self.assertFalse(lifecycle.end_update_hold(), "lifted once")

    def test_no_hold_or_one_of_another_shape_is_left_as_it_is(self):
        self.assertFalse(lifecycle.end_update_hold())
        state = process_state()
        odd = {"until": 5.0, "reason": "pre_update"}  # a shape an older release might have left
        with state.lock:
            state.restart_hold = odd  # type: ignore[assignment]
        self.assertFalse(lifecycle.end_update_hold())
        self.assertIs(state.restart_hold, odd)

    def test_the_hold_after_pre_update_is_short_when_no_install_ends_it(self):
        lifecycle.hold_restart(lifecycle.UPDATE_HOLD_S, lifecycle.UPDATE, self.clock)
        self.assertLessEqual(lifecycle.UPDATE_HOLD_S, 30.0)
        self.clock.advance(lifecycle.UPDATE_HOLD_S + 0.1)
        self.assertFalse(lifecycle.restart_held(self.clock))


class InstallAfterUpdateTest(unittest.TestCase):
    """pre_update then install, as Agent Zero's update runs them around the pull (hooks.py as Agent
    Zero loads it, the real worker; pip made to fail at once: the outcome does not matter here)."""

    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.addCleanup(release_restart)
        self.hooks = import_by_path(os.path.join(self.host.plugin_dir, "hooks.py"))
        from usr.plugins.honcho.extensions.honcho_bridge import process_hub
        from usr.plugins.honcho.honcho_hub import runtime
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle as hooked

        self.process_hub, self.runtime, self.lifecycle = process_hub, runtime, hooked
        self.assertIsNotNone(process_hub.hub().start_worker_now())
        offline = mock.patch.dict(os.environ, {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""})
        offline.start()
        self.addCleanup(offline.stop)

    def workers(self):
        return [t.name for t in hub_threads() if t.name == "honcho-hub-delivery"]

    def install(self):
        report = self.hooks.install()
        self.runtime.join_background(10)  # the start install left to a background thread
        return report["delivery"]

    def test_install_after_pre_update_starts_the_worker_again_at_once(self):
        self.hooks.pre_update()
        self.assertEqual(self.workers(), [])
        self.assertTrue(self.lifecycle.restart_held())
        self.assertEqual(self.install(), "resumed")
        self.assertFalse(self.lifecycle.restart_held())
        self.assertEqual(self.workers(), ["honcho-hub-delivery"])

    def test_install_without_an_update_or_under_another_hold_starts_nothing(self):
        self.assertEqual(self.install(), "no_update")
        self.hooks.pre_update()
        self.lifecycle.hold_restart(math.inf, "uninstall")
        self.assertEqual(self.install(), "held")
        self.assertEqual(self.workers(), [])


if __name__ == "__main__":
    unittest.main()
