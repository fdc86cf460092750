"""Upgrading from the Plugin Hub's `honcho` 1.x (settings/upgrade.py): its config.json taken over
once under our names, what we cannot use set aside and reported, and nothing broken by a 1.x file
on the way (fixtures in tests/fixtures/honcho_1x, written by us)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from hub_testkit import stub_agent_zero
from test_config import A0_USR

from honcho_hub.cli import knobs
from honcho_hub.ops.status import StatusParts, build_status, status_text
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.effective import effective_settings, read_layers
from honcho_hub.settings.files import merged_config
from honcho_hub.settings.upgrade import RECORD_NAME, last_upgrade, upgrade_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "honcho_1x")
DEFAULT_CONFIG = os.path.join(ROOT, "default_config.yaml")
NOW = 1_900_000_000.0


def fixture(version):
    with open(os.path.join(FIXTURES, f"config-{version}.json"), encoding="utf-8") as handle:
        return json.load(handle)


class UpgradeCase(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="honcho-upgrade-")
        self.addCleanup(shutil.rmtree, self.folder, True)
        self.path = os.path.join(self.folder, "config.json")
        self.record = os.path.join(self.folder, RECORD_NAME)

    def write(self, content):
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.write(content if isinstance(content, str) else json.dumps(content))

    def saved(self):
        with open(self.path, encoding="utf-8") as handle:
            return json.load(handle)

    def records(self):
        with open(self.record, encoding="utf-8") as handle:
            return json.load(handle)["upgrades"]

    def upgrade(self, **kw):
        return upgrade_config(self.path, now=lambda: NOW, **kw)

    def settings(self, secrets=None):
        layers = read_layers(DEFAULT_CONFIG, self.path)
        plugin = {**(layers.default_config or {}), **layers.global_config}
        return build_settings(plugin, secrets or {}, {}, agent_zero_usr=A0_USR)


class MappingTest(UpgradeCase):
    def test_a_1_2_0_config_moves_every_setting_under_its_new_name(self):
        self.write(fixture("1.2.0"))
        upgrade = self.upgrade()
        self.assertEqual(self.saved(), {"workspace_id": "family-memory", "user_peer_id": "dana",
                                        "agent_peer_id": "jarvis", "cache_ttl_s": 300,
                                        "max_context_tokens": 800, "debug": True})
        self.assertEqual(upgrade.moved, {"honcho_workspace_id": "workspace_id",
                                         "honcho_user_id": "user_peer_id",
                                         "honcho_agent_peer_id": "agent_peer_id",
                                         "honcho_cache_ttl": "cache_ttl_s",
                                         "honcho_max_context_tokens": "max_context_tokens",
                                         "honcho_debug": "debug"})
        self.assertEqual(upgrade.set_aside, {})

    def test_a_1_1_0_config_moves_every_setting_under_its_new_name(self):
        self.write(fixture("1.1.0"))
        self.assertEqual(len(self.upgrade().moved), 6)
        self.assertEqual(self.saved(), {"workspace_id": "home-memory", "user_peer_id": "user",
                                        "agent_peer_id": "agent-zero", "cache_ttl_s": 120,
                                        "max_context_tokens": 500, "debug": False})

    def test_settings_built_from_the_upgraded_file_carry_the_1x_identity_and_recall(self):
        self.write(fixture("1.2.0"))
        self.upgrade()
        settings = self.settings()
        self.assertEqual((settings.workspace_id, settings.user_peer_id, settings.agent_peer_id),
                         ("family-memory", "dana", "jarvis"))
        self.assertEqual((settings.cache_ttl_s, settings.max_context_tokens, settings.debug),
                         (300.0, 800, True))

    def test_our_own_settings_beside_the_1x_ones_are_kept(self):
        self.write({"honcho_workspace_id": "family-memory", "recall_mode": "tools"})
        self.upgrade()
        self.assertEqual(self.saved(), {"workspace_id": "family-memory", "recall_mode": "tools"})


class SetAsideTest(UpgradeCase):
    def test_unknown_keys_are_set_aside_with_their_values_and_reported_by_name(self):
        self.write({"honcho_workspace_id": "family-memory", "honcho_session_prefix": "a0",
                    "theme": "dark"})
        upgrade = self.upgrade()
        self.assertEqual(set(upgrade.set_aside), {"honcho_session_prefix", "theme"})
        self.assertEqual(self.saved(), {"workspace_id": "family-memory"})
        [record] = self.records()
        self.assertEqual(record["set_aside"], {"honcho_session_prefix": "a0", "theme": "dark"})
        self.assertEqual(record["original"]["theme"], "dark")

    def test_a_value_the_setting_refuses_is_set_aside_not_moved(self):
        self.write({"honcho_workspace_id": "family-memory", "honcho_cache_ttl": 0,
                    "honcho_user_id": ""})
        upgrade = self.upgrade()
        self.assertEqual(set(upgrade.set_aside), {"honcho_cache_ttl", "honcho_user_id"})
        self.assertIn("1", upgrade.set_aside["honcho_cache_ttl"])  # says what it accepts
        self.assertEqual(self.saved(), {"workspace_id": "family-memory"})

    def test_a_project_file_keeps_only_what_a_project_may_change(self):
        self.write(fixture("1.2.0"))
        upgrade = self.upgrade(is_project=True)
        self.assertEqual(self.saved(), {"cache_ttl_s": 300, "max_context_tokens": 800})
        self.assertEqual(set(upgrade.set_aside), {"honcho_workspace_id", "honcho_user_id",
                                                  "honcho_agent_peer_id", "honcho_debug"})
        self.assertIn("global", upgrade.set_aside["honcho_workspace_id"])


class OnceAndSafeTest(UpgradeCase):
    def test_the_upgrade_runs_once(self):
        self.write(fixture("1.2.0"))
        self.assertIsNotNone(self.upgrade())
        with open(self.path, "rb") as handle:
            after_first = handle.read()
        self.assertIsNone(self.upgrade())
        with open(self.path, "rb") as handle:
            self.assertEqual(handle.read(), after_first)
        self.assertEqual(len(self.records()), 1)

    def test_nothing_to_upgrade_writes_nothing_beside_the_file(self):
        # Agent Zero v1.7's start deadlocks on a file created in its watched plugin folder while it
        # registers its watchers, and every start of ours looks for a 1.x file.
        for saved in (None, {"workspace_id": "ours"}):
            with self.subTest(saved=saved):
                if saved is not None:
                    self.write(saved)
                before = sorted(os.listdir(self.folder))
                self.assertIsNone(self.upgrade())
                self.assertEqual(sorted(os.listdir(self.folder)), before)

    def test_before_the_upgrade_the_settings_readers_take_the_1x_names(self):
        self.write(fixture("1.2.0"))
        settings = self.settings()
        self.assertEqual((settings.workspace_id, settings.user_peer_id, settings.agent_peer_id),
                         ("family-memory", "dana", "jarvis"))
        layers = read_layers(DEFAULT_CONFIG, self.path)
        merged = merged_config(layers.default_config, layers.global_config)
        self.assertEqual(merged["workspace_id"], "family-memory")
        self.assertNotIn("honcho_workspace_id", merged)

    def test_a_malformed_file_is_left_as_it_is_and_read_as_defaults(self):
        for content in ('{"honcho_workspace_id": "family-', "[1, 2]"):
            with self.subTest(content=content):
                self.write(content)
                self.assertIsNone(self.upgrade())
                with open(self.path, encoding="utf-8") as handle:
                    self.assertEqual(handle.read(), content)
                self.assertFalse(os.path.exists(self.record))
                self.assertEqual(self.settings().workspace_id, "agent-zero")

    def test_only_the_secrets_left_no_upgrade_and_the_secrets_give_the_identity(self):
        # Path (b): uninstall deleted config.json; the 1.x secrets stay in Agent Zero's store.
        self.assertIsNone(self.upgrade())
        self.assertFalse(os.path.exists(self.path))
        secrets = {"HONCHO_API_KEY": "hch-upgrade-key-13571357",
                   "HONCHO_WORKSPACE_ID": "family-memory", "HONCHO_USER_ID": "dana"}
        settings = effective_settings(read_layers(DEFAULT_CONFIG, self.path), secrets=secrets,
                                      environ={})
        self.assertEqual((settings.workspace_id, settings.user_peer_id, settings.agent_peer_id),
                         ("family-memory", "dana", "agent-zero"))
        self.assertTrue(settings.has_api_key)

    def test_two_processes_upgrading_at_once_upgrade_once(self):
        self.write(fixture("1.2.0"))
        code = ("import sys; from honcho_hub.settings.upgrade import upgrade_config;"
                " print(upgrade_config(sys.argv[1]) is not None)")
        env = {**os.environ, "PYTHONPATH": ROOT}
        children = [subprocess.Popen([sys.executable, "-c", code, self.path], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = sorted(child.communicate(timeout=60)[0].strip() for child in children)
        self.assertEqual(outcomes, ["False", "True"])
        self.assertEqual(len(self.records()), 1)
        self.assertEqual(self.saved()["workspace_id"], "family-memory")

    def test_a_memory_control_verb_on_a_1x_file_upgrades_it_first(self):
        self.write({**fixture("1.2.0"), "theme": "dark"})
        knobs.GlobalSettings(self.folder, {}).change({"recall_mode": "tools"})
        saved = self.saved()
        self.assertEqual((saved["workspace_id"], saved["recall_mode"]), ("family-memory", "tools"))
        self.assertEqual(self.records()[0]["set_aside"], {"theme": "dark"})


class ReportTest(UpgradeCase):
    def test_last_upgrade_names_what_moved_and_what_was_set_aside_never_a_value(self):
        self.write({**fixture("1.2.0"), "theme": "dark-secret-value"})
        self.upgrade()
        summary = last_upgrade(self.folder)
        self.assertEqual(summary["at"], NOW)
        self.assertEqual(summary["moved"], ["workspace_id", "user_peer_id", "agent_peer_id",
                                            "cache_ttl_s", "max_context_tokens", "debug"])
        self.assertEqual(summary["set_aside"], ["theme"])
        self.assertEqual(summary["record"], RECORD_NAME)
        self.assertNotIn("dark-secret-value", json.dumps(summary))

    def test_no_record_no_upgrade_reported(self):
        self.assertIsNone(last_upgrade(self.folder))
        with open(self.record, "w", encoding="utf-8") as handle:
            handle.write("not json")
        self.assertIsNone(last_upgrade(self.folder))

    def test_status_says_an_upgrade_ran_what_moved_and_what_was_set_aside(self):
        self.write({**fixture("1.2.0"), "theme": "dark"})
        self.upgrade()
        settings = self.settings()
        parts = StatusParts(upgrade=last_upgrade(self.folder))
        status = build_status(settings, parts, NOW + 60)
        self.assertEqual(status["upgrade"]["moved"][0], "workspace_id")
        self.assertEqual(status["upgrade"]["set_aside"], ["theme"])
        self.assertEqual(status["upgrade"]["age_s"], 60)
        text = status_text(status)
        self.assertIn("Upgraded from honcho 1.x", text)
        self.assertIn("set aside theme", text)
        self.assertIsNone(build_status(settings, StatusParts(), NOW)["upgrade"])


class HostFilesTest(unittest.TestCase):
    def test_each_file_upgraded_is_named_the_global_one_and_each_project_by_its_name(self):
        with stub_agent_zero(saved=False) as host:
            for path in (host.global_config,
                         host.project_meta("boats", "plugins", "honcho", "config.json")):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    json.dump(fixture("1.2.0"), handle)
            from usr.plugins.honcho.extensions.honcho_bridge import host as bridge

            lines = bridge.upgrade_1x_configs()
        self.assertEqual([line.split(" upgraded")[0] for line in lines],
                         ["config.json", "project boats"])


if __name__ == "__main__":
    unittest.main()
