"""Test device, not v2.x: the human sends a message while the chat is busy, right after the model
gave the reply the chat's switch names. v1.7's loop then keeps that reply as an interrupted
partial answer (`handle_intervention(agent_response)`) and adds the human's intervention."""

from agent import UserMessage
from helpers.extension import Extension
from usr.plugins.v2x_emulation import v2x


class V2xInterrupt(Extension):
    def execute(self, response=None, **kwargs):
        texts = v2x.switch(self.agent, v2x.INTERRUPT) or {}
        if response in texts:
            self.agent.intervention = UserMessage(message=texts.pop(response))
