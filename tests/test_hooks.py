"""hooks.py loaded as Agent Zero loads it: config merge/save, install, pre_update and uninstall."""

import importlib
import json
import math
import os
import sqlite3
import tempfile
import threading
import time
import unittest

from hub_testkit import ROOT, import_by_path, link_plugin_folder, release_restart, stub_agent_zero
from outbox_helpers import ManualClock, enqueue

from honcho_hub.delivery import lifecycle
from honcho_hub.settings.spec import defaults
from honcho_hub.storage.db import SCHEMA_VERSION
from honcho_hub.storage.outbox import NewEvent, Outbox

HOOKED = "usr.plugins.honcho.honcho_hub."  # the core's logger names when hooks.py imports it
SECRET = "hch-v2-0123456789abcdefSECRET"


class _EnvVars:
    """Set environment variables for a block (pip reads them in the child process)."""

    def __init__(self, **values):
        self.values, self.saved = values, {}

    def __enter__(self):
        for key, value in self.values.items():
            self.saved[key] = os.environ.get(key)
            os.environ[key] = value

    def __exit__(self, *exc):
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class ConfigHooksTest(unittest.TestCase):
    def setUp(self):
        self.stub = stub_agent_zero(saved=False)
        self.host = self.stub.__enter__()
        self.addCleanup(self.stub.__exit__, None, None, None)
        self.hooks = import_by_path(os.path.join(self.host.plugin_dir, "hooks.py"))
        # in the temporary plugin folder, not the checkout
        self.global_file = self.host.global_config

    def write(self, path, data):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)

    def test_read_merges_the_saved_file_over_every_default(self):
        self.write(self.global_file, {"batch_size": 50, "workspace_id": "mine"})
        config = self.hooks.get_plugin_config(default={"batch_size": 50, "workspace_id": "mine"})
        self.assertEqual(config, defaults() | {"batch_size": 50, "workspace_id": "mine"})

    def test_without_a_saved_file_the_defaults_come_back(self):
        self.assertEqual(self.hooks.get_plugin_config(default=None), defaults())

    def test_project_config_changes_recall_but_not_identity(self):
        self.write(self.global_file, {"workspace_id": "global-ws"})
        project_file = self.host.project_meta("alpha", "plugins", "honcho", "config.json")
        self.write(project_file,
                   {"workspace_id": "hijack", "recall_enabled": False, "api_key": SECRET})
        with self.assertLogs(HOOKED + "settings.config", "WARNING") as logs:
            config = self.hooks.get_plugin_config(default={}, project_name="alpha")
        self.assertEqual((config["workspace_id"], config["recall_enabled"]), ("global-ws", False))
        self.assertNotIn("api_key", config)
        self.assertNotIn(SECRET, "".join(logs.output))
        self.assertTrue(any("'api_key'" in line for line in logs.output))
        # Agent Zero reads config every turn
        with self.assertNoLogs(HOOKED + "settings.config", "WARNING"):
            self.hooks.get_plugin_config(default={}, project_name="alpha")

    def test_a_corrupt_saved_file_reads_as_defaults(self):
        with open(self.global_file, "w") as handle:
            handle.write("{not json")
        self.assertEqual(self.hooks.get_plugin_config(default={}), defaults())

    def test_save_never_writes_a_key_and_drops_unknown_fields(self):
        saved = self.hooks.save_plugin_config(
            settings=defaults() | {"api_key": SECRET, "HONCHO_API_KEY": SECRET, "x": 1})
        self.assertEqual(saved, defaults())
        self.assertNotIn(SECRET, json.dumps(saved))

    def test_a_project_save_keeps_only_what_a_project_may_change(self):
        saved = self.hooks.save_plugin_config(settings=defaults() | {"api_key": SECRET},
                                              project_name="alpha")
        self.assertIn("recall_enabled", saved)
        self.assertIn("scope_strategy", saved)
        for name in ("workspace_id", "api_url", "outbox_path", "batch_size", "api_key"):
            self.assertNotIn(name, saved)


class PluginFolderTest(unittest.TestCase):
    """hooks.py reads the plugin folder it was loaded from; in the tests that folder is
    temporary."""

    def write(self, path, data):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)

    def test_the_hooks_read_the_config_json_of_the_temporary_plugin_folder(self):
        with stub_agent_zero() as host:
            hooks = import_by_path(os.path.join(host.plugin_dir, "hooks.py"))
            self.assertEqual(hooks.GLOBAL_CONFIG, host.global_config)
            real = os.path.realpath(hooks.GLOBAL_CONFIG)
            self.assertTrue(real.startswith(os.path.realpath(host.root) + os.sep), real)
            self.write(host.global_config, {"workspace_id": "temp-ws"})
            self.assertEqual(hooks.get_plugin_config(default=None)["workspace_id"], "temp-ws")

    def test_a_config_json_saved_in_the_checkout_is_not_read(self):
        with tempfile.TemporaryDirectory() as folder:
            # stands for this checkout after a user saved settings
            checkout = os.path.join(folder, "checkout")
            link_plugin_folder(ROOT, checkout)
            self.write(os.path.join(checkout, "config.json"),
                       {"batch_size": 7, "workspace_id": "saved-by-a-user"})
            with stub_agent_zero(source=checkout, saved=False) as host:
                hooks = import_by_path(os.path.join(host.plugin_dir, "hooks.py"))
                self.assertEqual(hooks.get_plugin_config(default=None), defaults())
                self.assertFalse(os.path.exists(host.global_config))


class InstallTest(unittest.TestCase):
    def setUp(self):
        self.stub = stub_agent_zero()
        self.host = self.stub.__enter__()
        self.addCleanup(self.stub.__exit__, None, None, None)
        self.hooks = import_by_path(os.path.join(self.host.plugin_dir, "hooks.py"))
        self.constraints = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
        self.constraints.write("tenacity==0.0.0\n")  # no such release: pip must fail
        self.constraints.close()
        self.addCleanup(os.remove, self.constraints.name)

    def test_install_with_pip_failing_creates_the_outbox_then_migrates_it_without_raising(self):
        # its folder does not exist yet
        outbox = os.path.join(self.host.root, "state", "outbox.sqlite3")
        with _EnvVars(PIP_NO_INDEX="1", PIP_CONSTRAINT=self.constraints.name, PIP_FIND_LINKS="",
                      HONCHO_OUTBOX_PATH=outbox):
            with self.assertLogs(HOOKED + "delivery.lifecycle", "WARNING") as logs:
                first = self.hooks.install()
                second = self.hooks.install()
        self.assertEqual(first, {"requirements": "failed", "installer": "pip",
                                 "outbox": "created", "upgrade_1x": "nothing to upgrade",
                                 "delivery": "no_update"})
        self.assertEqual(second, {"requirements": "failed", "installer": "pip",
                                  "outbox": "migrated", "upgrade_1x": "nothing to upgrade",
                                  "delivery": "no_update"})
        conn = sqlite3.connect(outbox)
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        conn.close()
        self.assertTrue(any("running degraded" in line for line in logs.output))

    def test_an_outbox_that_cannot_be_created_is_reported_by_code_not_raised(self):
        with tempfile.TemporaryDirectory() as folder:
            blocker = os.path.join(folder, "a-file")
            open(blocker, "w").close()
            for name, path in (("relative path", "state/outbox.sqlite3"),
                               ("folder is a file", os.path.join(blocker, "outbox.sqlite3"))):
                with self.subTest(name):
                    with self.assertLogs("honcho_hub.delivery.lifecycle", "WARNING") as logs:
                        self.assertEqual(lifecycle.migrate_outbox(path), "outbox_unavailable")
                    self.assertNotIn(path, "".join(logs.output))
                    self.assertFalse(os.path.exists(
                        os.path.join(os.getcwd(), "state", "outbox.sqlite3")))

    def test_install_migrates_an_existing_outbox_idempotently(self):
        outbox = os.path.join(self.host.root, "outbox.sqlite3")
        sqlite3.connect(outbox).close()  # an outbox from before any schema: user_version 0
        with _EnvVars(PIP_NO_INDEX="1", PIP_CONSTRAINT=self.constraints.name,
                      HONCHO_OUTBOX_PATH=outbox):
            self.assertEqual(self.hooks.install()["outbox"], "migrated")
            self.assertEqual(self.hooks.install()["outbox"], "migrated")
        conn = sqlite3.connect(outbox)
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        conn.close()

    def test_pip_success_and_missing_requirements(self):
        with tempfile.TemporaryDirectory() as folder:
            requirements = os.path.join(folder, "requirements.txt")
            with open(requirements, "w") as handle:
                handle.write("pyyaml\n")  # already installed wherever these tests run
            with _EnvVars(PIP_NO_INDEX="1"):
                self.assertEqual(lifecycle.install_requirements(requirements),
                                 lifecycle.Installed("ok", "pip"))
            self.assertEqual(lifecycle.install_requirements(os.path.join(folder, "absent.txt")),
                             lifecycle.Installed("missing"))


class _FakeWorker(threading.Thread):
    """A real thread that behaves like the delivery worker's lifecycle surface."""

    honcho_hub_worker = True

    def __init__(self, clock=time.monotonic):
        super().__init__(name="honcho-hub-test-worker", daemon=True)
        self.stopped = threading.Event()
        self.drains = []
        self.clock = clock
        self.held_when_stopped = None

    def run(self):
        self.stopped.wait()

    def drain(self, timeout_s):
        self.drains.append(timeout_s)
        return {"delivered": 3, "dead": 0, "retried": 0}

    def stop(self, timeout_s):
        if self.held_when_stopped is None:  # whether a new worker could have started meanwhile
            self.held_when_stopped = lifecycle.restart_held(self.clock)
        self.stopped.set()
        self.join(timeout_s)


class RestartHoldTest(unittest.TestCase):
    """After uninstall or pre_update the plugin's workers stay stopped: Hub.ensure_worker asks
    lifecycle.restart_held() before starting one."""

    def setUp(self):
        self.clock = ManualClock(1000.0)
        self.addCleanup(release_restart)

    def test_a_bounded_hold_ends_after_its_time(self):
        self.assertFalse(lifecycle.restart_held(self.clock))
        lifecycle.hold_restart(120.0, "pre_update", self.clock)
        self.assertTrue(lifecycle.restart_held(self.clock))
        self.clock.advance(119.9)
        self.assertTrue(lifecycle.restart_held(self.clock))
        # a failed `git pull` never reloads the modules: the hold ends by itself
        self.clock.advance(0.2)
        self.assertFalse(lifecycle.restart_held(self.clock))

    def test_an_indefinite_hold_is_not_shortened_by_a_bounded_one(self):
        lifecycle.hold_restart(math.inf, "uninstall", self.clock)
        lifecycle.hold_restart(120.0, "pre_update", self.clock)
        self.clock.advance(10 ** 9)
        self.assertTrue(lifecycle.restart_held(self.clock))

    def test_a_hold_binds_only_the_module_generation_that_made_it(self):
        with stub_agent_zero():  # the plugin as Agent Zero imports it: another module generation
            hooked_lifecycle = importlib.import_module(
                "usr.plugins.honcho.honcho_hub.delivery.lifecycle")
            self.assertIsNot(hooked_lifecycle, lifecycle)
            hooked_lifecycle.hold_restart(math.inf, "uninstall", self.clock)
            self.assertTrue(hooked_lifecycle.restart_held(self.clock))
            self.assertFalse(lifecycle.restart_held(self.clock),
                             "a newer generation starts workers again")
            lifecycle.hold_restart(120.0, "pre_update", self.clock)
            self.assertTrue(lifecycle.restart_held(self.clock))
            self.assertFalse(hooked_lifecycle.restart_held(self.clock),
                             "the latest hold is the one that counts")

    def test_stop_workers_holds_restarts_before_it_stops_and_only_when_asked(self):
        for hold_s, held in ((0.0, False), (120.0, True), (math.inf, True)):
            with self.subTest(hold_s=hold_s):
                release_restart()
                worker = _FakeWorker(self.clock)
                worker.start()
                self.addCleanup(worker.stop, 1.0)
                report = lifecycle.stop_workers(hold_s=hold_s, monotonic=self.clock)
                self.assertEqual(report["stopped"], 1)
                self.assertEqual(worker.held_when_stopped, held)
                self.assertEqual(lifecycle.restart_held(self.clock), held)


class WorkerStopTest(unittest.TestCase):
    def setUp(self):
        self.stub = stub_agent_zero()
        self.host = self.stub.__enter__()
        self.addCleanup(self.stub.__exit__, None, None, None)
        self.hooks = import_by_path(os.path.join(self.host.plugin_dir, "hooks.py"))

    def start_worker(self):
        worker = _FakeWorker()
        worker.start()
        self.addCleanup(worker.stop, 1.0)
        return worker

    def test_pre_update_drains_at_most_five_seconds_then_stops(self):
        worker = self.start_worker()
        report = self.hooks.pre_update()
        self.assertEqual(report, {"workers": 1, "drained": 3, "stopped": 1})
        self.assertFalse(worker.is_alive())
        self.assertTrue(0 < worker.drains[0] <= 5.0)
        self.assertEqual(self.hooks.pre_update(), {"workers": 0, "drained": 0, "stopped": 0})

    def test_uninstall_stops_without_draining_and_keeps_the_outbox(self):
        worker = self.start_worker()
        # the one the saved settings name
        outbox = os.path.join(self.host.root, "state", "outbox.sqlite3")
        with open(self.host.global_config, "w", encoding="utf-8") as handle:
            json.dump({"outbox_path": outbox}, handle)
        box = Outbox(outbox)
        enqueue(box, [NewEvent("ev_kept", "https://api.honcho.dev#agent-zero", "agent-zero",
                               "chat-u", "user", "user", "kept", 1.0)])
        box.close()
        report = self.hooks.uninstall()
        self.assertEqual(report["stopped"], 1)
        self.assertEqual(worker.drains, [])
        box = Outbox(outbox)
        self.assertEqual(box.stats()["counts"]["pending"], 1)
        box.close()
        self.assertEqual(self.hooks.uninstall()["workers"], 0)

    def test_a_worker_that_fails_to_stop_does_not_stop_the_others(self):
        class Broken(_FakeWorker):
            def stop(self, timeout_s):
                super().stop(timeout_s)
                raise RuntimeError("boom")
        broken, good = Broken(), self.start_worker()
        broken.start()
        with self.assertLogs("honcho_hub.delivery.lifecycle", "ERROR"):
            report = lifecycle.stop_workers()
        self.assertEqual((report["workers"], report["stopped"]), (2, 1))
        self.assertFalse(good.is_alive())


if __name__ == "__main__":
    unittest.main()
