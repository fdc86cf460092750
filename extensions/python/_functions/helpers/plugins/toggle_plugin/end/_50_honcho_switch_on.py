"""Agent Zero switched a plugin on or off: switched on for everyone, ours starts its threads now.

Not left to the next message or job-loop tick. A sync point of Agent Zero; it never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoSwitchOn(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import after_toggle

            after_toggle(data)
        except Exception:
            log.exception("honcho: the plugin's threads not started on switch-on")
