"""Seed guarantee: chats of an Agent Zero project join the project's Honcho scope; the scope
registrar is a daemon thread; status shows the chat's scope and the scope's backfill.

Real Agent Zero v1.7 (projects, real turns with the scripted model, the web UI's project and reset
API calls) and a real Honcho. Agent Zero attaches a project to a chat after the chat's agent exists,
so a chat created in a project joins its scope when the worker delivers its first message; a chat
whose agent starts inside a project (reset, or loaded at start-up) is registered by the registrar at
once, and Honcho backfills the messages it already had.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import HostWorld, delivered, honcho_status, plugin_threads, wait_for  # noqa: E402

PROJECT = "seedproj"
SCOPE = "a0-seedproj"
REGISTRAR_THREAD = "honcho-hub-scopes"


class ScopeRegistrar(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.world = HostWorld()
        cls.host = cls.world.host
        cls.host.create_project(PROJECT)

    def scope_sessions(self):
        return [s.id for s in self.world.honcho().scope(SCOPE).sessions()]

    def api(self, path, body):
        response = self.host.api(path, body)
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True))
        return response.get_json()

    def test_a_chat_created_in_a_project_joins_its_scope_and_status_shows_it(self):
        self.host.script("Noted, for the project.")
        ctx = self.host.new_chat(project=PROJECT)
        self.host.turn(ctx, "This project is about the harbour survey.")
        session = f"chat-{ctx.id}"
        wait_for(lambda: delivered(self.world, session, 2), 30,
                 "the chat's messages in the real Honcho")
        self.assertIn(session, self.scope_sessions())

        scope = honcho_status(self.host, ctx)["scope"]
        self.assertEqual((scope["strategy"], scope["current"], scope["problem"]),
                         ("project", SCOPE, None))
        self.assertEqual(set(scope["backfill"]), {"pending", "completed", "failed"})

    def test_registrar_thread_is_a_daemon_and_puts_a_chat_moved_into_a_project_in_its_scope(self):
        self.host.script("Noted, outside any project.")
        ctx = self.host.new_chat()
        self.host.turn(ctx, "The survey boat leaves at dawn.")
        session = f"chat-{ctx.id}"
        wait_for(lambda: delivered(self.world, session, 2), 30,
                 "the chat's messages in the real Honcho")
        self.assertNotIn(session, self.scope_sessions(), "no project yet: no scope")

        self.api("projects", {"action": "activate", "context_id": ctx.id, "name": PROJECT})
        # The chat's agent starts again, now in the project.
        self.api("chat_reset", {"context": ctx.id})

        registrar = wait_for(lambda: plugin_threads(REGISTRAR_THREAD), 10,
                             "the scope registrar thread")
        self.assertEqual(len(registrar), 1)
        self.assertTrue(registrar[0].daemon, "the registrar never keeps Agent Zero from exiting")
        wait_for(lambda: session in self.scope_sessions(), 15,
                 "the registrar to add the chat to its scope")
        backfill = wait_for(lambda: self.backfill_seen(ctx), 30,
                            "status to show the chat's backfill")
        self.assertGreaterEqual(sum(backfill.values()), 1)
        self.assertEqual(backfill["failed"], 0)

    def backfill_seen(self, ctx):
        scope = honcho_status(self.host, ctx)["scope"]
        self.assertEqual(scope["current"], SCOPE)
        return scope["backfill"] if sum(scope["backfill"].values()) else None


if __name__ == "__main__":
    unittest.main()
