""""Don't remember this chat" on Agent Zero's side: the sidebar's switch and status's count.

The state lives in the chat's own data (rules.REMEMBER_KEY), which Agent Zero saves in the chat's
file; the capture, recall and tool adapters read it there (host.remember_of).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from usr.plugins.honcho.honcho_hub.chats import forget
from usr.plugins.honcho.honcho_hub.chats.rules import REMEMBER_KEY, Remember
from usr.plugins.honcho.honcho_hub.errors import ForgetRefused

from . import host

ACTIONS = ("get", "set")
STATES = tuple(state.value for state in Remember)


def remember_document(body: Any) -> dict:
    """One of ACTIONS for an open chat (`chat`: its id): `get` its state, `set` it (`state`: one of
    STATES) and save the chat with Agent Zero's own persist_chat, as Agent Zero does after changing
    a chat's data. A structured error for anything else; never raises on bad input."""
    body = body if isinstance(body, dict) else {}
    action = body.get("action")
    if action not in ACTIONS:
        return {"ok": False, "error": f"unknown action; use one of: {', '.join(ACTIONS)}"}
    try:
        chat_id = forget.checked_chat_id(body.get("chat"))
    except ForgetRefused as exc:
        return {"ok": False, "error": str(exc)}
    context = _open_chat(chat_id)
    if context is None:
        return {"ok": False, "error": "no open chat in Agent Zero has this id"}
    if action == "set":
        state = body.get("state")
        if state not in STATES:
            return {"ok": False, "error": f"state must be one of: {', '.join(STATES)}"}
        problem = _apply(context, Remember(state))
        if problem:
            return {"ok": False, "error": problem, **_answer(chat_id, context)}
    return {"ok": True, **_answer(chat_id, context)}


def not_remembered_counts() -> dict[str, int]:
    """The open chats of this process that are not remembered, by state; memory only. Empty on a
    host that cannot list its chats: status goes without the count."""
    try:
        from agent import AgentContext
    except ImportError:
        return {}
    counts = Counter(host.chat_remember(context) for context in AgentContext.all())
    return {state.value: counts[state] for state in (Remember.NO_CAPTURE, Remember.OFF)}


def _apply(context: Any, state: Remember) -> str | None:
    """Set the chat's state (memory first: its next message obeys it) and save the chat file; what
    went wrong, or None."""
    from helpers import persist_chat

    # Agent Zero's own way to change a chat's data (projects.deactivate_project clears with None).
    context.set_data(REMEMBER_KEY, None if state is Remember.YES else state.value)
    try:
        persist_chat.save_tmp_chat(context)
    except OSError:
        return "the chat's state is changed, but its file could not be saved: a restart undoes it"
    return None


def _answer(chat_id: str, context: Any) -> dict:
    return {"chat": chat_id, "state": host.chat_remember(context).value}


def _open_chat(chat_id: str) -> Any:
    from agent import AgentContext

    return AgentContext.get(chat_id)
