"""When a chat's primary agent is created: start the worker, queue the scope registration.

Never raises: the agent starts even if memory cannot.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoStartWorker(Extension):
    def execute(self, **kwargs):
        try:
            if getattr(self.agent, "number", None) == 0:
                from usr.plugins.honcho.extensions.honcho_bridge.process_hub import ensure_worker
                from usr.plugins.honcho.extensions.honcho_bridge.recall import register_chat

                ensure_worker()
                register_chat(self.agent)
        except Exception:  # the agent must start even if memory cannot
            log.exception("honcho: delivery worker not started")
