"""The settings page's API in the real Agent Zero: values out of bounds are refused at save with the
bound shown, and a project's form gets every setting (global ones as saved globally)."""

import json
import os
import unittest

from host_kit import HostWorld

world: HostWorld


def setUpModule():
    global world
    world = HostWorld()


class SettingsApiTest(unittest.TestCase):
    def call(self, **body):
        response = world.host.api("plugins", {"plugin_name": "honcho", **body})
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True))
        return response.get_json()

    def saved(self, project=""):
        folder = world.plugin_dir if not project else os.path.join(
            world.tree, "usr", "projects", project, ".a0proj", "plugins", "honcho")
        path = os.path.join(folder, "config.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)

    def test_an_out_of_range_value_is_refused_with_its_bound_and_nothing_is_written(self):
        before = self.saved()
        answer = self.call(action="save_config", settings={"batch_size": 999})
        self.assertFalse(answer["ok"])
        self.assertIn("batch_size: out of range 1–100", answer["error"])
        self.assertEqual(self.saved(), before)

    def test_a_broken_relation_between_settings_is_refused(self):
        answer = self.call(action="save_config", settings={"retry_base_s": 500, "retry_max_s": 100})
        self.assertFalse(answer["ok"])
        self.assertIn("retry_base_s must not exceed retry_max_s", answer["error"])

    def test_valid_values_are_saved(self):
        answer = self.call(action="save_config", settings={"batch_size": 30, "retry_base_s": 3})
        self.assertTrue(answer["ok"], answer)
        self.assertEqual((self.saved()["batch_size"], self.saved()["retry_base_s"]), (30, 3))

    def test_a_project_form_shows_global_values_and_its_own(self):
        world.host.create_project("settings-p1")
        self.assertTrue(self.call(action="save_config",
                                  settings={"batch_size": 40, "workspace_id": "w-global"})["ok"])
        self.assertTrue(self.call(action="save_config", project_name="settings-p1",
                                  settings={"recall_enabled": False, "batch_size": 40})["ok"])
        # Only what a project may change.
        self.assertEqual(self.saved("settings-p1"), {"recall_enabled": False})
        form = self.call(action="get_config", project_name="settings-p1")
        self.assertEqual(form["loaded_project_name"], "settings-p1")
        self.assertEqual((form["data"]["recall_enabled"], form["data"]["batch_size"],
                          form["data"]["workspace_id"]),
                         (False, 40, "w-global"))
        # Every setting, not only the project file's keys.
        self.assertIn("endpoint_mode", form["data"])

    def test_a_project_save_refuses_its_own_bad_value(self):
        world.host.create_project("settings-p2")
        answer = self.call(action="save_config", project_name="settings-p2",
                           settings={"cache_ttl_s": -1})
        self.assertFalse(answer["ok"])
        self.assertIn("cache_ttl_s: out of range 1–3,600", answer["error"])
        self.assertIsNone(self.saved("settings-p2"))


if __name__ == "__main__":
    unittest.main()
