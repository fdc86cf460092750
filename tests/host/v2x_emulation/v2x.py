"""What the v2.x emulation shares: v2.x's LLMResult, and the switches a test sets on a chat.

Agent Zero v2.x passes every model reply to `Agent.hist_add_ai_response` with an `LLMResult`; v1.7's
method takes no such argument. The extensions of this test plugin make v1.7 do what v2.x does
(see tests/host/host_v2_turns.py for what each one does and assumes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Switches a test sets in a chat's context data (`_`: Agent Zero does not save them).
API_MODE = "_v2x_api_mode"  # "responses": the model answers through the Responses API
# How a plain answer ends the turn: "response_tool" (run as the `response` tool, as one v2.x
# version does) or "direct" (the loop ends with it; tool_execute_after never sees it).
PLAIN_ANSWER_WAY = "_v2x_plain_answer_way"
# {model reply: text}: after the model gave that reply, the human sends the text while the chat is
# busy, as AgentContext.communicate does for a message typed during a turn.
INTERRUPT = "_v2x_interrupt"
SET_ASIDE = "_v2x_llm_result"  # where the start extension keeps the llm_result for the end one


@dataclass
class LLMResult:
    """The fields of v2.x's `helpers.llm_result.LLMResult` the plugin reads."""

    response: str = ""
    reasoning: str = ""
    mode: str = ""  # "responses" in Responses-API mode; "" for a result no model made
    function_calls: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def non_llm(cls) -> LLMResult:
        """What v2.x passes for text no model wrote now: the greeting, an interrupted answer."""
        return cls()

    def function_calls_text(self) -> str:
        return json.dumps(self.function_calls[0]) if self.function_calls else ""


def tool_request(text: Any) -> dict[str, Any] | None:
    """The tool request v1.7's `process_tools` reads from a reply, None for plain text."""
    from helpers import extract_tools

    return extract_tools.json_parse_dirty(text) if isinstance(text, str) else None


def model_result(reply: str) -> LLMResult:
    """A model reply in Responses mode: a tool call arrives as a function call, not as text."""
    request = tool_request(reply)
    return LLMResult(response=reply, mode="responses",
                     function_calls=[request] if request is not None else [])


def switch(agent: Any, name: str) -> Any:
    return agent.context.data.get(name) if agent is not None else None
