"""Support for the host tests: the plugin inside a real Agent Zero v1.7, talking to a real Honcho.

Each `tests/host/host_*.py` file is one process with one Agent Zero (the harness imports Agent Zero
into the process, once). It runs under Agent Zero's own Python 3.12 (`$A0_PYTHON`) from
`../shared/real-agent-zero`, against the Honcho at `$HONCHO_REAL_URL` (`../shared/real-honcho`).
`tests/host/run` starts one process per file.

The plugin goes into the tree as a copy of this checkout's files (never `.git`, `.venv` or caches),
so Agent Zero's writes (`config.json`, `.toggle-*`) land in the copy and never in the working tree.
Each process uses its own Honcho workspace and its own outbox in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = "honcho"
REAL_AGENT_ZERO = os.environ.get("A0_SHARED", os.path.join(os.path.dirname(ROOT), "shared", "real-agent-zero"))
_SKIP = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.pyc", ".pytest_cache",
                               "config.json", ".toggle-*", "execute_record.json", "*.sqlite3*", "node_modules")


def required_env(name: str) -> str:
    """A variable the host suites cannot run without; a clear failure, never a skip."""
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} is not set: run the host tests through tests/host/run "
                           "(it sets up ../shared/real-agent-zero and needs HONCHO_REAL_URL)")
    return value


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        pause.wait(interval_s)


class HostWorld:
    """One Agent Zero tree with this plugin copied in, its environment, and a started host."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="honcho-host-")
        self.honcho_url = required_env("HONCHO_REAL_URL")
        self.workspace_id = "host-" + uuid.uuid4().hex[:12]
        self.outbox_path = os.path.join(self.tmp, "outbox.sqlite3")
        os.environ.update({"HONCHO_API_URL": self.honcho_url, "HONCHO_WORKSPACE_ID": self.workspace_id,
                           "HONCHO_OUTBOX_PATH": self.outbox_path, **(env or {})})
        self.tree = new_tree(self.tmp)
        self.plugin_dir = os.path.join(self.tree, "usr", "plugins", PLUGIN)
        sys.path.insert(0, required_env("A0_HARNESS"))
        import a0host

        self.host = a0host.start(self.tree)

    def honcho(self, workspace_id: str | None = None):
        """A client of the real Honcho, outside the plugin, to check what arrived."""
        from honcho import Honcho

        return Honcho(base_url=self.honcho_url, workspace_id=workspace_id or self.workspace_id,
                      api_key=os.environ.get("HONCHO_REAL_ADMIN_KEY") or None, max_retries=0, timeout=15)

    def session_messages(self, session_id: str) -> list[Any]:
        """Messages the real Honcho holds for a session, oldest first."""
        return list(self.honcho().session(session_id).messages())


def staged_plugin(tmp: str) -> str:
    """A copy of this checkout's plugin files (uncommitted edits included) in `tmp`."""
    target = os.path.join(tmp, "plugin-src")
    shutil.copytree(ROOT, target, ignore=_SKIP)
    return target


def new_tree(tmp: str) -> str:
    """A fresh Agent Zero tree (../shared/real-agent-zero/new-tree --copy) holding the staged plugin."""
    command = [os.path.join(REAL_AGENT_ZERO, "new-tree"), "--copy", staged_plugin(tmp)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"new-tree failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]
