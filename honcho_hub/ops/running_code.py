"""Whether the process runs the plugin's code that is on disk.

Agent Zero's update pulls new files but does not re-import the plugin, and its file watcher
re-imports it only for some changes (docs/updating.md): until Agent Zero restarts, the code loaded
before the pull runs. A Python file of the plugin changed after this module generation was imported
means the process runs other code than the folder holds. Reading the folder is I/O: off the event
loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import LOADED_AT, __version__

PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Folders whose files no Agent Zero process imports.
NOT_RUN = frozenset({".git", "__pycache__", "tests", "bench", "docs", "webui", "prompts", ".venv",
                     "venv", "node_modules"})
VERSION_KEY = "version:"


@dataclass(frozen=True)
class RunningCode:
    """The version running, the version on disk (None when plugin.yaml says none), and how many of
    the plugin's Python files changed on disk after the running code was imported."""

    running_version: str
    disk_version: str | None
    changed_files: int

    @property
    def restart_needed(self) -> bool:
        return self.changed_files > 0


def read_running_code(plugin_dir: str = PLUGIN_DIR, loaded_at: float = LOADED_AT,
                      running_version: str = __version__) -> RunningCode:
    """Compare the plugin's folder with the code this process imported at `loaded_at`; never
    raises (an unreadable file counts as unchanged)."""
    return RunningCode(running_version, _disk_version(plugin_dir),
                       _changed_since(plugin_dir, loaded_at))


def restart_sentence(code: RunningCode) -> str | None:
    """What to tell the user when the code on disk is not the code running; None when it is."""
    if not code.restart_needed:
        return None
    if code.disk_version and code.disk_version != code.running_version:
        return (f"Updated to {code.disk_version} on disk; restart Agent Zero to run it"
                f" ({code.running_version} is running)")
    return (f"The plugin's code changed on disk; restart Agent Zero to run it"
            f" ({code.running_version} is running)")


def _changed_since(plugin_dir: str, loaded_at: float) -> int:
    changed = 0
    for folder, subfolders, names in os.walk(plugin_dir):
        subfolders[:] = [d for d in subfolders if d not in NOT_RUN]
        for name in names:
            if not name.endswith(".py"):
                continue
            try:
                if os.stat(os.path.join(folder, name)).st_mtime > loaded_at:
                    changed += 1
            except OSError:
                continue
    return changed


def _disk_version(plugin_dir: str) -> str | None:
    """plugin.yaml's `version:` (a plain top-level scalar: no YAML parser needed)."""
    try:
        with open(os.path.join(plugin_dir, "plugin.yaml"), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(VERSION_KEY):
                    return line[len(VERSION_KEY):].strip().strip("'\"") or None
    except OSError:
        return None
    return None
