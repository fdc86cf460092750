"""About every 60 s: bring the delivery worker back after a stop or a plugin reload.

Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoKeepWorker(Extension):
    def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import ensure_worker

            ensure_worker()
        except Exception:
            log.exception("honcho: delivery worker not restarted")
