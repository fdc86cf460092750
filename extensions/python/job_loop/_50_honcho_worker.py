"""About every 60 s: bring the delivery worker back after a stop, a plugin reload or a switch-on
that ran no extension of ours.

Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoKeepWorker(Extension):
    def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import keep_worker

            keep_worker()
        except Exception:
            log.exception("honcho: delivery worker not restarted")
