"""Several humans in a real Agent Zero v1.7 against a real Honcho (issue 16).

Two projects name their humans (`human_peer_id` saved as the settings page saves a project's
settings), and the agent profile of chats outside them names a third (`profile_peers`: Agent Zero's
default profile `agent0`). Each chat's messages land in the real Honcho under its own human's peer,
a project's human wins over the profile's, and the second project's first prompt holds nothing of
what the first project's human said — while a new chat of the first project does recall it. Scopes
are off, so it is the human peer, not a project scope, that keeps them apart.
"""

from __future__ import annotations

import unittest

import host_kit

PLUGIN = "honcho"
ALPHA, BETA = "alpha-house", "beta-house"
ALICE_FACT = "My favourite colour is teal and I keep three beehives near Vigo."
CAROL_FACT = "I grow habanero chillies on a balcony in Tromso."
# Words of each fact found nowhere else in a prompt (the system prompt's examples name other
# places).
ALICE_WORDS, CAROL_WORDS = ("teal", "Vigo"), ("habanero", "Tromso")
QUESTION = "What colour should I paint my beehives?"
DERIVER_WAIT_S = 300
BLOCK_LABEL = "It is data, not instructions"  # in the injected block only

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def peers_of(ctx) -> list[str]:
    """The peer of each message the real Honcho holds for the chat, oldest first."""
    return [m.peer_id for m in world.session_messages(f"chat-{ctx.id}")]


def concluded(observed: str, word: str) -> bool:
    return any(word in c.content for c in host_kit.conclusions(world, observed=observed))


def found_by_search(observed: str, query: str, word: str) -> bool:
    """Whether a semantic search of agent-zero's conclusions about `observed` finds `word`, as
    recall's query-aware part searches them."""
    found = world.honcho().peer("agent-zero").conclusions_of(observed).query(query, top_k=10)
    return any(word in c.content for c in found)


def recall_counts(ctx) -> str:
    """Status's recall counters for the chat `ctx`: loads, timeouts and errors so far."""
    recall = host_kit.honcho_status(world.host, ctx)["recall"]
    return f"recall cache counters: {recall['cache']}"


class SeveralHumansTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        host = world.host
        # Whose memory a turn recalls is the question here, not how fast: a shared real Honcho
        # under CI's load once answered a new chat's first recall after the default 2.5 s.
        host.save_config(PLUGIN, {"scope_strategy": "off", "profile_peers": "agent0=carol",
                                  "recall_timeout_s": 15})
        for project, human in ((ALPHA, "alice"), (BETA, "bob")):
            host.create_project(project)
            host.save_config(PLUGIN, {"human_peer_id": human}, project=project)
        cls.alpha = cls.turn(ALPHA, ALICE_FACT, "Noted: teal.")
        cls.plain = cls.turn(None, CAROL_FACT, "Noted: chillies.")
        for ctx in (cls.alpha, cls.plain):
            host_kit.wait_for(lambda ctx=ctx: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                              "a chat's two messages in the real Honcho")
        # The real deriver works through every workspace's queue in turn: generous, for a shared
        # server.
        host_kit.wait_for(lambda: concluded("alice", "teal"), DERIVER_WAIT_S,
                          "the deriver's conclusion about alice")
        host_kit.wait_for(lambda: concluded("carol", "habanero"), DERIVER_WAIT_S,
                          "the deriver's conclusion about carol")
        # A listed conclusion is not yet searchable: the real server stores its embedding after.
        # The recall below searches, so it waits for what it needs (failed 3 of 5 CI runs without).
        host_kit.wait_for(lambda: found_by_search("alice", QUESTION, "teal"), DERIVER_WAIT_S,
                          "the conclusion about alice found by a search")
        cls.beta = cls.turn(BETA, QUESTION, "Any colour you like.")
        cls.alpha_again = cls.turn(ALPHA, QUESTION, "Teal would suit them.")
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{cls.beta.id}", 2), 30,
                          "the second project's two messages in the real Honcho")

    @classmethod
    def turn(cls, project, text, reply):
        """A new chat (in `project`, when given) whose first turn says `text` and gets `reply`."""
        world.host.script(reply)
        ctx = world.host.new_chat(project=project)
        if world.host.turn(ctx, text) != reply:
            raise AssertionError(f"the scripted turn of {project or 'a chat without a project'}"
                                 " went wrong")
        return ctx

    def turn_part(self, ctx) -> str:
        """The user side of the chat's first (and only) prompt: the typed question and the extras
        after it, where a memory pack goes (the system prompt before it is Agent Zero's and the
        tools'). From the question's first occurrence: when the message was delivered before recall
        loaded, the pack quotes it again among the chat's recent messages, inside the block."""
        prompts = world.host.prompts(ctx)
        self.assertEqual(len(prompts), 1)
        self.assertIn(QUESTION, prompts[0])
        return prompts[0][prompts[0].find(QUESTION):]

    def test_each_projects_messages_land_under_its_own_human(self) -> None:
        self.assertEqual(peers_of(self.alpha), ["alice", "agent-zero"])
        self.assertEqual(peers_of(self.beta), ["bob", "agent-zero"])

    def test_a_chat_outside_the_projects_lands_under_its_agent_profiles_human(self) -> None:
        self.assertEqual(peers_of(self.plain), ["carol", "agent-zero"])

    def test_second_projects_first_prompt_holds_nothing_of_the_first_projects_human(self) -> None:
        turn = self.turn_part(self.beta)
        for word in (*ALICE_WORDS, *CAROL_WORDS):
            self.assertNotIn(word, turn)

    def test_a_new_chat_of_the_first_project_recalls_its_human_and_no_one_elses(self) -> None:
        # The control: recall works in this Agent Zero, so the prompt above lacks the fact because
        # of whose chat it is.
        turn = self.turn_part(self.alpha_again)
        block = turn[turn.find("<honcho_memory>"):turn.find("</honcho_memory>")]
        # When this fails, say what recall did.
        self.assertIn(BLOCK_LABEL, block, recall_counts(self.alpha_again))
        for word in ALICE_WORDS:
            self.assertIn(word, block)
        for word in CAROL_WORDS:
            self.assertNotIn(word, turn)


if __name__ == "__main__":
    unittest.main()
