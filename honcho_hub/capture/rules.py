"""Which messages are the human's and the primary agent's final answers.

Pure rules on plain facts the adapters read off Agent Zero's objects, so they are tested without a
host: a message is captured only when a person typed it, or when it is agent 0's final response, in
a chat capture takes (chats/rules.py: whose chat it is).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..chats.rules import ChatFacts, Remember, skip_reason_for_chat, skip_reason_for_recall
from ..settings.config import Settings

# The skip reason of an AI message outside Responses mode (every v1.7 reply): no final plain answer.
NOT_A_PLAIN_ANSWER = "not_a_plain_answer"


@dataclass(frozen=True)
class UserMessageFacts:
    agent_number: int
    intervention: bool  # sent while an agent of the chat was running: always the human's
    is_nudge: bool  # the framework's own "continue" prompt (v1.7 sends it as the user's text)
    chat: ChatFacts
    # No text: Agent Zero v2.x's nudge and the integrations' messages carry only system messages.
    empty: bool = False
    # Agent Zero v2.x's placeholder turn ("Hello!") that opens a new or reset chat, before anyone
    # typed anything.
    is_placeholder: bool = False
    # The agent works for another agent whatever its number: a subordinate in a child chat, a
    # parallel worker (Agent Zero v2.x). Its user messages are delegations unless `sent_to_chat`.
    delegated: bool = False
    # It came in through `AgentContext.communicate`: someone sent it to the chat (a delegation
    # never does), so typed into a subordinate's child chat it is the human's.
    sent_to_chat: bool = False


@dataclass(frozen=True)
class AiMessageFacts:
    """An AI message as Agent Zero adds it to agent history (`hist_add_ai_response`), with what
    v2.x tells of the model call that made it (v1.7 tells nothing: every fact is False)."""

    agent_number: int
    responses_mode: bool  # the call's result is in Responses-API mode (v2.x's `LLMResult.mode`)
    function_calls: bool  # the model asked for tools through the API's function calls
    holds_tool_request: bool  # the text is a tool request (or a misformatted one)
    empty: bool
    chat: ChatFacts
    delegated: bool = False  # as UserMessageFacts'


def skip_reason_for_user_message(facts: UserMessageFacts, settings: Settings) -> str | None:
    """Why this user-side message is not the human's, or None when it should be captured."""
    reason = skip_reason_for_chat(facts.chat, settings)
    if reason:
        return reason
    if facts.empty:
        return "empty_message"  # nothing to remember, nothing to search for
    if facts.intervention:
        return None  # the human interrupted, whichever agent was running
    if (facts.agent_number != 0 or facts.delegated) and not facts.sent_to_chat:
        return "from_superior_agent"
    if facts.is_nudge:
        return "framework_nudge"
    if facts.is_placeholder:
        return "placeholder_turn"
    return None


def skip_reason_for_ai_message(facts: AiMessageFacts, settings: Settings) -> str | None:
    """Why this AI message is not agent 0's final plain-text answer, or None when it is.

    In Responses mode Agent Zero v2.x takes a reply without a tool request as the final answer. Any
    other AI message is not one: a tool call, an answer the human interrupted and the greeting
    (v2.x passes those without a model result), and every v1.7 reply, whose final answers arrive
    through the `response` tool instead (`skip_reason_for_tool_result`)."""
    reason = skip_reason_for_chat(facts.chat, settings)
    if reason:
        return reason
    if facts.agent_number != 0 or facts.delegated:
        return "subordinate_response"
    if not facts.responses_mode:
        return NOT_A_PLAIN_ANSWER
    if facts.function_calls or facts.holds_tool_request:
        return "tool_call"
    if facts.empty:
        return "empty_message"
    return None


def prefetches_recall(facts: UserMessageFacts, settings: Settings) -> bool:
    """Whether this message starts the coming turn's recall: the human's own turn to the chat's
    agent 0 (not an intervention into a running one, nor what they typed to a subordinate) in a chat
    recall serves. A chat the user left out of capture
    only (Remember.NO_CAPTURE) still does: its messages are its human's, just not kept."""
    if facts.intervention or facts.agent_number != 0 or facts.delegated:
        return False  # a turn of the chat's own agent 0 comes next, or none
    if skip_reason_for_recall(facts.chat, settings):
        return False
    if facts.chat.remember is Remember.NO_CAPTURE:
        facts = replace(facts, chat=replace(facts.chat, remember=Remember.YES))
    return skip_reason_for_user_message(facts, settings) is None


def skip_reason_for_tool_result(agent_number: int, tool_name: str, chat: ChatFacts,
                                settings: Settings, delegated: bool = False) -> str | None:
    """Only agent 0's `response` tool is a final answer to the human, when agent 0 works for no
    other agent (`delegated`: see UserMessageFacts)."""
    reason = skip_reason_for_chat(chat, settings)
    if reason:
        return reason
    if tool_name != "response":
        return "not_a_final_response"
    if agent_number != 0 or delegated:
        return "subordinate_response"
    return None
