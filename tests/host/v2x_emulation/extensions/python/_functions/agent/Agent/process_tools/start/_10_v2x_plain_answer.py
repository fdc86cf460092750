"""v2.x's `process_llm_result_tools` in Responses mode: a non-empty reply that holds no tool
request is the final answer. Run as the `response` tool with `{"text": reply}`, or (the chat's
switch says "direct") the loop ends with it and no tool runs."""

import json

from helpers.extension import Extension
from usr.plugins.v2x_emulation import v2x


class V2xPlainAnswer(Extension):
    def execute(self, data=None, **kwargs):
        agent, message = data["args"][0], data["args"][1]
        if (v2x.switch(agent, v2x.API_MODE) != "responses" or not str(message).strip()
                or v2x.tool_request(message) is not None):
            return
        if v2x.switch(agent, v2x.PLAIN_ANSWER_WAY) == "direct":
            data["result"] = message
        else:
            data["args"] = (agent, json.dumps({"tool_name": "response",
                                               "tool_args": {"text": message}}))
