"""After `AgentContext.nudge`, sent or failed: what the chat sends next is no nudge.

A sync point of Agent Zero, on a request thread or an event loop: memory only; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoNudgeEnd(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import end_nudge

            end_nudge(data or {})
        except Exception:  # the nudge's caller must get its task whatever happens here
            log.exception("honcho: nudge mark not cleared")
