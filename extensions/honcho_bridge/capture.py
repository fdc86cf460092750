"""Capture adapters' logic: who typed it, which ids, then one core call; safe on the event loop.

The hooks only read in-memory facts and cached settings, append the message to the process's
journal and wake the threads that do the rest.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from usr.plugins.honcho.honcho_hub.capture.rules import (
    NOT_A_PLAIN_ANSWER,
    AiMessageFacts,
    UserMessageFacts,
    prefetches_recall,
    skip_reason_for_ai_message,
    skip_reason_for_tool_result,
    skip_reason_for_user_message,
)
from usr.plugins.honcho.honcho_hub.capture.service import CaptureRequest, Outcome, Role
from usr.plugins.honcho.honcho_hub.chats.rules import asks_dialectic
from usr.plugins.honcho.honcho_hub.gateway.scopes import resolve_scope

from . import host
from .chat_sessions import session_of
from .process_hub import hub

log = logging.getLogger("honcho_hub.adapters")
# The user turns Agent Zero makes itself are told by marks set where it sends them, never by
# reading its prompts (a file read and a template render, on the event loop).
# Set on a UserMessage that passed `AgentContext.communicate`: someone sent it to the chat.
SENT_MARK = "_honcho_sent_to_chat"
# Set on the UserMessage `AgentContext.nudge` sends (v1.7: its prompt as the user's text).
NUDGE_MARK = "_honcho_nudge"
# In a chat's data while `AgentContext.nudge` runs: the id of the thread running it.
NUDGING_KEY = "_honcho_nudging"
# Set on an agent once `agent_init` reached our extension: Agent Zero built it. What agent 0 gets
# before (v2.x's placeholder turn, added by `agent_init/_10_initial_message.py`) no one typed. An
# attribute, not agent data: a chat loaded from disk replaces its agents' data after building them.
STARTED_MARK = "_honcho_started"
# Set on the history message of a turn Agent Zero made itself, for the recall hook.
FRAMEWORK_TURN_MARK = "_honcho_framework_turn"
# What a capture returns while the sidebar's purge holds the plugin in this process: nothing queued.
PURGED = "purged"


def mark_sent(data: dict) -> bool:
    """At `AgentContext.communicate`'s start: mark the message as sent to the chat (the web UI, the
    API, an integration, the scheduler, a nudge), and as the nudge when the chat's nudge sends it
    from this thread; whether it was marked. A delegation reaches its subordinate through
    `hist_add_user_message` alone and is never marked. In memory only."""
    message = host.call_argument(data, 1, "msg")
    data_of_chat = getattr(host.call_argument(data, 0, "self"), "data", None)
    nudging = (isinstance(data_of_chat, dict)
               and data_of_chat.get(NUDGING_KEY) == threading.get_ident())
    try:
        setattr(message, SENT_MARK, True)
        if nudging:
            setattr(message, NUDGE_MARK, True)
    except (AttributeError, TypeError):  # a host whose message takes no attribute: not marked
        return False
    return True


def start_nudge(data: dict) -> None:
    """At `AgentContext.nudge`'s start: what its `communicate` sends from this thread until its end
    is the nudge. Per thread: a message another thread sends meanwhile is not."""
    data_of_chat = getattr(host.call_argument(data, 0, "self"), "data", None)
    if isinstance(data_of_chat, dict):
        data_of_chat[NUDGING_KEY] = threading.get_ident()


def end_nudge(data: dict) -> None:
    """At `AgentContext.nudge`'s end, whether it sent a message or failed."""
    data_of_chat = getattr(host.call_argument(data, 0, "self"), "data", None)
    if isinstance(data_of_chat, dict):
        data_of_chat.pop(NUDGING_KEY, None)


def mark_started(agent: Any) -> None:
    """At `agent_init`: Agent Zero built the agent (see STARTED_MARK)."""
    setattr(agent, STARTED_MARK, True)


def framework_turn(history_message: Any) -> bool:
    """Whether capture found this user turn made by Agent Zero itself (a nudge, a placeholder)."""
    return getattr(history_message, FRAMEWORK_TURN_MARK, False) is True


def capture_user_message(agent: Any, data: dict) -> Outcome | str:
    """After `Agent.hist_add_user_message`: queue the text if a person typed it."""
    if data.get("exception") is not None:
        return "host_failed"
    message = host.call_argument(data, 1, "message")
    intervention = bool(host.call_argument(data, 2, "intervention", False))
    text = getattr(message, "message", None)
    settings = host.settings_for(agent)
    delegated = host.works_for_another_agent(agent)
    nudge = getattr(message, NUDGE_MARK, False) is True
    facts = UserMessageFacts(agent_number=agent.number, intervention=intervention,
                             is_nudge=not intervention and nudge,
                             chat=host.chat_facts(agent),
                             empty=isinstance(text, str) and not text.strip(),
                             is_placeholder=not intervention and _is_placeholder(agent, delegated),
                             delegated=delegated,
                             sent_to_chat=getattr(message, SENT_MARK, False) is True)
    if facts.is_nudge or facts.is_placeholder:
        try:
            setattr(data.get("result"), FRAMEWORK_TURN_MARK, True)
        except (AttributeError, TypeError):  # no history message: the recall hook finds none
            pass
    skip = skip_reason_for_user_message(facts, settings)
    prefetch = isinstance(text, str) and prefetches_recall(facts, settings)
    if skip and not prefetch:
        return skip
    project, secrets = host.project_name(agent), host.host_secrets(agent)
    if prefetch:
        # First: every microsecond here is one the turn may wait.
        _prefetch_recall(agent, settings, str(text), project, secrets,
                         asks_dialectic(facts.chat))
    if skip:
        return skip  # a chat not captured by the user's choice still recalls
    source_id = getattr(data.get("result"), "id", "") or getattr(message, "id", "") or ""
    return _capture(agent, settings, Role.USER, str(source_id), text, project, secrets)


def capture_plain_answer(agent: Any, data: dict) -> Outcome | str:
    """After `Agent.hist_add_ai_response`: queue agent 0's final plain-text answer (Agent Zero v2.x
    in Responses mode). When v2.x also runs it as the `response` tool, that capture names the same
    history message and so the same event: the outbox keeps one."""
    if data.get("exception") is not None:
        return "host_failed"
    # v2.x's LLMResult, passed by name; v1.7 passes none
    result = host.call_argument(data, None, "llm_result")
    if getattr(result, "mode", None) != "responses":
        return NOT_A_PLAIN_ANSWER  # every v1.7 reply: turned away before anything is built
    text = host.call_argument(data, 1, "message")
    function_calls = bool(getattr(result, "function_calls", None))
    plain = isinstance(text, str) and bool(text.strip())
    settings = host.settings_for(agent)
    facts = AiMessageFacts(
        agent_number=agent.number, responses_mode=True, function_calls=function_calls,
        # parsed only when it decides
        holds_tool_request=not function_calls and plain and host.holds_tool_request(text),
        empty=not plain, chat=host.chat_facts(agent),
        delegated=host.works_for_another_agent(agent))
    skip = skip_reason_for_ai_message(facts, settings)
    if skip:
        return skip
    source_id = str(getattr(data.get("result"), "id", "") or "")
    return _capture(agent, settings, Role.AGENT, source_id, text, host.project_name(agent),
                    host.host_secrets(agent))


def capture_final_response(agent: Any, tool_name: str, response: Any) -> Outcome | str:
    """After a tool ran: queue agent 0's `response` text, the final answer of the turn."""
    settings = host.settings_for(agent)
    skip = skip_reason_for_tool_result(agent.number, tool_name, host.chat_facts(agent), settings,
                                       delegated=host.works_for_another_agent(agent))
    if skip:
        return skip
    return _capture(agent, settings, Role.AGENT, _last_ai_message_id(agent),
                    getattr(response, "message", None), host.project_name(agent),
                    host.host_secrets(agent))


def _capture(agent: Any, settings, role: Role, source_id: str, text: Any, project: str | None,
             secrets: dict[str, str]) -> Outcome | str:
    # The scope is stored on the event for the worker; the project finds its secrets if this process
    # dies.
    the_hub = hub()
    if the_hub.purged():
        return PURGED  # the journal and outbox would be made again
    request = CaptureRequest(chat_id=host.chat_id(agent), role=role, source_id=source_id,
                             text=text, scope_id=resolve_scope(settings, project), project=project)
    outcome = the_hub.capture(settings).accept(request, settings, secrets,
                                                       mask=lambda value: host.mask(agent, value))
    log.debug("honcho capture: %s %s", role.value, outcome.value)
    if role is Role.USER:  # Agent Zero builds the turn's prompt now: our passes wait for the model
        the_hub.prompt_window.opened()
    the_hub.ensure_worker()
    the_hub.wake_worker()
    the_hub.ensure_writer().wake()  # last: the writer then competes for the interpreter
    return outcome


def _prefetch_recall(agent: Any, settings, text: str, project: str | None,
                     secrets: dict[str, str], ask_dialectic: bool) -> None:
    """Start the coming turn's query-aware recall now (with the dialectic's turn when
    `ask_dialectic`); the recall hook picks it up. Never blocks: the first time, the recall modules
    load on a background thread that then starts it (none while the Hub holds its threads)."""
    scope = resolve_scope(settings, project)
    chat = host.chat_id(agent)

    def prefetch(recaller, wait_s: float) -> None:
        # The chat's session after its forgets: on the loop, as memory holds it (a forget this
        # process has not read yet is read meanwhile, and the recall hook names the new session);
        # elsewhere read first.
        session = session_of(chat, settings, project, wait_s)
        recaller.prefetch(settings, session, text, scope,
                          mask=lambda value: host.mask(agent, value), secrets=secrets,
                          ask_dialectic=ask_dialectic)
    recaller = hub().ready_recaller(lambda built: prefetch(built, settings.recall_wait_s))
    if recaller is not None:
        prefetch(recaller, 0.0)


def _is_placeholder(agent: Any, delegated: bool) -> bool:
    # Agent Zero v2.x's agent_init adds it to agent 0 while the chat's log is still empty, before
    # our agent_init extension marks the agent started. Both: an agent 0 built while the plugin was
    # off carries no mark, but a message typed to it finds the chat's log written (the web UI, the
    # API and the integrations make the chat, log the message, then `communicate`).
    return (agent.number == 0 and not delegated
            and getattr(agent, STARTED_MARK, False) is not True and host.opens_chat(agent))


def _last_ai_message_id(agent: Any) -> str:
    """The history id of the AI message that called the response tool (added just before it ran)."""
    messages = getattr(getattr(getattr(agent, "history", None), "current", None), "messages",
                       None) or []
    for message in reversed(messages):
        if getattr(message, "ai", False):
            return str(getattr(message, "id", "") or "")
    return ""
