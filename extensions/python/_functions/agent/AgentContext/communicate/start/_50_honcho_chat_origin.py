"""Before a message starts a chat's turn: tag the chat with the request that sent it.

Agent Zero's external API (`api_message`) marks nothing on the chats it makes; a request-less
message (an integration's poll, the scheduler) leaves the chat as it is. A sync point of Agent Zero,
on a request thread or an event loop (whichever calls `communicate`): memory only; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoChatOrigin(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from flask import has_request_context, request

            if has_request_context():
                from usr.plugins.honcho.extensions.honcho_bridge import host

                context = host.call_argument(data, 0, "self")
                if context is not None:
                    host.note_chat_origin(context, request.path)
        except Exception:  # the message must reach the agent whatever happens here
            log.exception("honcho: chat origin not noted")
