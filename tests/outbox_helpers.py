"""Helpers for outbox tests: a manual clock, event factories, and child processes on the same file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import hub_testkit  # noqa: F401 - puts the checkout on sys.path

from honcho_hub.outbox import NewEvent

DEST = "https://api.honcho.dev#agent-zero"


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def event(n: int, session: str = "chat-a", content: str | None = None, dest: str = DEST) -> NewEvent:
    return NewEvent(id=f"ev_{session}_{n}", destination=dest, workspace_id="agent-zero", session_id=session,
                    peer_id="user", role="user", content=content or f"message {n}", captured_at=1_700_000_000.0 + n)


def temp_outbox_path(test) -> str:
    folder = tempfile.TemporaryDirectory()
    test.addCleanup(folder.cleanup)
    return os.path.join(folder.name, "state", "outbox.sqlite3")


CHILD_ENQUEUE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from honcho_hub.outbox import Outbox, NewEvent
path, tag, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
box = Outbox(path, busy_timeout_s=5.0, max_rows=1_000_000)
for i in range(count):
    box.enqueue([NewEvent(f"ev_{tag}_{i}", "d", "w", f"chat-{tag}", "user", "user", f"{tag} {i}", float(i))])
box.close()
print("done")
"""

CHILD_HOLD_LOCK = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()  # hold the write lock until the parent says so
conn.execute("ROLLBACK")
print("released", flush=True)
"""


def run_child(script: str, *args: str) -> subprocess.Popen:
    """A child Python running `script`; its working folder is a temporary one, never the checkout."""
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())


def hold_write_lock(path: str) -> subprocess.Popen:
    """A real second process holding the outbox write lock until `release_lock` is called."""
    child = run_child(CHILD_HOLD_LOCK, path)
    assert child.stdout.readline().strip() == "locked"
    return child


def release_lock(child: subprocess.Popen) -> None:
    child.stdin.write("\n")
    child.stdin.flush()
    child.wait(timeout=30)
