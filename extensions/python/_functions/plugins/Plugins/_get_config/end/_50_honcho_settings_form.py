"""Settings page load: fill the form with every setting's saved value.

A project file holds only its own settings, so the form would show the others empty. Never raises:
on trouble the form gets what Agent Zero read.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoSettingsForm(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.settings_page import (
                form_values,
                is_ours,
            )

            request = is_ours(data)
            result = data.get("result") if request is not None else None
            if isinstance(result, dict) and result.get("ok"):
                result["data"] = form_values(request)
        except Exception:
            log.exception("honcho: settings form not completed")
