"""Capture agent 0's final `response`, already masked by the core's _10_mask_secrets.

Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoCaptureResponse(Extension):
    def execute(self, response=None, tool_name="", **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import capture_final_response

            capture_final_response(self.agent, tool_name, response)
        except Exception:  # the agent's turn must never break because of memory
            log.exception("honcho: final response not captured")
