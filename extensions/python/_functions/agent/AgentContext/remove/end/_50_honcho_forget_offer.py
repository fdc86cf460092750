"""After Agent Zero removed a chat the user deleted, offer to forget it in Honcho.

Only the chat-delete action counts, not an expiry; the sidebar shows the offer. A sync point of
Agent Zero; it deletes nothing and never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoForgetOffer(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import (
                offer_forget_after_chat_delete,
            )

            offer_forget_after_chat_delete(data or {})
        except Exception:  # deleting the chat must never fail because of memory
            log.exception("honcho: no forget offer for the deleted chat")
