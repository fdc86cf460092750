"""When the upgrade from the Hub's honcho 1.x writes, in a process whose start is run_ui's
`init_a0` and in one without it (the harness, the command line, tests), against the stub host.

Agent Zero v1.7 registers its file watchers in `_functions/__main__/init_a0/end/_10_register_
watchdogs.py`, after loading the saved chats (our agent_init) and starting the job loop; a file
written in a watched folder meanwhile can deadlock that registration. So between init_a0's start and
its end, ensure_worker leaves the upgrade to our end extension, numbered after the watchers'.
tests/host/host_upgrade_start.py checks the same in the real web UI.
"""

import json
import os
import unittest

from hub_testkit import (
    ROOT,
    StubExtension,
    checkout_text,
    classes_in,
    import_by_path,
    release_restart,
    stub_agent_zero,
)

POINT = os.path.join("extensions", "python", "_functions", "__main__", "init_a0")
START = os.path.join(POINT, "start", "_50_honcho_ui_start.py")
END = os.path.join(POINT, "end", "_20_honcho_upgrade_1x.py")
WATCHERS = "_10_register_watchdogs.py"  # Agent Zero v1.7's, where it registers its file watchers
V1_CONFIG = {"honcho_workspace_id": "ws-1x", "honcho_user_id": "dana", "honcho_cache_ttl": 300}
UPGRADED = {"workspace_id": "ws-1x", "user_peer_id": "dana", "cache_ttl_s": 300}


class UpgradeAtStartTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.addCleanup(release_restart)
        self.write_1x_config()
        from usr.plugins.honcho.extensions.honcho_bridge import process_hub
        from usr.plugins.honcho.honcho_hub import runtime

        self.bridge, self.runtime = process_hub, runtime

    def write_1x_config(self):
        with open(self.host.global_config, "w", encoding="utf-8") as handle:
            json.dump(V1_CONFIG, handle)

    def run_point(self, path):
        """Our extension at `path`, loaded and run as Agent Zero's @extensible runs it."""
        loaded = import_by_path(os.path.join(self.host.plugin_dir, path))
        extension = classes_in(loaded, StubExtension)[0](agent=None)
        extension.execute(data={"args": (), "kwargs": {}, "exception": None})

    def settled_config(self):
        """config.json once what was left to a background thread has run."""
        self.assertTrue(self.runtime.join_background(10))
        with open(self.host.global_config, encoding="utf-8") as handle:
            return json.load(handle)

    def written_beside_config(self):
        return sorted(name for name in os.listdir(self.host.plugin_dir)
                      if name.startswith("config.") and name != "config.json")

    def test_without_run_uis_start_the_first_ensure_worker_upgrades(self):
        self.bridge.ensure_worker()
        self.assertEqual(self.settled_config(), UPGRADED)

    def test_while_run_uis_start_runs_ensure_worker_writes_nothing_beside_the_config(self):
        self.run_point(START)
        self.bridge.ensure_worker()  # a saved chat's agent_init, the job loop's first tick
        self.bridge.ensure_worker()
        self.assertEqual(self.settled_config(), V1_CONFIG)
        self.assertEqual(self.written_beside_config(), [])

    def test_the_end_of_run_uis_start_upgrades(self):
        self.run_point(START)
        self.bridge.ensure_worker()
        self.run_point(END)
        self.assertEqual(self.settled_config(), UPGRADED)
        self.assertEqual(self.written_beside_config(), ["config.1x.json", "config.json.lock"])

    def test_the_end_of_a_start_that_ran_no_chat_upgrades_too(self):
        self.run_point(START)
        self.run_point(END)
        self.assertEqual(self.settled_config(), UPGRADED)

    def test_after_the_end_ensure_worker_upgrades_no_second_time(self):
        self.run_point(START)
        self.run_point(END)
        self.settled_config()
        self.write_1x_config()  # 1.x names written again, by hand: the next start's to upgrade
        self.bridge.ensure_worker()
        self.assertEqual(self.settled_config(), V1_CONFIG)

    def test_the_upgrade_extension_runs_after_agent_zeros_watchers_are_registered(self):
        # Agent Zero runs a point's extensions sorted by file name, its own and plugins' together.
        v1_7 = json.loads(checkout_text("tests", "fixtures", "agent_zero_v1_7_names.json"))
        point = "/".join(os.path.dirname(END).split(os.sep)[2:])
        self.assertIn(WATCHERS, v1_7["extensions"][point])
        self.assertTrue(os.path.isfile(os.path.join(ROOT, END)))
        self.assertLess(WATCHERS, os.path.basename(END))


if __name__ == "__main__":
    unittest.main()
