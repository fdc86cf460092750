"""The honcho_memory tool: reach into long-term memory on purpose. Thin: the core does the work."""

import logging

from helpers.tool import Response, Tool

log = logging.getLogger("honcho_hub.adapters")


class HonchoMemory(Tool):
    async def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.tool import run_tool

            text = await run_tool(self.agent, dict(self.args or {}))
        except Exception:  # never a trace into the agent's loop
            log.exception("honcho_memory failed")
            text = ("honcho_memory: an unexpected error occurred; nothing was changed."
                    " Try again later.")
        return Response(message=text, break_loop=False)
