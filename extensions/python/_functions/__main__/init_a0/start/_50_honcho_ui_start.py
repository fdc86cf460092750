"""Agent Zero's web UI starts (run_ui's `init_a0`): it registers its file watchers only at the end,
so until then the upgrade from the Hub's honcho 1.x writes nothing (process_hub.ui_start_began).

Never raises: Agent Zero must start whatever happens to memory.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoUiStart(Extension):
    def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import ui_start_began

            ui_start_began()
        except Exception:
            log.exception("honcho: the web UI's start not noted")
