"""Test device, not v2.x: the human types into a subordinate's child chat while it runs, right after
its model gave a reply holding a chosen text (`children.INTERRUPTS`). The message goes through
`AgentContext.communicate` of the child chat, as the web UI sends it."""

from agent import UserMessage
from helpers.extension import Extension
from usr.plugins.v2x_children import children


class V2xChildInterrupt(Extension):
    def execute(self, response=None, **kwargs):
        context = getattr(self.agent, "context", None)
        if context is None or context.get_output_data(children.PARENT_CONTEXT_ID) is None:
            return
        for marker in list(children.INTERRUPTS):
            if marker in str(response):
                context.communicate(UserMessage(message=children.INTERRUPTS.pop(marker),
                                                attachments=[]))
