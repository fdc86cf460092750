"""v2.x's `AgentContext.nudge()`: the nudge prompt goes to agent 0 as a system message of an empty
user message, not as the user's text."""

from agent import UserMessage
from helpers.extension import Extension


class V2xNudge(Extension):
    def execute(self, data=None, **kwargs):
        context = data["args"][0]
        context.kill_process()
        context.paused = False
        nudge = context.agent0.read_prompt("fw.msg_nudge.md")
        context.task = context.communicate(UserMessage("", system_message=[nudge]))
        data["result"] = context.task
