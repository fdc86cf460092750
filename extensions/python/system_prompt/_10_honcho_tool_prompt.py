"""Offer the honcho_memory tool in the system prompt, or not (recall_mode context, Agent Zero's tool
policy hiding it).

Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoToolPrompt(Extension):
    async def execute(self, system_prompt=None, loop_data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.tool import (
                offer_tool_in_prompt,
                policy_allows_tool,
            )

            offer_tool_in_prompt(self.agent, await policy_allows_tool(self.agent))
        except Exception:  # the prompt is built without our say: the tool's section stays
            log.exception("honcho: tool prompt settings skipped")
