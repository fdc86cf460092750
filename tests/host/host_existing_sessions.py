"""A changed observation preset set on existing sessions, in the real Agent Zero against the real
Honcho: a chat delivered under `seed`, then `directional` saved through Agent Zero's settings API;
the sidebar's check (honcho_action `observation_check`, through Agent Zero's routing and CSRF)
says the chat's session differs and how, changing nothing; the apply is refused without the
panel's confirmation and, confirmed, sets the agent's flags on the real server."""

from __future__ import annotations

import unittest

import host_kit

ACTION = "plugins/honcho/honcho_action"

world: host_kit.HostWorld
ctx = None


def setUpModule() -> None:
    global world, ctx
    world = host_kit.HostWorld()
    world.host.script("Hello Ada.")
    ctx = world.host.new_chat()
    world.host.turn(ctx, "Hi, I'm Ada.")
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                      "the chat's two messages in the real Honcho")
    world.host.save_config("honcho", {"observation": "directional"})


def agent_flags() -> tuple:
    config = world.honcho().session(f"chat-{ctx.id}").get_peer_configuration("agent-zero")
    return config.observe_me, config.observe_others


class ExistingSessionsTest(unittest.TestCase):
    def answer(self, body: dict) -> dict:
        response = world.host.api(ACTION, body)
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:500])
        return response.get_json()

    def test_1_the_check_says_the_session_differs_and_changes_nothing(self) -> None:
        got = self.answer({"action": "observation_check"})
        self.assertIs(got["ok"], True, got)
        report = got["result"]
        self.assertEqual((report["preset"], report["total"], report["differ"], report["changes"]),
                         ("directional", 1, 1, {"agent observe_me: off → on": 1}))
        self.assertIn(f"chat-{ctx.id} holds: user me on, others on; agent me off, others on",
                      report["text"])
        self.assertEqual(agent_flags(), (False, True))

    def test_2_the_apply_needs_the_confirmation(self) -> None:
        got = self.answer({"action": "observation_apply"})
        self.assertIs(got["ok"], False)
        self.assertIn("confirm first", got["error"])
        self.assertEqual(agent_flags(), (False, True))

    def test_3_the_confirmed_apply_sets_the_saved_presets_flags(self) -> None:
        got = self.answer({"action": "observation_apply", "confirmed": True, "offset": 0})
        self.assertEqual((got["ok"], got["result"]["applied"], got["result"]["failed"]),
                         (True, 1, []), got)
        self.assertEqual(agent_flags(), (True, True))
        again = self.answer({"action": "observation_check"})["result"]
        self.assertEqual((again["differ"], again["same"]), (0, 1))


if __name__ == "__main__":
    unittest.main()
