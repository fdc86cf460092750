"""Before a chat's first message starts its turn: start the chat whose start waited for it (a chat
a person just opened: a chat integration has written whose chat it is by now, and the origin hook
before this one has tagged an API chat).

A sync point of Agent Zero, on a request thread or an event loop: memory only (the chat's start
runs on a thread of its own); it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoChatStart(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge import host
            from usr.plugins.honcho.extensions.honcho_bridge.recall import start_chat_at_message

            context = host.call_argument(data, 0, "self")
            if context is not None:
                start_chat_at_message(context)
        except Exception:  # the message must reach the agent whatever happens here
            log.exception("honcho: chat not started at its first message")
