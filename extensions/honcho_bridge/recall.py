"""Recall for Agent Zero: the typed text of agent 0's user turn in, a labelled block in extras out.

Also what a chat's start warms: its base pack, a new chat's dialectic note, its scope registration.
"""

from __future__ import annotations

import asyncio
import os
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from usr.plugins.honcho.honcho_hub.chats.rules import (
    Remember,
    asks_dialectic,
    skip_reason_for_recall,
)
from usr.plugins.honcho.honcho_hub.gateway.scopes import resolve_scope
from usr.plugins.honcho.honcho_hub.runtime import in_background

from . import host
from .capture import framework_turn
from .chat_sessions import CHAT_READ_WAIT_S, session_of
from .process_hub import hub

if TYPE_CHECKING:  # the recaller needs the plugin's requirements: never at this module's load
    from usr.plugins.honcho.honcho_hub.recall.recaller import RecallResult
    from usr.plugins.honcho.honcho_hub.recall.receipts import Receipt

EXTRAS_KEY = host.RECALL_EXTRAS_KEY
TEMPLATE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "prompts", "honcho.recall_block.md")


async def inject_recall(agent: Any, loop_data: Any) -> str:
    """Before agent 0's first model call of a user turn; returns what happened (for logs and
    tests)."""
    if getattr(agent, "number", None) != 0 or getattr(loop_data, "iteration", None) != 0:
        return "not_first_turn_call"
    if host.works_for_another_agent(agent):
        return "delegated_agent"  # a v2.x child chat's or worker's agent 0 works for another
    settings = host.settings_for(agent)
    skip = skip_reason_for_recall(host.chat_facts(agent), settings)
    if skip:
        return skip
    project = host.project_name(agent)
    scope = resolve_scope(settings, project)
    user_message = getattr(loop_data, "user_message", None)
    text = typed_text(user_message)
    chat = host.chat_id(agent)
    # A turn nobody typed (a nudge, v1.7's or v2.x's empty one; an integration's empty message)
    # gets what recall holds: no query to search with, no load.
    typed = bool(text.strip()) and not framework_turn(user_message)

    # off the loop: the first import, masking and redaction of the query, the bounded wait
    def recall() -> tuple[RecallResult, Receipt | None] | None:
        deadline = time.monotonic() + settings.recall_wait_s
        try:
            recaller = hub().recaller()
        except ImportError:
            # the plugin's requirements are missing: delivery's warning says so, once
            return None
        # The chat's session after its forgets, read within the turn's own wait (a forget the
        # process has not read yet: another process's, or one from before this process started).
        session = session_of(chat, settings, project, settings.recall_wait_s)
        result = recaller.recall(settings, session, text, template(), scope,
                                 lambda value: host.mask(agent, value),
                                 wait_s=max(0.0, deadline - time.monotonic()),
                                 secrets=host.host_secrets(agent), load=typed)
        wants_receipt = settings.recall_receipts and result.source != "disabled"
        return result, recaller.receipt(settings, result) if wants_receipt else None
    recalled = await asyncio.to_thread(recall)
    if recalled is None:
        loop_data.extras_persistent.pop(EXTRAS_KEY, None)
        return "requirements_missing"
    result, receipt = recalled
    if result.block:
        loop_data.extras_persistent[EXTRAS_KEY] = result.block
    else:
        loop_data.extras_persistent.pop(EXTRAS_KEY, None)
    if receipt is not None:
        # Labels and counts only: the log item is saved in the chat's file, which outlives a forget.
        # Last, and on its own: a log that fails costs the receipt, not the turn's memory.
        try:
            host.log_item(agent, "info", receipt.heading(), receipt.kvps(), receipt.log_id)
        except Exception as exc:  # its text may be the host's: only its kind is logged
            host.log.warning("honcho: the turn's receipt was not logged (%s)", type(exc).__name__)
    return result.source


def typed_text(message: Any) -> str:
    """What the human typed: the `user_message` (or `user_intervention`) field, not the wrapper."""
    content = getattr(message, "content", None)
    if isinstance(content, dict):
        value = content.get("user_message") or content.get("user_intervention") or ""
        return value if isinstance(value, str) else ""
    return ""


@lru_cache(maxsize=1)
def template() -> str:
    with open(TEMPLATE, encoding="utf-8") as handle:
        return handle.read()


# In the data of a chat a person just opened, until its first message starts it (not saved).
START_PENDING_KEY = "_honcho_chat_start_pending"


def start_chat(agent: Any) -> bool:
    """At agent 0's `agent_init`: start a chat loaded from disk or reset now (register_chat); defer
    a chat a person is opening to its first message (start_chat_at_message): a chat integration
    writes its sender after `AgentContext(...)` returns and the API's origin is known at
    `communicate`, so now it would look like the owner's. Whether it started now."""
    context = host.chat_context(agent)
    data = getattr(context, "data", None)
    # `AgentContext.__init__` builds its agent 0 last and sets `agent0` after: a chat without one
    # is being made (a reset builds a new agent 0 while the old one is still the chat's).
    being_made = getattr(context, "agent0", None) is None
    if isinstance(data, dict) and being_made and host.is_new_user_chat(agent):
        data[START_PENDING_KEY] = True
        return False
    register_chat(agent)
    return True


def start_chat_at_message(context: Any) -> bool:
    """At `AgentContext.communicate`'s start: start the chat whose start was deferred, once
    (register_chat: memory only, threads do the rest). Whether it started."""
    data = getattr(context, "data", None)
    if not isinstance(data, dict) or data.pop(START_PENDING_KEY, None) is None:
        return False
    register_chat(context.agent0, new_chat=True)
    return True


def register_chat(agent: Any, new_chat: bool | None = None) -> bool:
    """At chat start: warm the base pack, prewarm a new chat's dialectic note (when it is on) and
    queue the chat's scope registration (background threads do the requests). `new_chat`: whether
    a person just opened it (None: host.is_new_user_chat tells). A v2.x child chat's or worker's
    agent 0 works for another chat, whose own start did all of it."""
    if host.works_for_another_agent(agent):
        return False
    facts = host.chat_facts(agent)
    if facts.background:
        # Nothing of it is captured or recalled; v2.x's parallel makes one for each tool call.
        return False
    settings = host.settings_for(agent)
    if host.chat_human(agent, settings) is None or facts.remember is Remember.OFF:
        return False  # no one named, or outside memory: nothing to warm, prewarm or register
    project = host.project_name(agent)
    scope = resolve_scope(settings, project)
    chat = host.chat_id(agent)
    # A chat left out of capture reads memory but writes nothing: no session of its own created
    # (neither by a registration nor by the dialectic's question).
    prewarm = (settings.dialectic_enabled and asks_dialectic(facts)
               and (host.is_new_user_chat(agent) if new_chat is None else new_chat))
    register = bool(scope) and facts.remember is Remember.YES

    def start() -> None:  # off the loop: the first call imports the SDK
        the_hub = hub()
        recaller = the_hub.recaller()
        # The base pack does not depend on the chat's session: its load is queued before the
        # session's read (which may wait for the outbox), so the chat's first turns are not left
        # without it.
        recaller.warm(settings, scope)
        # Read here, at chat start, the chat's forgets are known before its first turn (chats loaded
        # at startup).
        session = session_of(chat, settings, project, CHAT_READ_WAIT_S)
        if prewarm:
            recaller.prewarm(settings, session, scope)
        registrar = the_hub.registrar() if register else None
        if registrar is not None and registrar.is_alive():
            registrar.submit(settings, session, scope)
    in_background("chat-start", start, single=False)
    return register
