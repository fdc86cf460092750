"""Before Agent Zero registers its watchers: an upgrade of the Honcho plugin already under way
finishes first, so that what _15_ sees depends on when the upgrade started, not on thread timing."""

import threading

from helpers.extension import Extension

UPGRADE_THREAD = "honcho-hub-upgrade-1x"  # honcho_hub.runtime.in_background's name for it
SETTLE_S = 30.0


class WatchersMarkerSettle(Extension):
    def execute(self, **kwargs):
        for thread in threading.enumerate():
            if thread.name == UPGRADE_THREAD:
                thread.join(SETTLE_S)
