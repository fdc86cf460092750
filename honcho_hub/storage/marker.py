"""The marker beside the outbox: a file whose every move tells each process sharing the outbox to
drop what it holds in memory (recall's cache and base packs, the chats' generations). A cache clear
and a chat's forget move it; each process looks at it before it uses what it holds (`MarkerWatch`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from ..errors import OutboxError
from ..settings.config import Settings
from .outbox import Outbox

log = logging.getLogger(__name__)

# What a marker not moved means, for a cache clear and a chat's forget alike.
NOT_TOLD = ("the other processes sharing the outbox were not told: they keep what they hold in"
            " memory (recall's cache, a chat's session) until the marker next moves or they load it"
            " again")


def marker_path(settings: Settings) -> str:
    """Beside the outbox file, named after it."""
    return settings.outbox_path + ".recall-epoch"


def read_marker(settings: Settings) -> int:
    """When the marker last moved (ns); 0 when there is none."""
    try:
        return os.stat(marker_path(settings)).st_mtime_ns
    except OSError:
        return 0


def move_marker(settings: Settings) -> bool:
    """Touch the marker, never through a symbolic link; True when the other processes were told.
    Only beside an outbox of ours: the setting may name anyone's folder or file. Never raises."""
    if not os.path.isfile(settings.outbox_path):
        return False  # no outbox: no other process shares a cache through it
    try:
        # Opening is how the plugin judges a file (by its header, before writing anything):
        # another program's database, or a file no process of ours can use, is refused untouched —
        # and then nothing is written beside it either. No process of ours shares a cache through
        # such a file.
        Outbox.for_settings(settings).close()
    except OutboxError as exc:
        log.warning("honcho: the outbox could not be opened (%s) to move the marker beside it; %s",
                    exc.code, NOT_TOLD)
        return False
    path = marker_path(settings)
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(handle, str(time.time_ns()).encode())
        finally:
            os.close(handle)
        os.utime(path, ns=(time.time_ns(), time.time_ns()), follow_symlinks=False)
    except OSError:
        log.warning("honcho: the marker beside the outbox could not be written; %s", NOT_TOLD)
        return False
    return True


class MarkerWatch:
    """What this process last saw of the marker, shared by the parts that follow it (recall, the
    chats' sessions): whichever of them sees it move first tells every listener, so each drops what
    it holds once. Where no file may be read (Agent Zero's event loop), `seen` is the newest look,
    not a read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: int | None = None
        self._listeners: list[Callable[[], None]] = []

    @property
    def seen(self) -> int | None:
        """The marker at the newest look; None before the first."""
        with self._lock:
            return self._seen

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener()` whenever a look finds the marker moved (not at the first look)."""
        with self._lock:
            self._listeners.append(listener)

    def unlisten(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def follow(self, settings: Settings) -> None:
        """Read the marker (a `stat`); when it moved since the newest look, tell the listeners."""
        value = read_marker(settings)
        with self._lock:
            moved = self._seen is not None and value != self._seen
            self._seen = value
            listeners = list(self._listeners) if moved else []
        for listener in listeners:
            listener()
