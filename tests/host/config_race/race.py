"""What the settings-save race shares with the test that drives it.

The sidebar's "This is me" reads the plugin's settings, adds a sender to `sender_peers` and saves
them. A save from the settings page can land in between; the extension of this test plugin makes
it land there, right after that read (see tests/host/host_dont_remember.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

PLUGIN = "honcho"
READER = "this_is_me"  # the function of the plugin's bridge whose reads the race follows

# Called once, then dropped: with what the next read of the plugin's global settings made within
# READER returned.
AFTER_READ: list[Callable[[dict], None]] = []


def within_reader() -> bool:
    """Whether READER is on the calling thread's stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == READER:
            return True
        frame = frame.f_back
    return False
