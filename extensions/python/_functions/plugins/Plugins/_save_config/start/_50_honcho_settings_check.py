"""Settings page save: refuse values the plugin would ignore, before Agent Zero writes them.

The refusal names the setting and its bounds (Agent Zero's save API otherwise answers ok to
anything). Never raises.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoSettingsCheck(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.settings_page import (
                is_ours,
                save_refusal,
            )

            request = is_ours(data)
            refusal = save_refusal(request) if request is not None else None
            if refusal:
                data["result"] = {"ok": False, "error": refusal}
        except Exception:
            log.exception("honcho: settings not checked before saving")
