"""Capture agent 0's final plain-text answer (Agent Zero v2.x, Responses mode), after Agent Zero
added it to history.

Every AI message passes here (in v1.7 each model reply, the greeting, an interrupted answer): the
bridge keeps only the plain answer. A sync point of Agent Zero; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoCaptureAnswer(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import capture_plain_answer

            capture_plain_answer(self.agent, data or {})
        except Exception:  # the agent's turn must never break because of memory
            log.exception("honcho: plain answer not captured")
