"""Agent Zero v2.x's child chats and `parallel` in a real Agent Zero v1.7 against a real Honcho
(issue 24, item 4).

Only v1.7 runs here: the test plugin `v2x_children` (tests/host/v2x_children, copied into the tree
beside this plugin) makes it do what v2.x does; Agent Zero is not changed.
- `tools/call_subordinate.py` replaces v1.7's tool (a plugin's tools come before Agent Zero's): the
  subordinate is `Agent(superior.number + 1, config)` in a child chat of its own, `_superior` set,
  the parent's project copied; the assignment reaches it through `hist_add_user_message`. Assumed:
  while it runs, its child chat counts as busy (so what the human types there is an intervention).
- `tools/parallel.py`: each tool call runs in a throwaway BACKGROUND chat whose data names the
  calling chat (`_parallel_parent_context_id`, v2.x's key), removed afterwards; a switch links it
  through its agent's `_superior` instead, or not at all.
- `chat_model_call_after` (a test device): the human types into the child chat, through its
  `AgentContext.communicate`, right after the subordinate's model gave a chosen reply.

The root chat's human is `carol` (agent profile agent0); the subordinate runs under the profile
`developer`, which names no one. A tool call made for the root chat reads and writes its memory
(its session, its human) from the child chat and from a worker; what the human types into the child
chat, an intervention or an ordinary message, is captured in the root chat's session as carol's;
the superior's assignment is captured nowhere.
"""

from __future__ import annotations

import json
import os
import sqlite3
import unittest

import host_kit
from host_kit import remembered_id

CHILDREN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "v2x_children")
PLUGIN = "honcho"
ROOT_TYPED = "I moor my sailboat at Pier Nine in Tarragona."
ROOT_ASKS = "Where is my boat? Ask a helper."
DELEGATION = "Find out where the user's boat is moored."
INTERVENTION = "Also check whether the harbour office opens on Sundays."
CHILD_TYPED = "Please also remember that my dinghy is called Puffin."
FACT = "The user's dinghy is called Puffin."
PARALLEL_FACT = "The user's sailboat has a blue hull."
INTERRUPT_MARKER = "interrupt-me"

world: host_kit.HostWorld
root = sub = child = None  # the root chat, the subordinate, its child chat
found: dict[str, str] = {}  # what the tool calls answered, by name


def setUpModule() -> None:
    global world, root, sub, child
    world = host_kit.HostWorld(plugins=(CHILDREN,))
    host = world.host
    from usr.plugins.v2x_children import children

    host.save_config(PLUGIN, {"profile_peers": "agent0=carol", "recall_timeout_s": 15})
    host.script("Noted, Pier Nine.")
    root = host.new_chat()
    host.turn(root, ROOT_TYPED)
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{root.id}", 2), 30,
                      "the root chat's first two messages in the real Honcho")

    # The root's agent delegates; the human types into the child chat while the subordinate runs.
    children.INTERRUPTS[INTERRUPT_MARKER] = INTERVENTION
    host.script({"tool_name": "call_subordinate",
                 "tool_args": {"message": DELEGATION, "profile": "developer"}},
                {"tool_name": "honcho_memory", "tool_args": {"action": "status",
                                                             "note": INTERRUPT_MARKER}},
                "Sub: the boat is at Pier Nine.",
                "Root: your boat is at Pier Nine.")
    if host.turn(root, ROOT_ASKS) != "Root: your boat is at Pier Nine.":
        raise AssertionError("the delegating turn went wrong")
    sub = children.child_of(root.agent0)
    child = sub.context
    # Then, with nothing running, an ordinary message typed into the child chat.
    host.script("Sub: noted, Puffin.", "Root: noted, Puffin.")
    child.communicate(host_kit.user_message(CHILD_TYPED)).result_sync(60)

    # The honcho_memory tool, run by the subordinate in its child chat...
    for name, args in (("child_remember", {"action": "remember", "content": FACT}),
                       ("child_status", {"action": "status"}),
                       ("child_search", {"action": "search", "target": "session",
                                         "query": "Pier Nine sailboat"}),
                       ("child_recall", {"action": "recall", "query": "Pier Nine sailboat"})):
        found[name] = tool(child, **args)
    # ... and by a parallel worker of the root chat, linked either way v2.x may link it, or not.
    for way in ("parallel_parent", "superior", "none"):
        children.PARALLEL_LINK["way"] = way
        calls = [{"tool_name": "honcho_memory", "tool_args": {"action": "status"}}]
        if way == "parallel_parent":
            calls.append({"tool_name": "honcho_memory",
                          "tool_args": {"action": "remember", "content": PARALLEL_FACT}})
        results = json.loads(tool(root, "parallel", tool_calls=calls))
        found[f"{way}_status"] = results[0]["result"]
        found[f"{way}_worker"] = children.WORKERS[-1]
        if len(results) > 1:
            found["parallel_remember"] = results[1]["result"]
    found["status_api"] = host_kit.honcho_status(host, child)["identity"]
    # Last, as the UI's delete does (Agent Zero resets the chat it removes).
    response = host.api("chat_remove", {"context": child.id})
    if response.status_code != 200:
        raise AssertionError(f"chat_remove: {response.get_data(as_text=True)[:500]}")


def tool(ctx, name: str = "honcho_memory", **args) -> str:
    """The tool's result as Agent Zero added it to the history of the chat's running agent."""
    final, result = world.host.run_tool(ctx, name, **args)
    if final is not None or not isinstance(result, str):
        raise AssertionError(f"{name} ended the turn or added no result: {final!r} {result!r}")
    return result


def events(session_id: str) -> list[tuple[str, str]]:
    """(peer, text) of each event the outbox holds for a session, in capture order."""
    conn = sqlite3.connect(f"file:{world.outbox_path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT peer_id, content FROM events WHERE session_id = ?"
                            " ORDER BY seq", (session_id,)).fetchall()
    finally:
        conn.close()


def all_texts() -> list[str]:
    conn = sqlite3.connect(f"file:{world.outbox_path}?mode=ro", uri=True, timeout=5)
    try:
        return [row[0] for row in conn.execute("SELECT content FROM events")]
    finally:
        conn.close()


def kept(conclusion_id: str) -> tuple[str | None, str] | None:
    """(session, observed peer) of the local record of a remember."""
    return next(((session, observed) for kind, session, observed, _ in
                 host_kit.memory_writes(world.outbox_path, conclusion_id) if kind == "remember"),
                None)


class WhatTheHumanTypesInAChildChatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        # Every capture was accepted by the time the turns ended: wait until they are on disk.
        host_kit.wait_for(lambda: host_kit.honcho_status(world.host)["queue"]["in_journal"] == 0,
                          30, "the capture journal to be written to the outbox")

    def test_the_child_chat_is_a_chat_of_its_own_linked_to_the_root(self) -> None:
        self.assertIsNot(child, root)
        self.assertEqual(child.get_output_data("parent_context_id"), root.id)
        self.assertIs(sub.data["_superior"], root.agent0)
        self.assertEqual(sub.number, 1)

    def test_the_intervention_and_the_typed_message_land_in_the_root_session_as_its_human(self):
        self.assertEqual(events(f"chat-{root.id}"), [
            ("carol", ROOT_TYPED), ("agent-zero", "Noted, Pier Nine."),
            ("carol", ROOT_ASKS), ("carol", INTERVENTION),
            ("agent-zero", "Root: your boat is at Pier Nine."),
            ("carol", CHILD_TYPED), ("agent-zero", "Root: noted, Puffin.")])

    def test_nothing_lands_in_a_session_of_the_child_chat(self) -> None:
        self.assertEqual(events(f"chat-{child.id}"), [])

    def test_the_superiors_assignment_and_the_subordinates_answers_are_not_captured(self):
        texts = all_texts()
        for text in (DELEGATION, "Sub: the boat is at Pier Nine.", "Sub: noted, Puffin."):
            self.assertNotIn(text, texts)


class ToolInTheChildChatTest(unittest.TestCase):
    def test_remember_lands_on_the_root_chats_human_and_session(self) -> None:
        conclusion_id = remembered_id(found["child_remember"])
        self.assertEqual(kept(conclusion_id), (f"chat-{root.id}", "carol"))
        about_carol = {c.id: c.content for c in host_kit.conclusions(world, observed="carol")}
        self.assertEqual(about_carol.get(conclusion_id), FACT)

    def test_status_names_the_root_chats_session(self) -> None:
        self.assertIn(f"chat-{root.id}", found["child_status"])
        self.assertNotIn(f"chat-{child.id}", found["child_status"])
        self.assertIn("user carol", found["child_status"])

    def test_search_of_the_session_finds_what_was_typed_in_the_root_chat(self) -> None:
        self.assertIn(f"carol: {ROOT_TYPED}", found["child_search"])

    def test_recall_reads_the_root_chats_session(self) -> None:
        self.assertIn("<honcho_memory>", found["child_recall"])
        self.assertIn(ROOT_TYPED, found["child_recall"])

    def test_the_status_api_for_the_child_chat_names_the_root_chats_session(self) -> None:
        identity = found["status_api"]
        self.assertEqual((identity["session_id"], identity["user_peer_id"]),
                         (f"chat-{root.id}", "carol"))


class ParallelWorkerTest(unittest.TestCase):
    def test_a_worker_linked_by_v2xs_parallel_parent_works_for_the_root_chat(self) -> None:
        self.assertIn(f"chat-{root.id}", found["parallel_parent_status"])
        self.assertNotIn(f"chat-{found['parallel_parent_worker']}", found["parallel_parent_status"])
        conclusion_id = remembered_id(found["parallel_remember"])
        self.assertEqual(kept(conclusion_id), (f"chat-{root.id}", "carol"))

    def test_a_worker_linked_through_superior_works_for_the_root_chat(self) -> None:
        self.assertIn(f"chat-{root.id}", found["superior_status"])
        self.assertNotIn(f"chat-{found['superior_worker']}", found["superior_status"])

    def test_a_worker_linked_to_no_chat_is_a_background_chat_of_its_own(self) -> None:
        # MCP and A2A chats are such chats: the tool there keeps to that chat's own session.
        self.assertIn(f"chat-{found['none_worker']}", found["none_status"])
        self.assertEqual(events(f"chat-{found['none_worker']}"), [])


class ChildChatDeletedTest(unittest.TestCase):
    def offers(self) -> list[str]:
        answer = world.host.api("plugins/honcho/honcho_forget", {"action": "offers"}).get_json()
        self.assertTrue(answer["ok"], answer)
        return [offer["chat_id"] for offer in answer["offers"]]

    def test_deleting_the_child_chat_offers_nothing_to_forget(self) -> None:
        # Its memory is the root chat's: forgetting "it" would name the root chat's session.
        self.assertNotIn(child.id, self.offers())


if __name__ == "__main__":
    unittest.main()
