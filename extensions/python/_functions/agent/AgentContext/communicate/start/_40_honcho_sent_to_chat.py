"""Mark a message sent to a chat (`AgentContext.communicate`), so that capture can tell what the
human typed into a subordinate's child chat (Agent Zero v2.x) from a superior's delegation.

A sync point of Agent Zero, on a request thread or an event loop (whichever calls `communicate`):
in memory only; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoSentToChat(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import mark_sent

            mark_sent(data or {})
        except Exception:  # sending a message must never fail because of memory
            log.exception("honcho: message not marked as sent to the chat")
