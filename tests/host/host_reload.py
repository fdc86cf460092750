"""Agent Zero re-imports the plugin's modules (as on a plugin .py change): still one delivery
worker.

`plugins.after_plugin_change([...], python_change=True)` is what Agent Zero's plugin watchdog calls
when a plugin's Python file changes: caches cleared, `usr.plugins.*` purged from sys.modules. The
next extension call imports a new module generation. Afterwards exactly one live coordinator thread
runs, of the new generation, and delivery works — after a new chat (agent_init) and after a turn in
an existing chat (capture only).
"""

from __future__ import annotations

import sys
import threading
import unittest

import host_kit

WORKER_MODULE = "usr.plugins.honcho.honcho_hub.delivery.worker"
RESTART_S = 20.0  # well under Agent Zero's job loop (about 60 s; not even running in this harness)
WITHOUT_JOB_LOOP = " (the worker must come back without waiting for the job loop)"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def reload_plugin() -> None:
    """What the plugin watchdog does on a .py change of the plugin."""
    world.host.plugins.after_plugin_change(["honcho"], python_change=True)


class ReloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        host.script("First.", "Second.", "Third.")
        cls.old_chat = old_chat = host.new_chat()
        host.turn(old_chat, "Before any reload.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{old_chat.id}", 2), 30,
                          "the first turn delivered")
        cls.first_worker = host_kit.delivery_workers()[0]

        reload_plugin()
        cls.purged = WORKER_MODULE not in sys.modules
        cls.new_chat = new_chat = host.new_chat()  # agent_init of the new generation
        host.turn(new_chat, "After the first reload, in a new chat.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{new_chat.id}", 2), RESTART_S,
                          "the new chat's turn delivered after the first reload" + WITHOUT_JOB_LOOP)
        cls.after_first = host_kit.delivery_workers()

        cls.second_worker = cls.after_first[-1]
        reload_plugin()
        host.turn(old_chat, "After the second reload, in the old chat.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{old_chat.id}", 4), RESTART_S,
                          "the old chat's turn delivered after the second reload"
                          + WITHOUT_JOB_LOOP)
        cls.after_second = host_kit.delivery_workers()

        cls.third_worker = cls.after_second[-1]
        reload_plugin()
        # One capture only.
        host_kit.user_typed(old_chat, "After the third reload, one typed message alone.")
        cls.old_chat_messages = host_kit.wait_for(
            lambda: host_kit.delivered(world, f"chat-{old_chat.id}", 5), RESTART_S,
            "a single message typed after the third reload delivered" + WITHOUT_JOB_LOOP)
        cls.after_third = host_kit.delivery_workers()

        # A chat in a project also starts the scope registrar thread (marked like the worker).
        host.create_project("reload-proj")
        host.script("Fourth.", "Fifth.")
        cls.project_chat = project_chat = host.new_chat(project="reload-proj")
        host.turn(project_chat, "In a project, before the fourth reload.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{project_chat.id}", 2),
                          RESTART_S, "the project chat's first turn delivered")
        cls.fourth_worker = host_kit.delivery_workers()[-1]
        reload_plugin()
        host.turn(project_chat, "In a project, after the fourth reload.")
        cls.project_messages = host_kit.wait_for(
            lambda: host_kit.delivered(world, f"chat-{project_chat.id}", 4), RESTART_S,
            "the project chat's turn delivered after the fourth reload" + WITHOUT_JOB_LOOP)
        cls.after_fourth = host_kit.delivery_workers()

    def test_agent_zero_purged_the_plugin_modules(self) -> None:
        self.assertTrue(self.purged)
        self.assertIn(WORKER_MODULE, sys.modules)  # imported again by the next extension call

    def test_exactly_one_coordinator_of_the_new_generation_after_each_reload(self) -> None:
        for after in (self.after_first, self.after_second, self.after_third, self.after_fourth):
            self.assertEqual(len(after), 1, after)
        self.assertIs(type(self.after_fourth[0]), sys.modules[WORKER_MODULE].DeliveryWorker)
        for older in (self.first_worker, self.second_worker, self.third_worker, self.fourth_worker):
            self.assertFalse(older.is_alive(), older)

    def test_no_thread_of_the_plugin_is_left_from_older_generations(self) -> None:
        workers = host_kit.delivery_workers()
        self.assertEqual(workers, self.after_fourth)
        registrars = [t for t in host_kit.plugin_threads() if t.name == "honcho-hub-scopes"]
        self.assertLessEqual(len(registrars), 1, registrars)
        senders = [t.name for t in threading.enumerate() if t.name.startswith("honcho-hub-sender")]
        self.assertLessEqual(len(senders), 2, senders)  # the default concurrency

    def test_delivery_works_after_each_reload_in_capture_order(self) -> None:
        self.assertEqual([m.content for m in self.old_chat_messages],
                         ["Before any reload.", "First.",
                          "After the second reload, in the old chat.", "Third.",
                          "After the third reload, one typed message alone."])
        self.assertEqual([m.content for m in self.project_messages],
                         ["In a project, before the fourth reload.", "Fourth.",
                          "In a project, after the fourth reload.", "Fifth."])

if __name__ == "__main__":
    unittest.main()
