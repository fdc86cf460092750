"""The turn's prompt is built: the plugin's background passes a typed message held (the capture
writer's, the delivery worker's: honcho_hub/prompt_window.py) may run while the model answers.

Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoPromptBuilt(Extension):
    def execute(self, loop_data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.process_hub import model_called

            model_called()
        except Exception:  # the hold ends by itself (PromptWindow.MAX_HOLD_S)
            log.exception("honcho: the prompt window was not closed")
