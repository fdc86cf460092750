"""The memory pack in a real Agent Zero v1.7 holds a fact said in several chats once.

The user says the same thing in three chats; the real Honcho's deriver (the fake LLM: "<peer>
said: <message>") concludes it in each, so Honcho's representation lists it three times, each
with its own chat's time. A new chat's first prompt holds it once.
"""

from __future__ import annotations

import unittest

import host_kit

FACT = "Hi, I'm Dana and I keep three beehives near Vigo."
CHATS = 3

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


class RepeatedFactTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        host.script(*["Hello Dana."] * CHATS, "Dana keeps bees.")
        for _ in range(CHATS):
            chat = host.new_chat()
            host.turn(chat, FACT)
            host_kit.wait_for(lambda chat=chat: host_kit.delivered(world, f"chat-{chat.id}", 2),
                              30, "the chat's two messages in the real Honcho")
        host_kit.wait_for(lambda: _said() >= CHATS, 120,
                          f"the deriver's conclusion in each of the {CHATS} chats")
        cls.ctx = host.new_chat()
        host.turn(cls.ctx, "Who am I and where are my beehives?")
        cls.prompts = host.prompts(cls.ctx)

    def test_the_fact_said_in_three_chats_is_in_the_first_prompt_once(self) -> None:
        self.assertEqual(_said(), CHATS)  # Honcho holds it once per chat
        prompt = self.prompts[0]
        start, end = prompt.rfind("<honcho_memory>"), prompt.rfind("</honcho_memory>")
        self.assertGreaterEqual(start, 0, "no memory pack in the new chat's first prompt")
        self.assertEqual(prompt[start:end].count("three beehives near Vigo"), 1)


def _said() -> int:
    return sum(1 for c in host_kit.conclusions(world) if "three beehives near Vigo" in c.content)


if __name__ == "__main__":
    unittest.main()
