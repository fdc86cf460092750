"""What the v2.x child-chat emulation shares with the test that drives it.

Agent Zero v2.x runs a subordinate in a chat of its own (a child chat the user can open), linked to
its superior by `_superior` in the subordinate's data, and runs each `parallel` tool call in a
throwaway BACKGROUND chat linked to the calling chat by `_parallel_parent_context_id` in that
chat's data. The tools and the extension of this test plugin make v1.7 do the same (see
tests/host/host_child_chats.py for what each one does and assumes).
"""

from __future__ import annotations

from typing import Any

# v2.x's names for the links
SUPERIOR = "_superior"  # Agent.DATA_NAME_SUPERIOR, in v1.7 and v2.x
PARALLEL_PARENT = "_parallel_parent_context_id"  # a parallel worker chat's data: the calling chat
PARENT_CONTEXT_ID = "parent_context_id"  # a child chat's output data: its parent chat

CHILD = "_v2x_child"  # the superior's data: its subordinate (v1.7's `_subordinate` would make
# Agent Zero save the subordinate into the parent's chat file)

# {text in a model reply: what the human types}: once a subordinate's model gave such a reply,
# the human sends the text to the subordinate's child chat while it runs.
INTERRUPTS: dict[str, str] = {}
# How a parallel worker chat names the chat it works for: "parallel_parent" (v2.x, its context
# data), "superior" (its agent's `_superior`) or "none" (no link at all).
PARALLEL_LINK = {"way": "parallel_parent"}
# The ids of the worker chats `parallel` made, in order (they are removed after their call).
WORKERS: list[str] = []


def child_of(agent: Any) -> Any:
    """The subordinate agent `agent` delegated to, None before its first delegation."""
    return agent.data.get(CHILD)
