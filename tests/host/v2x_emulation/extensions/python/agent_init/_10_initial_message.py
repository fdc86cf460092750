"""v2.x's extensions/python/agent_init/_10_initial_message.py, in place of v1.7's of that name.

A new or reset chat (agent 0, empty log) gets the placeholder user turn
(`fw.initial_user_message.md`, "Hello!") before the greeting, which comes with
`LLMResult.non_llm()`.
"""

import json

from agent import LoopData, UserMessage
from helpers.extension import Extension
from usr.plugins.v2x_emulation.v2x import LLMResult


class InitialMessage(Extension):
    def execute(self, **kwargs):
        agent = self.agent
        if not agent or agent.number != 0 or agent.context.log.logs:
            return
        text = agent.read_prompt("fw.initial_user_message.md").strip()
        agent.hist_add_user_message(UserMessage(message=text))
        initial_message = agent.read_prompt("fw.initial_message.md")
        agent.loop_data = LoopData(user_message=None)  # v1.7's hist_add_ai_response needs it
        msg = agent.hist_add_ai_response(initial_message, llm_result=LLMResult.non_llm())
        greeting = json.loads(initial_message).get("tool_args", {}).get("text", "")
        agent.context.log.log(type="response", content=greeting, finished=True,
                              update_progress="none", id=msg.id)
