"""Both API handlers through Agent Zero's own Flask app (routing, CSRF), against the real Honcho.

The process runs with a recognisable fake HONCHO_API_KEY (the auth-off server ignores keys, so
delivery still works): no answer may contain it, nor the outbox path. A request without the CSRF
token is refused by Agent Zero before our handler runs.
"""

from __future__ import annotations

import unittest

import host_kit

FAKE_KEY = "hk-fake-host-api-NEVER-SHOWN-7f3a9c21"
STATUS, ACTION = "plugins/honcho/honcho_status", "plugins/honcho/honcho_action"

world: host_kit.HostWorld
ctx = None


def setUpModule() -> None:
    global world, ctx
    # The MCP check goes to a closed loopback port: refused at once, never the internet.
    world = host_kit.HostWorld({"HONCHO_API_KEY": FAKE_KEY, "HONCHO_MCP_URL": "http://127.0.0.1:9"})
    world.host.script("Hello Ada.")
    ctx = world.host.new_chat()
    world.host.turn(ctx, "Hi, I'm Ada.")
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                      "the chat's two messages in the real Honcho (with the fake key)")


class ApiCase(unittest.TestCase):
    def post(self, path: str, body: dict, csrf: bool = True):
        response = world.host.api(path, body, csrf=csrf)
        text = response.get_data(as_text=True)
        for secret in (FAKE_KEY, world.outbox_path, world.tmp):
            self.assertNotIn(secret, text, f"{path} answered with a secret or a local path")
        return response

    def answer(self, path: str, body: dict) -> dict:
        response = self.post(path, body)
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:500])
        return response.get_json()


class StatusHandlerTest(ApiCase):
    def test_status_without_a_chat_is_structured(self) -> None:
        got = self.answer(STATUS, {})
        self.assertIs(got["ok"], True)
        status = got["status"]
        self.assertEqual(status["identity"]["workspace_id"], world.workspace_id)
        self.assertEqual(status["identity"]["session_id"], None)
        self.assertIs(status["identity"]["api_key_configured"], True)
        self.assertEqual(status["endpoints"]["api_url"], world.honcho_url)
        self.assertIn(status["health"], ("green", "amber", "red", "neutral"))
        self.assertGreaterEqual(status["queue"]["delivered"], 2)
        self.assertEqual(status["queue"]["dead"], 0)

    def test_status_with_a_chat_names_its_session(self) -> None:
        got = self.answer(STATUS, {"context": ctx.id})
        self.assertEqual(got["status"]["identity"]["session_id"], f"chat-{ctx.id}")

    def test_status_without_the_csrf_token_is_refused(self) -> None:
        response = self.post(STATUS, {}, csrf=False)
        self.assertEqual(response.status_code, 403)
        self.assertIn("CSRF", response.get_data(as_text=True))


class ActionHandlerTest(ApiCase):
    def test_check_reaches_the_api_and_reports_the_closed_mcp_port(self) -> None:
        got = self.answer(ACTION, {"action": "check"})
        self.assertEqual((got["ok"], got["action"]), (True, "check"))
        self.assertIs(got["result"]["api"]["ok"], True, got)
        self.assertEqual(got["result"]["api"]["status"], 200)
        self.assertIs(got["result"]["mcp"]["ok"], False, got)
        self.assertEqual(got["result"]["mcp"]["error"], "unreachable")

    def test_wake_finds_the_running_worker(self) -> None:
        self.assertEqual(self.answer(ACTION, {"action": "wake"}),
                         {"ok": True, "action": "wake",
                          "result": {"woken": True, "started": False, "held": False,
                                     "paused": None}})

    def test_drain_delivers_a_message_typed_just_before(self) -> None:
        host_kit.user_typed(ctx, "Please remember that I prefer tea to coffee.")
        got = self.answer(ACTION, {"action": "drain"})
        self.assertEqual((got["ok"], got["action"]), (True, "drain"))
        self.assertEqual(got["result"]["pending"], 0, got)
        contents = [m.content for m in host_kit.delivered(world, f"chat-{ctx.id}", 3) or []]
        self.assertIn("Please remember that I prefer tea to coffee.", contents)

    def test_retry_dead_with_nothing_dead_requeues_nothing(self) -> None:
        got = self.answer(ACTION, {"action": "retry_dead"})
        self.assertEqual((got["ok"], got["action"]), (True, "retry_dead"))
        self.assertEqual(got["result"]["requeued"], 0)

    def test_clear_cache_answers_how_many_entries_it_dropped(self) -> None:
        got = self.answer(ACTION, {"action": "clear_cache"})
        self.assertEqual((got["ok"], got["action"]), (True, "clear_cache"))
        self.assertIsInstance(got["result"]["cleared"], int)

    def test_an_unknown_action_is_a_structured_error(self) -> None:
        got = self.answer(ACTION, {"action": "format_disk"})
        self.assertEqual(got, {"ok": False,
                               "error": "unknown action; use one of: check, wake, drain, "
                                        "retry_dead, clear_cache, observation_check, "
                                        "observation_apply"})

    def test_an_action_without_the_csrf_token_is_refused(self) -> None:
        response = self.post(ACTION, {"action": "wake"}, csrf=False)
        self.assertEqual(response.status_code, 403)
        self.assertIn("CSRF", response.get_data(as_text=True))

if __name__ == "__main__":
    unittest.main()
