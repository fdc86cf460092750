"""A scripted conversation in a real Agent Zero v1.7 reaches the real Honcho as the plugin
promises.

Two turns of one chat: the first delegates to a subordinate (tool traffic), which waits until the
human intervenes; the typed text carries an `sk-...` key and a value stored in Agent Zero's secrets.
Only what the human typed and agent 0's final answers arrive, in capture order, redacted, under the
session `chat-<context id>` with the peers `user` and `agent-zero` and the event id in metadata.
"""

from __future__ import annotations

import unittest

import host_kit

OPENAI_KEY = "sk-proj-Zq7Xv2Lm9Tr4Wp8Kd3Hs6Bn1Cf5Gy0Ju"
SECRET_NAME, SECRET_VALUE = "BOAT_LOCKER_CODE", "otter-lighthouse-7731-quay"
TURN_1 = f"Hi, I'm Dana. My OpenAI key is {OPENAI_KEY} and my boat locker code is {SECRET_VALUE}."
INTERVENTION = "Also, my boat is called Sea Otter."
FINAL_1 = "You have two boats, Dana."
TURN_2 = "What is my boat called?"
FINAL_2 = "Your boat is called Sea Otter."
TO_SUBORDINATE = "Subordinate task: count the boats of the user."
SUBORDINATE_RESULT = "Subordinate result: two boats."

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    host_kit.save_secret(SECRET_NAME, SECRET_VALUE)


class ScriptedConversationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        host.script(
            {"tool_name": "call_subordinate",
             "tool_args": {"message": TO_SUBORDINATE, "reset": "true"}},
            # The subordinate waits for the human.
            {"tool_name": "wait", "tool_args": {"seconds": 45}},
            SUBORDINATE_RESULT,  # the subordinate's answer to agent 0: tool traffic
            FINAL_1,
            FINAL_2,
        )
        cls.ctx = ctx = host.new_chat()
        task = ctx.communicate(host_kit.user_message(TURN_1))
        # Once the subordinate's first model call is logged it is the chat's running agent: a
        # message sent now is an intervention on it, as when the human types while a subordinate
        # works.
        host_kit.wait_for(lambda: len(host.model_calls(ctx)) >= 2, 30,
                          "the subordinate's first model call")
        ctx.communicate(host_kit.user_message(INTERVENTION))
        cls.final_1 = task.result_sync(60)
        cls.final_2 = host.turn(ctx, TURN_2, timeout=60)
        cls.session_id = f"chat-{ctx.id}"
        cls.messages = host_kit.wait_for(
            lambda: _at_least(world.session_messages(cls.session_id), 5), 30,
            "five captured messages in the real Honcho")

    def test_the_script_ran_through_the_subordinate_and_the_intervention(self) -> None:
        self.assertEqual((self.final_1, self.final_2), (FINAL_1, FINAL_2))
        agents = [call["agent"] for call in world.host.model_calls(self.ctx)]
        self.assertIn(1, agents, "the subordinate never called the model")
        self.assertEqual(len(agents), 5, agents)

    def test_only_typed_text_and_final_answers_arrive_in_capture_order(self) -> None:
        peers = [m.peer_id for m in self.messages]
        self.assertEqual(peers, ["user", "user", "agent-zero", "user", "agent-zero"])
        contents = [m.content for m in self.messages]
        self.assertEqual(contents[1:], [INTERVENTION, FINAL_1, TURN_2, FINAL_2])
        self.assertTrue(contents[0].startswith("Hi, I'm Dana. My OpenAI key is "), contents[0])

    def test_subordinate_and_tool_traffic_are_not_captured(self) -> None:
        everything = "\n".join(m.content for m in self.messages)
        for text in (TO_SUBORDINATE, SUBORDINATE_RESULT, "wait", "tool_name", "user_intervention"):
            self.assertNotIn(text, everything)
        sessions = [s.id for s in world.honcho().sessions()]
        self.assertEqual(sessions, [self.session_id], "a subordinate or tool made its own session")

    def test_the_key_and_the_secret_value_are_redacted(self) -> None:
        first = self.messages[0].content
        self.assertNotIn(OPENAI_KEY, first)
        self.assertNotIn("Zq7Xv2Lm9Tr4", first)
        self.assertNotIn(SECRET_VALUE, first)
        self.assertIn("[REDACTED", first)
        self.assertIn("boat locker code is ", first)

    def test_each_message_carries_its_own_event_id_in_metadata(self) -> None:
        ids = [m.metadata.get("event_id") for m in self.messages]
        self.assertTrue(all(isinstance(i, str) and i.startswith("ev_") for i in ids), ids)
        self.assertEqual(len(set(ids)), len(ids))
        roles = [m.metadata.get("role") for m in self.messages]
        self.assertEqual(roles, ["user", "user", "agent", "user", "agent"])

    def test_the_session_holds_exactly_the_two_configured_peers(self) -> None:
        peers = {p.id for p in world.honcho().session(self.session_id).peers()}
        self.assertEqual(peers, {"user", "agent-zero"})


def _at_least(items: list, count: int) -> list | None:
    return items if len(items) >= count else None


if __name__ == "__main__":
    unittest.main()
