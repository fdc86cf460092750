"""When an agent is built: mark it started; for a chat's agent 0, start the worker and the chat
(its scope registration and warm-up, now or at its first message).

Never raises: the agent starts even if memory cannot.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoStartWorker(Extension):
    def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.capture import mark_started

            # First: a user message agent 0 gets before this is Agent Zero's, not typed.
            mark_started(self.agent)
            if getattr(self.agent, "number", None) == 0:
                from usr.plugins.honcho.extensions.honcho_bridge.process_hub import ensure_worker
                from usr.plugins.honcho.extensions.honcho_bridge.recall import start_chat

                ensure_worker()
                start_chat(self.agent)
        except Exception:  # the agent must start even if memory cannot
            log.exception("honcho: delivery worker not started")
