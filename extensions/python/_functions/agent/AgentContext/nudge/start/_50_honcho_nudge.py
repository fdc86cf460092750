"""Before `AgentContext.nudge` sends its message: mark what it sends as Agent Zero's nudge, so
capture and recall tell it from a typed message without reading the nudge's prompt.

A sync point of Agent Zero, on a request thread or an event loop: memory only; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoNudgeStart(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import start_nudge

            start_nudge(data or {})
        except Exception:  # the nudge must go out whatever happens here
            log.exception("honcho: nudge not marked")
