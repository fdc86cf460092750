"""The first start of the real v1.7 web UI after path (a) of docs/upgrading-from-1x.md: the upgrade
of 1.x's config.json writes into the plugin's folder only once Agent Zero has registered its file
watchers.

Agent Zero v1.7's `init_a0` (run_ui.py) loads the saved chats, which runs our agent_init, and
starts the job loop, before its `_functions/__main__/init_a0/end` extensions, where
`_10_register_watchdogs` registers the watchers of `usr/plugins/**` and the projects. A file created
there while a watcher is being registered can deadlock the start (the watcher registry's lock
against the observer's). The test plugin `watchers_marker` records, right after
`_10_register_watchdogs`, the watchers registered and whether the upgrade had written yet; its
`_05_` extension first lets an upgrade already under way finish, so what it records does not depend
on thread timing.

The UI runs as `python run_ui.py` does (run_ui as `__main__`), as in host_update.py: only then does
Agent Zero run its `init_a0` extensions.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest
import uuid

import host_kit
from host_update import free_port, serve_ui, stop_ui

MARKER_PLUGIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchers_marker")
V1_CONFIG = {"honcho_workspace_id": "", "honcho_user_id": "dana", "honcho_agent_peer_id": "jarvis",
             "honcho_cache_ttl": 300, "honcho_max_context_tokens": 800, "honcho_debug": False}
UPGRADED_KEYS = ["agent_peer_id", "cache_ttl_s", "debug", "max_context_tokens", "user_peer_id",
                 "workspace_id"]


def write(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(content)


class FirstStartAfterGitSwitchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = os.path.realpath(tempfile.mkdtemp(prefix="honcho-upgrade-start-"))
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        workspace = "upgrade-start-" + uuid.uuid4().hex[:12]
        cls.marker = os.path.join(cls.tmp, "watchers.json")
        env = {**os.environ, "HONCHO_API_URL": host_kit.required_env("HONCHO_REAL_URL"),
               "HONCHO_OUTBOX_PATH": os.path.join(cls.tmp, "outbox.sqlite3"),
               "WATCHERS_MARKER": cls.marker}
        env.pop("HONCHO_WORKSPACE_ID", None)  # 1.x's config.json names it
        tree = host_kit.new_tree(cls.tmp)
        shutil.copytree(MARKER_PLUGIN, os.path.join(tree, "usr", "plugins", "watchers_marker"))
        cls.plugin_dir = os.path.join(tree, "usr", "plugins", host_kit.PLUGIN)
        # What path (a) leaves: 1.x's saved settings beside our files; and a chat saved before,
        # which Agent Zero loads (agent_init runs) before it registers its watchers.
        write(os.path.join(cls.plugin_dir, "config.json"),
              json.dumps({**V1_CONFIG, "honcho_workspace_id": workspace}))
        chat = uuid.uuid4().hex[:8]
        write(os.path.join(tree, "usr", "chats", chat, "chat.json"),
              json.dumps({"id": chat, "name": "saved under 1.x", "agents": [{"number": 0}]}))
        cls.record = os.path.join(cls.plugin_dir, "config.1x.json")
        ui = serve_ui(tree, free_port(), env, os.path.join(cls.tmp, "ui.log"))
        cls.addClassCleanup(stop_ui, ui)
        host_kit.wait_for(lambda: os.path.exists(cls.record), 30, "the 1.x upgrade")
        with open(cls.marker, encoding="utf-8") as handle:
            cls.seen = json.load(handle)

    def test_the_watchers_were_registered_when_the_marker_was_written(self) -> None:
        self.assertIn("plugins_roots", self.seen["watchers"])
        self.assertIn("plugins_projects", self.seen["watchers"])

    def test_the_upgrade_had_written_nothing_into_the_plugin_folder_by_then(self) -> None:
        self.assertEqual((self.seen["record_existed"], self.seen["lock_existed"]), (False, False),
                         self.seen)
        self.assertEqual(self.seen["config_keys"], sorted(V1_CONFIG), self.seen)

    def test_the_upgrade_ran_after_the_watchers_were_registered(self) -> None:
        self.assertGreaterEqual(os.stat(self.record).st_mtime_ns,
                                os.stat(self.marker).st_mtime_ns)
        with open(os.path.join(self.plugin_dir, "config.json"), encoding="utf-8") as handle:
            self.assertEqual(sorted(json.load(handle)), UPGRADED_KEYS)


if __name__ == "__main__":
    unittest.main()
