"""Tests write only into temporary folders: what the plugin and Agent Zero write lands outside the
checkout."""

import json
import os
import types
import unittest

from hub_testkit import ROOT, StubAgent, StubHistoryMessage, import_by_path, stub_agent_zero

from honcho_hub.settings.spec import defaults

USER_EXT = ("extensions/python/_functions/agent/Agent/hist_add_user_message/end/"
            "_50_honcho_capture_user.py")
# tool caches, set aside
NOT_WALKED = {".git", ".venv", "__pycache__", ".pytest_cache", "node_modules"}


def checkout_files() -> set[str]:
    """Every file of the checkout except version control, the venv and tool caches."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in NOT_WALKED]
        found.update(os.path.relpath(os.path.join(dirpath, name), ROOT) for name in filenames)
    return found


class WorkingTreeTest(unittest.TestCase):
    def test_settings_toggles_outbox_and_cache_marker_land_in_the_temporary_host(self):
        before = checkout_files()
        with stub_agent_zero() as host:
            hooks = import_by_path(os.path.join(host.plugin_dir, "hooks.py"))
            # What Agent Zero writes into a plugin folder: the saved settings and the toggle.
            with open(host.global_config, "w", encoding="utf-8") as handle:
                json.dump(hooks.save_plugin_config(
                    settings=defaults() | dict(host.config) | {"workspace_id": "tree-ws"}), handle)
            open(os.path.join(host.plugin_dir, ".toggle-1"), "w").close()
            self.assertEqual(hooks.get_plugin_config(default=None)["workspace_id"], "tree-ws")
            # What the plugin writes: the outbox (capture) and the recall cache marker beside it
            # (clear cache).
            agent = StubAgent(0)
            data = {"args": (agent, types.SimpleNamespace(message="remember tea", attachments=[],
                                                          id="")),
                    "kwargs": {}, "result": StubHistoryMessage(False, "h-1"), "exception": None}
            extension = import_by_path(os.path.join(host.plugin_dir, USER_EXT))
            next(v for k, v in vars(extension).items()
                 if k.startswith("Honcho"))(agent=agent).execute(data=data)
            from usr.plugins.honcho.extensions.honcho_bridge.operations import run_operation
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import hub
            # Captured messages reach the outbox on the writer's thread; the cache marker is only
            # written beside an outbox that exists, so let this message create it first.
            hub().flush_capture()
            self.assertTrue(run_operation({"action": "clear_cache"})["ok"])
            hooks.uninstall()
            written = {name for name in os.listdir(os.path.dirname(host.config["outbox_path"]))}
            # they were written, in temp
            self.assertIn(os.path.basename(host.config["outbox_path"]), written)
            self.assertTrue(any(name.endswith(".recall-epoch") for name in written), written)
        self.assertEqual(sorted(checkout_files() - before), [])


if __name__ == "__main__":
    unittest.main()
