"""Inject the Honcho memory pack before agent 0's first model call of a user turn.

Never raises: the turn goes on without memory.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoRecall(Extension):
    async def execute(self, loop_data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.recall import inject_recall

            await inject_recall(self.agent, loop_data)
        except Exception:  # the turn goes on without memory
            log.exception("honcho: recall skipped")
