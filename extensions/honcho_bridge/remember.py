""""Don't remember this chat" on Agent Zero's side: the sidebar's switch, status's count, and the
"This is me" offered beside it in a chat from a sender `sender_peers` does not map.

The state lives in the chat's own data (rules.REMEMBER_KEY), which Agent Zero saves in the chat's
file; the capture, recall and tool adapters read it there (host.remember_of).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from usr.plugins.honcho.honcho_hub.chats import forget
from usr.plugins.honcho.honcho_hub.chats.rules import REMEMBER_KEY, Remember, offers_this_is_me
from usr.plugins.honcho.honcho_hub.errors import ForgetRefused, InvalidValue
from usr.plugins.honcho.honcho_hub.settings.values import with_sender_peer

from . import host
from .api_actions import checked_action

ACTIONS = ("get", "set", "this_is_me")
STATES = tuple(state.value for state in Remember)
# "This is me" changes the saved settings from a request thread: one change at a time here.
_SAVING = threading.Lock()
# Reads of the saved settings one change may take: each read that finds a save landed since the last
# (the settings page's) builds the change again on it.
SAVE_READS = 3


def remember_document(body: Any) -> dict:
    """One of ACTIONS for an open chat (`chat`: its id): `get` its state (with its sender and
    whether "This is me" is offered), `set` it (`state`: one of STATES) and save the chat with
    Agent Zero's own persist_chat, as Agent Zero does after changing a chat's data, or
    `this_is_me`: map the chat's sender to the owner (see this_is_me). A structured error for
    anything else; never raises on bad input."""
    body, refused = checked_action(body, ACTIONS)
    if refused:
        return refused
    action = body["action"]
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
    if action == "this_is_me":
        problem = this_is_me(context)
        if problem:
            return {"ok": False, "error": problem, **_answer(chat_id, context)}
    return {"ok": True, **_answer(chat_id, context)}


def this_is_me(context: Any) -> str | None:
    """Map the chat's sender to the owner (`user_peer_id`) in the global `sender_peers`, saved
    through Agent Zero's own plugin config save, as the settings page's Save does (every other
    setting kept, a save that landed meanwhile too: see _with_sender); what went wrong, or None.
    Only where rules.offers_this_is_me offers it."""
    from helpers import plugins

    agent = getattr(context, "agent0", None)
    facts = host.human_facts(agent) if agent is not None else None
    if (facts is None or facts.sender is None
            or not offers_this_is_me(facts, host.settings_for(agent))):
        return ("this chat has no sender to name as you: it is not from a chat integration or the"
                " API, its sender is named in sender_peers already, or it is a group")
    owner = host.global_settings().user_peer_id
    with _SAVING:
        try:
            changed = _with_sender(lambda: plugins.get_plugin_config(host.PLUGIN_NAME) or {},
                                   facts.sender.key, owner)
        except InvalidValue:
            return ("this sender cannot be written in sender_peers, or sender_peers holds a value"
                    " the plugin cannot read: set it in the plugin's settings")
        if changed is None:
            return "the plugin's settings kept changing while they were saved: try again"
        plugins.save_plugin_config(host.PLUGIN_NAME, "", "", changed)
    return None


def _with_sender(read: Callable[[], dict], sender: str, owner: str) -> dict | None:
    """The saved settings (`read()`) with `sender` mapped to `owner` in sender_peers, read again
    just before they are returned: when another save (the settings page's) landed since, the change
    is made again on it, so it is not undone. None when the settings still changed after SAVE_READS
    reads. Raises InvalidValue (settings.values.with_sender_peer)."""
    saved = read()
    for _ in range(SAVE_READS):
        changed = {**saved, "sender_peers": with_sender_peer(saved.get("sender_peers", ""),
                                                             sender, owner)}
        latest = read()
        if latest == saved:
            return changed
        saved = latest
    return None


def remember_state_counts() -> Counter[str]:
    """The open chats of this process by "Don't remember" state (a Remember value); memory only.
    Empty on a host that cannot list its chats: status counts none."""
    try:
        from agent import AgentContext
    except ImportError:
        return Counter()
    return Counter(host.chat_remember(context).value for context in AgentContext.all())


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
    """The chat's state, its sender's key (None for a web-UI chat), and whether "This is me" is
    offered."""
    agent = getattr(context, "agent0", None)
    facts = host.human_facts(agent) if agent is not None else None
    sender = facts.sender if facts is not None else None
    return {"chat": chat_id, "state": host.chat_remember(context).value,
            "sender": sender.key if sender is not None else None,
            "this_is_me": bool(facts and offers_this_is_me(facts, host.settings_for(agent)))}


def _open_chat(chat_id: str) -> Any:
    """The open chat whose state this chat's switch shows and sets: a v2.x child chat's memory is
    its root chat's (host.chat_context), and so is its switch."""
    from agent import AgentContext

    context = AgentContext.get(chat_id)
    agent0 = getattr(context, "agent0", None)
    return host.chat_context(agent0) if agent0 is not None else context
