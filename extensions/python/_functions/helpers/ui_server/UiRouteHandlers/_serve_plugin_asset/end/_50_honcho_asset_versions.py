"""Our web files as the browser gets them: versioned URLs of our own files, revalidation headers.

Only this plugin's files; others are served as Agent Zero serves them. Never raises: on trouble
the file goes out as Agent Zero served it.
"""

import logging

from helpers.extension import Extension

log = logging.getLogger("honcho_hub.adapters")


class HonchoAssetVersions(Extension):
    def execute(self, data=None, **kwargs):
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.assets import versioned_response

            versioned_response(data or {})
        except Exception:
            log.exception("honcho: a web file served without its versioned URLs")
