"""Forgetting a chat in a real Agent Zero v1.7 against a real Honcho: deleting a chat through Agent
Zero's own `chat_remove` API (as the UI's delete does) only offers to forget it; the offer,
confirmed, deletes the chat's Honcho session; a chat removed otherwise is never offered.
"""

from __future__ import annotations

import unittest

import host_kit

FORGET = "plugins/honcho/honcho_forget"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def sessions() -> set[str]:
    return {session.id for session in world.honcho().sessions()}


class ChatDeleteOfferTest(unittest.TestCase):
    def offers(self) -> list[str]:
        answer = world.host.api(FORGET, {"action": "offers"}).get_json()
        self.assertTrue(answer["ok"], answer)
        return [offer["chat_id"] for offer in answer["offers"]]

    def test_deleting_a_chat_in_agent_zero_offers_to_forget_it_only_confirmed_offers_delete(self):
        world.host.script("Noted: the red kayak.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, "I paddle a red kayak on Sundays.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                          "the chat in Honcho")
        response = world.host.api("chat_remove", {"context": ctx.id})  # the UI's delete
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:300])
        self.assertIn(ctx.id, self.offers())
        self.assertIn(f"chat-{ctx.id}", sessions())  # an offer deletes nothing by itself
        refused = world.host.api(FORGET, {"action": "forget_chat", "chat": ctx.id}).get_json()
        self.assertFalse(refused["ok"])  # not confirmed
        self.assertIn(f"chat-{ctx.id}", sessions())
        done = world.host.api(FORGET, {"action": "forget_chat", "chat": ctx.id,
                                       "confirmed": True}).get_json()
        self.assertTrue(done["ok"], done)
        host_kit.wait_for(lambda: f"chat-{ctx.id}" not in sessions(), 30,
                          "the session deleted in Honcho")
        self.assertNotIn(ctx.id, self.offers())

    def test_a_chat_removed_without_the_delete_action_is_not_offered(self):
        from agent import AgentContext

        ctx = world.host.new_chat()
        AgentContext.remove(ctx.id)  # as the external API's expiry or the scheduler remove a chat
        self.assertNotIn(ctx.id, self.offers())


if __name__ == "__main__":
    unittest.main()
