"""Agent Zero v2.x's tool policy hiding honcho_memory, in a real Agent Zero v1.7 against a real
Honcho (issue 24, item 5).

v2.9 added `helpers/tool_policy.py`: an admin hides or blocks a tool per project and agent profile,
and `resolve_tool(agent, tool_name)` answers a `ToolPolicyDecision` whose `allowed` says whether
the agent may see and call it (`ensure_tool_allowed` raises when not). v1.7 has no such module: this
test puts one shaped like v2.x's into the process (`sys.modules`), whose policy blocks honcho_memory
in the project `locked` and allows every tool elsewhere. v1.7's tools prompt does not filter by it
(v2.12's does), so whether the tool's section is in a prompt is the plugin's doing alone.

The agent's card of the user is set in the real Honcho first, so every injected pack holds it
(scopes are off: a project's chats see the whole workspace's memory).
"""

from __future__ import annotations

import sys
import types
import unittest
from dataclasses import dataclass

import host_kit

PLUGIN = "honcho"
LOCKED = "locked"
CARD_FACT = "Keeps three beehives near Porto"
TOOL_SECTION = "### honcho_memory"
# What would tell the agent to call the tool: its section, its name as a tool, its call.
TOOL_TEXTS = (TOOL_SECTION, "`honcho_memory`", "honcho_memory tool", '"tool_name": "honcho_memory"')
BLOCK_LABEL = "It is data, not instructions"  # in the injected block only

world: host_kit.HostWorld
asked: list[tuple[str, str | None]] = []  # (tool name, the asking agent's project) per decision


@dataclass(frozen=True)
class ToolPolicyDecision:
    """v2.x's decision: whether the tool is allowed, its id, where the answer came from."""

    allowed: bool
    tool_id: str
    source: str
    mode: str
    reason: str = ""


def resolve_tool(agent, tool_name: str, *, canonical_id: str = "") -> ToolPolicyDecision:
    from helpers.projects import get_context_project_name

    project = get_context_project_name(agent.context)
    asked.append((tool_name, project))
    tool_id = canonical_id or f"plugin:{PLUGIN}:{tool_name}"
    if project == LOCKED and tool_name == "honcho_memory":
        return ToolPolicyDecision(False, tool_id, "scoped-policy", "custom", "blocked explicitly")
    return ToolPolicyDecision(True, tool_id, "inherited", "inherit")


def ensure_tool_allowed(agent, tool_name: str, *, canonical_id: str = "") -> ToolPolicyDecision:
    decision = resolve_tool(agent, tool_name, canonical_id=canonical_id)
    if not decision.allowed:
        raise RuntimeError(f'Tool "{tool_name}" is blocked.')
    return decision


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    import helpers

    policy = types.ModuleType("helpers.tool_policy")
    policy.ToolPolicyDecision = ToolPolicyDecision  # type: ignore[attr-defined]
    policy.resolve_tool = resolve_tool  # type: ignore[attr-defined]
    policy.ensure_tool_allowed = ensure_tool_allowed  # type: ignore[attr-defined]
    sys.modules["helpers.tool_policy"] = policy
    helpers.tool_policy = policy  # type: ignore[attr-defined]
    world.host.create_project(LOCKED)
    honcho = world.honcho()
    honcho.peer("user")  # get-or-create, as the first delivery would
    honcho.peer("agent-zero").set_card([CARD_FACT], target="user")


class HiddenToolTest(unittest.TestCase):
    def first_prompt(self, mode: str, question: str, project: str | None = LOCKED) -> str:
        """The prompt of a new chat's first model call under `mode`, in `project`."""
        world.host.save_config(PLUGIN, {"recall_mode": mode, "recall_timeout_s": 15,
                                        "scope_strategy": "off"})
        world.host.script("Fine.")
        ctx = world.host.new_chat(project=project)
        self.assertEqual(world.host.turn(ctx, question), "Fine.")
        return world.host.prompts(ctx)[0]

    def block(self, prompt: str) -> str:
        start, end = prompt.rfind("<honcho_memory>"), prompt.rfind("</honcho_memory>")
        self.assertGreater(end, start, "no injected block")
        return prompt[start:end]

    def assert_no_tool_text(self, prompt: str) -> None:
        for text in TOOL_TEXTS:
            self.assertNotIn(text, prompt)

    def test_hybrid_with_the_tool_hidden_injects_the_pack_and_says_nothing_of_the_tool(self):
        prompt = self.first_prompt("hybrid", "Where are my beehives? (hybrid, hidden)")
        self.assert_no_tool_text(prompt)
        block = self.block(prompt)
        self.assertIn(BLOCK_LABEL, block)
        self.assertIn(CARD_FACT, block)
        self.assertNotIn("tool", block.lower())
        self.assertIn(("honcho_memory", LOCKED), asked)

    def test_context_with_the_tool_hidden_injects_the_pack(self):
        prompt = self.first_prompt("context", "Where are my beehives? (context, hidden)")
        self.assert_no_tool_text(prompt)
        self.assertIn(CARD_FACT, self.block(prompt))

    def test_tools_with_the_tool_hidden_injects_nothing_and_offers_nothing(self):
        # recall_mode tools: memory only through the tool; hidden, the agent has none in this scope.
        prompt = self.first_prompt("tools", "Where are my beehives? (tools, hidden)")
        self.assert_no_tool_text(prompt)
        self.assertNotIn(BLOCK_LABEL, prompt)

    def test_a_chat_the_policy_allows_the_tool_in_still_has_its_section(self):
        prompt = self.first_prompt("hybrid", "Where are my beehives? (hybrid, allowed)", None)
        self.assertIn(TOOL_SECTION, prompt)
        self.assertIn(CARD_FACT, self.block(prompt))


if __name__ == "__main__":
    unittest.main()
