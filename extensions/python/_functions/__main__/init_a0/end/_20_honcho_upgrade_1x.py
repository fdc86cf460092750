"""Agent Zero's web UI has started (the end of run_ui's `init_a0`), its file watchers registered by
`_10_register_watchdogs` just before: the upgrade from the Hub's honcho 1.x that the start's chats
and job loop left runs now, off this thread (process_hub.ui_start_ended).

Never raises: Agent Zero must start whatever happens to memory.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoUpgrade1x(Extension):
    def execute(self, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import ui_start_ended

            ui_start_ended()
        except Exception:
            log.exception("honcho: the upgrade from 1.x not started")
