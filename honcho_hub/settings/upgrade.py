"""The upgrade from the Plugin Hub's `honcho` 1.x: its config.json rewritten once under our names.

1.x (1.1.0 and 1.2.0) saves six settings (spec.V1_NAMES) in the same
`usr/plugins/honcho/config.json` and, with a project, in the project's
`.a0proj/plugins/honcho/config.json`. Those files are read
under our names before this ran (spec.with_current_names); this rewrites each once, so our settings
page and the command line see and save them as ours. What we cannot use (an unknown key, a value a
setting refuses, in a project a setting that is global here) is set aside with its value in
`config.1x.json` beside the file, and reported by name (status never shows a 1.x value).

Reads and writes files and waits on the config file's lock: never on Agent Zero's event loop.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigFileError, FileRefused, InvalidValue
from .files import (
    MAX_CONFIG_BYTES,
    config_write_lock,
    load_saved_names,
    read_regular_file,
    write_config_file,
    write_json_file,
)
from .spec import FIELDS_BY_NAME, PROJECT_GROUPS, V1_NAMES
from .values import coerce

log = logging.getLogger(__name__)

RECORD_NAME = "config.1x.json"  # beside the upgraded config.json
FROM = "honcho 1.x"
MAX_NAMES_SHOWN = 20  # status lists at most this many set-aside names, each cut to NAME_CHARS
NAME_CHARS = 64


@dataclass(frozen=True)
class Upgrade:
    """One config file upgraded: each 1.x setting moved (1.x name -> ours), each key set aside
    (key -> why)."""

    moved: dict[str, str] = field(default_factory=dict)
    set_aside: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """One line for the install hook's report and the log: names only."""
        return (f"upgraded from {FROM}: {len(self.moved)} moved, {len(self.set_aside)} set aside"
                + (f" ({', '.join(sorted(self.set_aside))}, kept in {RECORD_NAME})"
                   if self.set_aside else ""))


def upgrade_config(path: str, *, is_project: bool = False,
                   now: Callable[[], float] = time.time) -> Upgrade | None:
    """Upgrade the config file at `path` if it holds 1.x settings, under its lock (another process
    waits, then finds nothing left to do); None when there was nothing to upgrade: no file, an
    unusable one (left as it is: the readers ignore it with a warning), or none of 1.x's names.
    Raises ConfigFileError when the file or its record cannot be written.

    The file is read first without the lock: on every start but an upgrade's first, no lock file is
    created beside it. A file created in Agent Zero v1.7's watched plugin folder while it registers
    its file watchers at start deadlocks that start (docs/updating.md)."""
    if not _holds_1x_names(path):
        return None
    with config_write_lock(path):
        return upgrade_config_locked(path, is_project=is_project, now=now)


def _holds_1x_names(path: str) -> bool:
    try:
        return any(name in V1_NAMES for name in load_saved_names(path))
    except ConfigFileError:
        return False


def upgrade_config_locked(path: str, *, is_project: bool = False,
                          now: Callable[[], float] = time.time) -> Upgrade | None:
    """`upgrade_config` for a caller already holding the file's lock (config_write_lock)."""
    try:
        original = load_saved_names(path)
    except ConfigFileError:
        return None
    if not any(name in V1_NAMES for name in original):
        return None
    kept: dict[str, Any] = {}
    moved: dict[str, str] = {}
    aside: dict[str, Any] = {}
    why: dict[str, str] = {}
    for key, value in original.items():
        name = V1_NAMES.get(key, key)
        problem = _problem(name, value, is_project)
        if problem is not None:
            aside[key], why[key] = value, problem
            continue
        if key in V1_NAMES:
            if name in original:
                continue  # saved under our name too: ours wins, as when the file is read
            moved[key] = name
        kept[name] = value
    _append_record(os.path.join(os.path.dirname(path), RECORD_NAME), {
        "at": now(), "from": FROM, "file": os.path.basename(path), "moved": moved,
        "set_aside": aside, "why": why, "original": original})
    write_config_file(path, kept, is_project=is_project)
    upgrade = Upgrade(moved, why)
    log.warning("honcho: %s %s", os.path.basename(path), upgrade.text())
    return upgrade


def last_upgrade(folder: str) -> dict[str, Any] | None:
    """What status shows of the newest upgrade recorded in `folder`: when, the settings moved (our
    names), the keys set aside (names, never values) and the record's file name; None when there
    is none or the record is unusable."""
    try:
        record = json.loads(read_regular_file(os.path.join(folder, RECORD_NAME), MAX_CONFIG_BYTES))
        newest = record["upgrades"][-1]
        at, moved, aside = newest["at"], newest["moved"], newest["set_aside"]
    except (OSError, FileRefused, ValueError, LookupError, TypeError):
        return None
    if not (isinstance(at, int | float) and isinstance(moved, dict) and isinstance(aside, dict)):
        return None
    names = [name for key, name in V1_NAMES.items() if moved.get(key) == name]
    return {"at": float(at), "moved": names,
            "set_aside": [str(key)[:NAME_CHARS] for key in sorted(aside)][:MAX_NAMES_SHOWN],
            "set_aside_count": len(aside), "record": RECORD_NAME}


def _problem(name: str, value: Any, is_project: bool) -> str | None:
    """Why a setting cannot go into our file; None when it can."""
    spec = FIELDS_BY_NAME.get(name)
    if spec is None:
        return "not a setting of this plugin"
    if is_project and spec.group not in PROJECT_GROUPS:
        return f"{name} is global here (set it in the global settings), not per project"
    try:
        coerce(spec, value)
    except InvalidValue as exc:
        return f"{name}: {exc}"
    return None


def _append_record(path: str, upgrade: Mapping[str, Any]) -> None:
    """Add `upgrade` to the record at `path` (an unusable record is started afresh)."""
    try:
        upgrades = json.loads(read_regular_file(path, MAX_CONFIG_BYTES))["upgrades"]
        if not isinstance(upgrades, list):
            upgrades = []
    except (OSError, FileRefused, ValueError, LookupError, TypeError):
        upgrades = []
    write_json_file(path, {"upgrades": [*upgrades, dict(upgrade)]})
