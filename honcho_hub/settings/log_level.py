"""The plugin's log level follows the `debug` setting (`HONCHO_DEBUG`): only our loggers.

Applied wherever settings are (re)loaded; a call that changes nothing costs one comparison. While
debug is on and nothing else would print our records, a stderr handler of ours does.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable

from ..runtime import process_state
from .config import Settings

# The core package's name (this module is in its `settings` subpackage); one name outside Agent
# Zero.
LOGGER_NAMES = tuple(dict.fromkeys((__package__.rpartition(".")[0], "honcho_hub")))
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_lock = threading.Lock()
_applied: bool | None = None  # what this module generation applied last (None: nothing yet)


def follow(settings: Settings) -> None:
    """Apply `settings.debug` to the plugin's loggers; cheap when it has not changed."""
    global _applied
    debug = bool(settings.debug)
    if debug is _applied:
        return
    with _lock:
        saved = _saved_levels()
        for name in LOGGER_NAMES:
            logger = logging.getLogger(name)
            if debug and name not in saved:
                handler = None if logger.hasHandlers() else _stderr_handler()
                saved[name] = (logger.level, handler)
                if handler is not None:
                    logger.addHandler(handler)
            if debug:
                logger.setLevel(logging.DEBUG)
            elif name in saved:
                level, handler = saved.pop(name)
                logger.setLevel(level)
                if handler is not None:
                    logger.removeHandler(handler)
        _applied = debug


def following(provider: Callable[[], Settings]) -> Callable[[], Settings]:
    """`provider` (of settings) that also applies the debug setting of whatever it returns."""
    def provide() -> Settings:
        settings = provider()
        follow(settings)
        return settings
    return provide


def _saved_levels() -> dict[str, tuple[int, logging.Handler | None]]:
    # The levels to restore live with the process, not this module: after Agent Zero re-imports the
    # plugin, the new generation must restore what the loggers had before debug, not its own DEBUG.
    return process_state().debug_saved_levels


def _stderr_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    return handler
