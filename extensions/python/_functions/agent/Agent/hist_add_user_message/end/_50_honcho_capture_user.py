"""Capture what the human typed, after Agent Zero added it to history.

A sync point of Agent Zero; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoCaptureUser(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import capture_user_message

            capture_user_message(self.agent, data or {})
        except Exception:  # the agent's turn must never break because of memory
            log.exception("honcho: user message not captured")
