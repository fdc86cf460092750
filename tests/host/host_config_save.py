"""Saving settings the way the settings page does (plugins.save_plugin_config: our hook, then
config.json).

Global and project scope: only known keys are written, never a key or credential field, and a
project keeps only the settings a project may change. Reading back (plugins.get_plugin_config, our
hook) gives the merged effective settings, and a chat's agent uses them.
"""

from __future__ import annotations

import json
import os
import unittest

import host_kit
import yaml

FAKE_KEY = "sk-proj-SavedByMistake0123456789abcdef"
PROJECT = "harbour"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class ConfigSaveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        with open(os.path.join(world.plugin_dir, "default_config.yaml"),
                  encoding="utf-8") as handle:
            cls.default_keys = set(yaml.safe_load(handle))
        host.save_config("honcho", {"batch_size": 7, "recall_enabled": False,
                                    "workspace_id": "ws-saved", "api_key": FAKE_KEY,
                                    "HONCHO_API_KEY": FAKE_KEY, "honcho_api_key": FAKE_KEY,
                                    "unknown_setting": 1})
        cls.global_file = os.path.join(world.plugin_dir, "config.json")
        host.create_project(PROJECT)
        host.save_config("honcho", {"recall_enabled": True, "max_context_tokens": 900,
                                    "workspace_id": "ws-project", "batch_size": 50,
                                    "api_url": "http://127.0.0.1:1", "api_key": FAKE_KEY},
                         project=PROJECT)
        from helpers import projects

        cls.project_file = projects.get_project_meta(PROJECT, "plugins", "honcho", "config.json")

    def test_global_file_holds_only_the_known_keys_given(self) -> None:
        self.assertEqual(read_json(self.global_file), {"batch_size": 7, "recall_enabled": False,
                                                        "workspace_id": "ws-saved"})

    def test_no_file_holds_the_key(self) -> None:
        for path in (self.global_file, self.project_file):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            self.assertNotIn(FAKE_KEY, text, path)
            self.assertNotIn("api_key", text.lower(), path)

    def test_project_file_keeps_only_project_settings(self) -> None:
        self.assertEqual(read_json(self.project_file),
                         {"recall_enabled": True, "max_context_tokens": 900})

    def test_global_read_is_every_default_with_the_saved_values(self) -> None:
        config = world.host.config("honcho")
        self.assertEqual(set(config), self.default_keys)
        self.assertEqual((config["batch_size"], config["recall_enabled"], config["workspace_id"]),
                         (7, False, "ws-saved"))
        self.assertEqual(config["max_attempts"], 8)
        self.assertEqual(config["max_context_tokens"], 500)

    def test_project_read_merges_project_over_global_over_defaults(self) -> None:
        config = world.host.config("honcho", project=PROJECT)
        self.assertEqual(set(config), self.default_keys)
        self.assertEqual((config["recall_enabled"], config["max_context_tokens"]), (True, 900))
        self.assertEqual((config["batch_size"], config["workspace_id"], config["api_url"]),
                         (7, "ws-saved", ""))

    def test_a_chat_in_the_project_reads_the_project_settings(self) -> None:
        ctx = world.host.new_chat(project=PROJECT)
        config = world.host.config("honcho", ctx=ctx)
        self.assertEqual(
            (config["recall_enabled"], config["max_context_tokens"], config["batch_size"]),
            (True, 900, 7))

    def test_the_agents_effective_settings_follow_the_scope(self) -> None:
        # The tool's status is built from the settings the adapters use for the chat's agent.
        plain, in_project = world.host.new_chat(), world.host.new_chat(project=PROJECT)
        _, plain_status = world.host.run_tool(plain, "honcho_memory", action="status")
        _, project_status = world.host.run_tool(in_project, "honcho_memory", action="status")
        self.assertIn("recall tools", plain_status)  # recall_enabled false is recall_mode tools
        self.assertIn("recall hybrid", project_status)


if __name__ == "__main__":
    unittest.main()
