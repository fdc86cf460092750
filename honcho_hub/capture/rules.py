"""Which messages are the human's and the primary agent's final answers.

Pure rules on plain facts the adapters read off Agent Zero's objects, so they are tested without a
host: a message is captured only when a person typed it, or when it is agent 0's final response, in
a chat capture takes (chats/rules.py: whose chat it is).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chats.rules import ChatFacts, skip_reason_for_chat
from ..settings.config import Settings


@dataclass(frozen=True)
class UserMessageFacts:
    agent_number: int
    intervention: bool  # sent while an agent of the chat was running: always the human's
    is_nudge: bool  # the framework's own "continue" prompt
    chat: ChatFacts


def skip_reason_for_user_message(facts: UserMessageFacts, settings: Settings) -> str | None:
    """Why this user-side message is not the human's, or None when it should be captured."""
    reason = skip_reason_for_chat(facts.chat, settings)
    if reason:
        return reason
    if facts.intervention:
        return None  # the human interrupted, whichever agent was running
    if facts.agent_number != 0:
        return "from_superior_agent"
    if facts.is_nudge:
        return "framework_nudge"
    return None


def skip_reason_for_tool_result(agent_number: int, tool_name: str, chat: ChatFacts,
                                settings: Settings) -> str | None:
    """Only agent 0's `response` tool is a final answer to the human."""
    reason = skip_reason_for_chat(chat, settings)
    if reason:
        return reason
    if tool_name != "response":
        return "not_a_final_response"
    if agent_number != 0:
        return "subordinate_response"
    return None
