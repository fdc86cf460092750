"""The plugin's life around Agent Zero's projects, as v1.7 runs it and as v2.x calls it.

- Switched off in one project (Agent Zero's toggle with a project): nothing global stops, chats
  elsewhere are captured as before; the project's chats get none of the plugin (Agent Zero runs no
  extension of ours for them) and the sidebar's API treats them as chats without memory.
- `project_deleted(project_name)` (a v2.x hook; v1.7 never calls it), called the way v2.x does,
  through Agent Zero's `call_plugin_hook`, after Agent Zero deleted the project: what the plugin
  cached for the project is dropped, the project's memory stays in Honcho.
- The config hooks take v2.x's `hook_context` keyword: through `call_plugin_hook` (v1.7 drops an
  undeclared keyword) and called directly, as a caller that passes every keyword would; a save the
  agent asks for is refused, and v2.x's `save_plugin_config` (v1.7's steps with `hook_context`)
  then leaves config.json as it was.
"""

from __future__ import annotations

import json
import os
import unittest

import host_kit

PLUGIN = "honcho"
QUIET = "quiet"  # the project the plugin is switched off in
GONE = "gone"  # the project that is deleted

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def hooks_module():
    """hooks.py as Agent Zero loads it for call_plugin_hook (by path, not as a package module)."""
    from helpers import modules

    return modules.import_module(os.path.join(world.plugin_dir, "hooks.py"))


class ScopedToggleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        host.create_project(QUIET)
        host.script("Before: noted.", "Quiet: noted.", "Elsewhere: noted.")
        before = host.new_chat()
        host.turn(before, "Typed before the project's switch-off.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{before.id}", 2), 30,
                          "the first chat delivered")
        cls.worker = host_kit.plugin_module("extensions.honcho_bridge.process_hub").hub().worker()

        host.toggle(PLUGIN, False, project=QUIET)
        cls.quiet = host.new_chat(project=QUIET)
        cls.enabled_in_quiet = PLUGIN in host.enabled_plugins(cls.quiet)
        cls.enabled_globally = PLUGIN in host.enabled_plugins()
        host.turn(cls.quiet, "Typed in the quiet project.")
        cls.elsewhere = host.new_chat()
        host.turn(cls.elsewhere, "Typed in a chat outside the project.")
        # Captured after the quiet chat's turn: once it is delivered, the quiet one would be too.
        cls.delivered_elsewhere = host_kit.wait_for(
            lambda: host_kit.delivered(world, f"chat-{cls.elsewhere.id}", 2), 30,
            "the chat outside the project delivered")
        cls.quiet_status = host_kit.honcho_status(host, cls.quiet)
        cls.elsewhere_status = host_kit.honcho_status(host, cls.elsewhere)

    def test_agent_zero_reports_the_plugin_off_in_the_project_and_on_elsewhere(self) -> None:
        self.assertFalse(self.enabled_in_quiet)
        self.assertTrue(self.enabled_globally)

    def test_nothing_global_stops(self) -> None:
        from usr.plugins.honcho.honcho_hub.delivery import lifecycle

        self.assertTrue(self.worker.is_alive())
        self.assertEqual(host_kit.delivery_workers(), [self.worker])
        self.assertFalse(lifecycle.restart_held())

    def test_the_projects_chat_is_neither_captured_nor_offered_the_tool(self) -> None:
        self.assertEqual(host_kit.outbox_counts(world.outbox_path, f"chat-{self.quiet.id}"), {})
        self.assertEqual(world.session_messages(f"chat-{self.quiet.id}"), [])
        system = str(world.host.model_calls(self.quiet)[0]["messages"][0])
        self.assertNotIn("### honcho_memory", system)
        self.assertNotIn("<honcho_memory>", world.host.prompts(self.quiet)[0])

    def test_a_chat_outside_the_project_is_captured_and_offered_the_tool(self) -> None:
        self.assertEqual([m.content for m in self.delivered_elsewhere],
                         ["Typed in a chat outside the project.", "Elsewhere: noted."])
        system = str(world.host.model_calls(self.elsewhere)[0]["messages"][0])
        self.assertIn("### honcho_memory", system)

    def test_the_sidebar_shows_the_projects_chat_without_a_session_of_its_own(self) -> None:
        self.assertIsNone(self.quiet_status["identity"]["session_id"])
        self.assertEqual(self.elsewhere_status["identity"]["session_id"],
                         f"chat-{self.elsewhere.id}")


class ProjectDeletedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        from helpers import plugins, projects

        host = world.host
        host.create_project(GONE)
        host.script("Gone: noted.")
        cls.chat = host.new_chat(project=GONE)
        cls.session_id = f"chat-{cls.chat.id}"
        host.turn(cls.chat, "Typed in the project that is deleted.")
        host_kit.wait_for(lambda: host_kit.delivered(world, cls.session_id, 2), 30,
                          "the project's chat delivered")
        # Agent Zero: the folder (with its plugin settings), the chats' link to it
        projects.delete_project(GONE)
        cls.report = plugins.call_plugin_hook(PLUGIN, "project_deleted", project_name=GONE)
        cls.again = plugins.call_plugin_hook(PLUGIN, "project_deleted", project_name=GONE)

    def test_the_hook_drops_what_the_plugin_cached_for_the_project_once(self) -> None:
        self.assertIsInstance(self.report, dict, self.report)
        self.assertEqual(self.report["project"], GONE)
        self.assertGreaterEqual(self.report["dropped"], 1)
        self.assertEqual(self.again["dropped"], 0)

    def test_the_projects_memory_stays_in_honcho(self) -> None:
        self.assertEqual(self.report["memory"], "kept")
        self.assertEqual([m.content for m in world.session_messages(self.session_id)],
                         ["Typed in the project that is deleted.", "Gone: noted."])


class HookContextTest(unittest.TestCase):
    CONTEXTS = ({"caller": "ui"}, {"caller": "agent"}, {"caller": "api"})

    def test_reading_the_config_with_a_hook_context_merges_it_as_without(self) -> None:
        from helpers import plugins

        plain = plugins.call_plugin_hook(PLUGIN, "get_plugin_config", default={})
        hooks = hooks_module()
        for context in self.CONTEXTS:
            with self.subTest(caller=context["caller"]):
                self.assertEqual(plugins.call_plugin_hook(PLUGIN, "get_plugin_config", default={},
                                                          hook_context=context), plain)
                self.assertEqual(hooks.get_plugin_config(default={}, project_name=None,
                                                         hook_context=context), plain)

    def test_a_save_from_the_ui_or_the_api_keeps_known_settings(self) -> None:
        hooks = hooks_module()
        for caller in ("ui", "api"):
            with self.subTest(caller=caller):
                saved = hooks.save_plugin_config(settings={"batch_size": 40, "nonsense": 1},
                                                 project_name="", hook_context={"caller": caller})
                self.assertEqual(saved["batch_size"], 40)
                self.assertNotIn("nonsense", saved)

    def test_a_save_the_agent_asks_for_saves_nothing(self) -> None:
        from helpers import plugins

        settings = {"api_url": "https://elsewhere.example", "batch_size": 40}
        self.assertIsNone(hooks_module().save_plugin_config(
            settings=settings, project_name="", hook_context={"caller": "agent"}))
        self.assertIsNone(plugins.call_plugin_hook(PLUGIN, "save_plugin_config", default=settings,
                                                   settings=settings, project_name="",
                                                   hook_context={"caller": "agent"}))
        path = plugins.determine_plugin_asset_path(PLUGIN, "", "", plugins.CONFIG_FILE_NAME)
        before = saved_file(path)
        self.addCleanup(restore_file, path, before)
        v2x_save_plugin_config(PLUGIN, "", "", settings, hook_context={"caller": "agent"})
        self.assertEqual(saved_file(path), before, "the agent's save wrote config.json")
        # The same call from the settings page saves: what was refused was the agent.
        v2x_save_plugin_config(PLUGIN, "", "", settings, hook_context={"caller": "ui"})
        self.assertIn(b"elsewhere.example", saved_file(path) or b"")


def v2x_save_plugin_config(plugin_name: str, project_name: str, agent_profile: str,
                           settings: dict, hook_context: dict) -> None:
    """Agent Zero v2.x's `plugins.save_plugin_config`: v1.7's steps, with Agent Zero's own
    functions, and the `hook_context` v2.x adds to the hook's call (v1.7's takes none)."""
    from helpers import files, plugins

    path = plugins.determine_plugin_asset_path(plugin_name, project_name, agent_profile,
                                               plugins.CONFIG_FILE_NAME)
    new_settings = plugins.call_plugin_hook(plugin_name, "save_plugin_config", default=settings,
                                            project_name=project_name,
                                            agent_profile=agent_profile, settings=settings,
                                            hook_context=hook_context)
    if new_settings is not None and path:
        files.write_file(path, json.dumps(new_settings))


def saved_file(path: str) -> bytes | None:
    """The file's bytes; None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def restore_file(path: str, content: bytes | None) -> None:
    if content is None:
        if os.path.exists(path):
            os.remove(path)
        return
    with open(path, "wb") as handle:
        handle.write(content)

if __name__ == "__main__":
    unittest.main()
