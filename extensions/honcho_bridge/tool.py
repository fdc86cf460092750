"""The honcho_memory tool's Agent Zero side: the chat's context in, one bounded text out.

Also whether the tools prompt offers the tool at all (recall_mode, a chat with no human, Agent
Zero's tool policy).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from usr.plugins.honcho.honcho_hub.chats.rules import Remember
from usr.plugins.honcho.honcho_hub.gateway.scopes import resolve_scope
from usr.plugins.honcho.honcho_hub.ops.running_code import read_running_code
from usr.plugins.honcho.honcho_hub.ops.status import build_status, status_text
from usr.plugins.honcho.honcho_hub.settings import log_level
from usr.plugins.honcho.honcho_hub.storage import memory_log
from usr.plugins.honcho.honcho_hub.tool.actions import ActionContext, run_action

from . import host
from .chat_sessions import CHAT_READ_WAIT_S, chat_session
from .process_hub import hub, keep_record
from .recall import template
from .remember import remember_state_counts

# Agent Zero renders every `agent.system.tool.*.md` with the kwargs an extension leaves under this
# key of the agent's data (its tools prompt runs at _11, after ours); our prompt file keeps its
# section only when told.
TOOL_KWARGS_KEY = "_tool_prompt_kwargs"
TOOL_PROMPT = "agent.system.tool.honcho_memory.md"
log = logging.getLogger("honcho_hub.adapters")


UNMAPPED_REFUSAL = ("honcho_memory: this chat has no human to remember (unmapped_chats is"
                    " no-capture and neither its project nor its agent profile names one); nothing"
                    " was read or written.")
# Forgetting a chat opens the outbox, which the sidebar's purge removed (the sidebar's forget is
# refused then too: operations.PURGED_ERROR).
PURGED_REFUSAL = ("honcho_memory: memory is purged in this Agent Zero; forget_chat would create the"
                  " local queue again. Resume memory in the sidebar first; nothing was changed.")


async def run_tool(agent: Any, args: dict) -> str:
    """Run one honcho_memory action for this agent's chat; returns the text the agent reads."""
    if host.chat_human(agent) is None:
        return UNMAPPED_REFUSAL
    def run():  # off the loop: building the context may import the SDK and open a client
        if args.get("action") == "forget_chat" and hub().purged():
            return PURGED_REFUSAL
        return run_action(args.get("action"), args, action_context(agent)).text
    return await asyncio.to_thread(run)


def action_context(agent: Any) -> ActionContext:
    """The chat's context for the memory tool's verbs; off the event loop only (the tool and the
    API handlers call it on a thread): it may wait for the chat's generation to be read."""
    settings = host.settings_for(agent)
    log_level.follow(settings)
    project = host.project_name(agent)
    session = chat_session(agent, settings, project, CHAT_READ_WAIT_S)
    chat_scope = resolve_scope(settings, project)
    the_hub = hub()
    gateway = the_hub.tool_gateway(settings)

    def recall(query: str, scope: str | None) -> str:
        # Asked for on purpose: worth the wait, and runs with automatic recall switched off too.
        return the_hub.recaller().recall(settings, session, query, template(), scope,
                                         wait_s=settings.recall_timeout_s,
                                         secrets=host.host_secrets(agent), deliberate=True).block

    def status() -> str:
        parts = the_hub.status_parts(settings, session, chat_scope, backfill=True)
        parts.not_remembered = remember_state_counts()
        parts.code = read_running_code()
        # Agent Zero masks every secret's value in the tool's result: such a setting is named
        # as kept in secrets, never shown as its alias.
        return status_text(build_status(settings, parts, time.time()),
                           masked=lambda value: host.mask(agent, value) != value)

    def record(write: memory_log.MemoryWrite) -> None:
        # The write is done in Honcho: the next turn's pack shows it, not the one cached before it.
        the_hub.recaller().memory_changed(settings, chat_scope)
        keep_record(the_hub, settings, write)

    def forgotten(chat_id: str, generation: int) -> None:
        # The chat's next turn (its capture-time load on the event loop too) names the new session
        # at once.
        the_hub.chats().forgotten(settings, chat_id, generation)
        host.forget_recalled(chat_id)  # the chat's saved file keeps no recalled text

    return ActionContext(settings=settings, session_id=session, secrets=host.host_secrets(agent),
                         mask=lambda text: host.mask(agent, text), gateway=gateway, recall=recall,
                         status=status, supports_scopes=gateway.supports_scopes,
                         scope_id=chat_scope, record=record, chat_id=host.chat_id(agent),
                         forgotten=forgotten, remember=host.remember_of(agent),
                         confined=host.is_confined(agent))


async def policy_allows_tool(agent: Any) -> bool:
    """Whether Agent Zero's tool policy lets this agent see the tool (host.tool_allowed), read off
    the event loop; True when it cannot be read (Agent Zero still enforces its policy on a call)."""
    try:
        return await asyncio.to_thread(host.tool_allowed, agent)
    except Exception:
        log.exception("honcho: the tool policy could not be read; the tool stays offered")
        return True


def offer_tool_in_prompt(agent: Any, policy_allows: bool = True) -> bool:
    """Before the tools prompt is built: whether the tool's section is in it (every recall_mode but
    context, where memory is injected only, not in a chat with no human, and not where Agent
    Zero's tool policy hides or blocks it: `policy_allows`), and whether it may say memory is
    injected (not under tools). Reads cached settings: safe on the event loop."""
    settings = host.settings_for(agent)
    # no-capture: no human
    offered = (settings.offers_tool and policy_allows
               and host.chat_human(agent, settings) is not None)
    # A chat the user took out of recall (Remember.OFF) is told nothing is injected.
    injected = settings.injects_recall and host.remember_of(agent) is not Remember.OFF
    kwargs = agent.data.setdefault(TOOL_KWARGS_KEY, {})
    kwargs[TOOL_PROMPT] = {**kwargs.get(TOOL_PROMPT, {}), "honcho_tool_offered": offered,
                           "honcho_recall_injected": injected}
    return offered
