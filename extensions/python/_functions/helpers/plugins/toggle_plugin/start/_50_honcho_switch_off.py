"""Agent Zero switches a plugin on or off: switched off for everyone, ours stops its threads now.

Here, at the start, because once the plugin is off Agent Zero runs none of its extensions. A sync
point of Agent Zero; it never raises (the toggle must work whatever happens to memory).
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoSwitchOff(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import before_toggle

            before_toggle(data)
        except Exception:
            log.exception("honcho: the plugin's threads not stopped on switch-off")
