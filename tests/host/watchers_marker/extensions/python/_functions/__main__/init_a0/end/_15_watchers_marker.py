"""Right after Agent Zero's `_10_register_watchdogs` (and before any extension of the Honcho plugin
numbered after it): which watchers are registered, and whether the Honcho plugin's 1.x upgrade has
already written into its folder. Written as JSON to $WATCHERS_MARKER, outside every watched
folder."""

import json
import os

from helpers import files, watchdog
from helpers.extension import Extension

HONCHO = os.path.join("usr", "plugins", "honcho")


class WatchersMarker(Extension):
    def execute(self, **kwargs):
        folder = files.get_abs_path(HONCHO)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        marker = {
            "watchers": sorted(watchdog._registry._watch_ids_by_group),
            "record_existed": os.path.exists(os.path.join(folder, "config.1x.json")),
            "lock_existed": os.path.exists(os.path.join(folder, "config.json.lock")),
            "config_keys": sorted(config),
        }
        with open(os.environ["WATCHERS_MARKER"], "w", encoding="utf-8") as handle:
            json.dump(marker, handle)
