"""The scope registrar (gateway/registrar.py): a chat's session joins its scope off the turn's
thread, failures are logged and retried later, and what it remembers per chat and destination
stays bounded."""

import dataclasses
import unittest

from delivery_helpers import Bench

from honcho_hub.gateway import registrar as scope_registrar
from honcho_hub.gateway.registrar import ScopeRegistrar


class RegistrarTest(unittest.TestCase):
    def test_registration_creates_the_session_with_observation_settings_and_joins_the_scope(self):
        bench = Bench(self)
        registrar = ScopeRegistrar(bench.gateway)
        self.assertTrue(registrar.register(bench.settings, "chat-r1", "a0-alpha"))
        session = bench.fake.sessions[("agent-zero", "chat-r1")]
        self.assertEqual(session["peers_set_before_messages"]["agent-zero"],
                         {"observe_me": False, "observe_others": True})
        self.assertEqual(bench.fake.scopes[("agent-zero", "a0-alpha")], {"chat-r1"})
        self.assertFalse(registrar.submit(bench.settings, "chat-r1", "a0-alpha"))  # already done

    def test_failures_are_logged_and_non_fatal(self):
        bench = Bench(self)
        bench.fake.fail(match=r"/sessions$", kind="connect")
        registrar = ScopeRegistrar(bench.gateway)
        with self.assertLogs("honcho_hub.gateway.registrar", "WARNING"):
            self.assertFalse(registrar.register(bench.settings, "chat-r2", "a0-alpha"))
        self.assertTrue(registrar.submit(bench.settings, "chat-r2", "a0-alpha"))  # may be retried

    def test_the_thread_processes_its_queue_and_stops(self):
        bench = Bench(self)
        registrar = ScopeRegistrar(bench.gateway, capacity=2)
        self.assertTrue(registrar.submit(bench.settings, "chat-r3", "a0-alpha"))
        self.assertTrue(registrar.submit(bench.settings, "chat-r4", "a0-alpha"))
        # bounded, never blocks
        self.assertFalse(registrar.submit(bench.settings, "chat-r5", "a0-alpha"))
        registrar.start()
        self.assertTrue(registrar.stop(10))
        self.assertEqual(bench.fake.scopes[("agent-zero", "a0-alpha")], {"chat-r3", "chat-r4"})


class RegistrarBoundsTest(unittest.TestCase):
    def test_the_registrar_remembers_a_bounded_number_of_chats_and_gateways(self):
        bench = Bench(self)
        # its thread never runs here
        registrar = ScopeRegistrar(bench.gateway, capacity=1_000, remember=3)
        for n in range(10):
            self.assertTrue(registrar.register(bench.settings, f"chat-r{n}", f"scope-{n}"))
            # A registration it remembers is not queued again; a forgotten one is.
            remembered = [k for k in range(n + 1)
                          if not registrar.submit(bench.settings, f"chat-r{k}", f"scope-{k}")]
            self.assertIn(n, remembered)
            self.assertLessEqual(len(remembered), 3)
        for n in range(10):  # every registration reached Honcho, forgotten or not
            self.assertEqual(bench.fake.scopes[(bench.settings.workspace_id, f"scope-{n}")],
                             {f"chat-r{n}"})
        self.assertTrue(registrar.submit(bench.settings, "chat-r0", "scope-0"),
                        "forgotten: registered again")
        for n in range(scope_registrar.MAX_GATEWAYS * 3):
            other = dataclasses.replace(bench.settings, workspace_id=f"ws-{n}")
            self.assertTrue(registrar.register(other, "chat-w", "scope-w"))
            self.assertLessEqual(len(bench.open_clients()), scope_registrar.MAX_GATEWAYS)
        self.assertEqual(
            bench.fake.scopes[(f"ws-{scope_registrar.MAX_GATEWAYS * 3 - 1}", "scope-w")],
            {"chat-w"})

    def test_by_default_the_registrar_remembers_the_newest_1000_registrations_not_10000(self):
        # One a chat in a project: a soak opens thousands of chats an hour, a user's chat list
        # holds hundreds at most; forgetting one costs one idempotent request.
        bench = Bench(self)
        registrar = ScopeRegistrar(bench.gateway)  # its thread never runs here
        for n in range(1_001):
            registrar.register(bench.settings, f"chat-d{n}", "scope-d")
        self.assertEqual([registrar.submit(bench.settings, f"chat-d{n}", "scope-d")
                          for n in (0, 1, 1_000)], [True, False, False])


if __name__ == "__main__":
    unittest.main()
