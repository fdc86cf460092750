"""Helpers for outbox tests: a manual clock, event factories, and child processes on the same
file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest
from collections.abc import Callable, Iterator
from typing import TypeVar
from unittest import mock

import hub_testkit  # noqa: F401 - puts the checkout on sys.path

from honcho_hub.storage.db import MIGRATIONS, Database
from honcho_hub.storage.outbox import EnqueueResult, LeasedEvent, NewEvent, Outbox, Settlement
from honcho_hub.storage.processes import COLUMNS

DEST = "https://api.honcho.dev#agent-zero"
Opened = TypeVar("Opened", Outbox, Database)


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def event(n: int, session: str = "chat-a", content: str | None = None,
          dest: str = DEST) -> NewEvent:
    return NewEvent(id=f"ev_{session}_{n}", destination=dest, workspace_id="agent-zero",
                    session_id=session, peer_id="user", role="user",
                    content=content or f"message {n}", captured_at=1_700_000_000.0 + n)


def enqueue(box: Outbox, events: list[NewEvent]) -> EnqueueResult:
    """Store one message's events, as capture stores each message (one batch of
    `enqueue_batches`)."""
    return box.enqueue_batches([events])[0]


def lease(box: Outbox, owner: str, batch_size: int, lease_s: float = 60.0,
          destination: str | None = None) -> list[LeasedEvent]:
    """The batch `owner` leases next, as the worker leases it: one settle_and_lease with nothing to
    settle."""
    batches = box.settle_and_lease(Settlement(), owner, 1, batch_size, lease_s, destination)
    return batches[0] if batches else []


def settle(box: Outbox, owner: str, settlement: Settlement) -> None:
    """Record what `owner`'s sends came to, as the worker does, leasing nothing new (it also returns
    expired leases to pending, as every settlement of the worker does)."""
    box.settle_and_lease(settlement, owner, 0, 1, 60.0)


def write_journal(service, tries: int = 50) -> bool:
    """Move what the capture journal holds into the outbox on this thread, as the writer's passes
    do; True once it is empty. A try that meets the writer's own pass, or the outbox locked (a
    worker thread creating it), waits for that lock, then leaves what it could not write to the
    next try."""
    for _ in range(tries):
        service.write_pending()
        if service.journal is None or len(service.journal) == 0:
            return True
    return False


def stub_host_events(test, host) -> list[tuple]:
    """(session, peer, role, content) of every event the plugin in a stub Agent Zero (hub_testkit)
    queued, in capture order, once its capture journal is written (the writer thread may not have
    run yet)."""
    from usr.plugins.honcho.extensions.honcho_bridge.process_hub import global_settings, hub

    test.assertTrue(write_journal(hub().capture(global_settings())))
    path = host.config["outbox_path"]
    if not os.path.exists(path):
        return []
    # another thread may be creating it right now: read it once its schema is there
    Outbox(path).close()
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT session_id, peer_id, role, content FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()


def temp_outbox_path(test) -> str:
    folder = tempfile.TemporaryDirectory()
    test.addCleanup(folder.cleanup)
    return os.path.join(folder.name, "state", "outbox.sqlite3")


def on_disk(path: str) -> tuple[dict[str, int], dict[str, bytes]]:
    """Size and bytes of the outbox's main file and of its WAL (absent counts as empty). Read while
    the outbox is open, as anyone could; the test makes no further write after it."""
    sizes, texts = {}, {}
    for suffix in ("", "-wal"):
        try:
            with open(path + suffix, "rb") as handle:
                texts[suffix] = handle.read()
        except FileNotFoundError:
            texts[suffix] = b""
        sizes[suffix] = len(texts[suffix])
    return sizes, texts


def read_outbox(path: str, sql: str, params: tuple = ()) -> list[tuple]:
    """The rows `sql` reads from the outbox FILE through a connection of the test's own: what is on
    disk (committed rows, the header's pragmas such as user_version), as any other reader of the
    file sees it. Never creates the file."""
    conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def schema_version(path: str) -> int:
    """The schema version the outbox file's header holds."""
    return read_outbox(path, "PRAGMA user_version")[0][0]


@contextlib.contextmanager
def connections_to(path: str) -> Iterator[list[sqlite3.Connection]]:
    """The SQLite connections this process opens to `path` inside the block, caught where the
    standard library makes them (sqlite3.connect), as an httpx.MockTransport catches HTTP requests.

    For what lives in a connection and not in the file: its settings (synchronous, busy_timeout,
    secure_delete, journal_size_limit) and the statements it runs (`set_trace_callback`)."""
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def catching(database, *args, **kwargs):
        conn = connect(database, *args, **kwargs)
        if database == path:
            opened.append(conn)
        return conn

    with mock.patch.object(sqlite3, "connect", catching):
        yield opened


def open_with_connection(path: str,
                         open_outbox: Callable[[], Opened]) -> tuple[Opened, sqlite3.Connection]:
    """An Outbox (or Database) `open_outbox` opens on `path`, and the connection to the file it
    keeps (its last one)."""
    with connections_to(path) as opened:
        box = open_outbox()
    return box, opened[-1]


def put_row(path: str, table: str, values: dict) -> None:
    """Write one row straight into the outbox's `table`, as another program, or a process whose
    clock is wrong, could: nothing of the plugin checks it on the way in."""
    conn = sqlite3.connect(path)
    try:
        marks = ", ".join("?" * len(values))
        conn.execute(f"INSERT INTO {table} ({', '.join(values)}) VALUES ({marks})",
                     tuple(values.values()))
        conn.commit()
    finally:
        conn.close()


def circuit_row(destination: str, now: float, **changed) -> dict:
    """A `shared_circuits` row as a process of the plugin writes it, opened at `now`, with `changed`
    columns."""
    return {"destination": destination, "code": "unreachable", "open_until": now + 60,
            "failures": 2, "opened_at": now, **changed}


def process_row(owner: str, pid: int, beat_at: float, **fields) -> dict:
    """A `worker_processes` row (every column) as a worker writes it, beating at `beat_at`, with
    `fields`."""
    values = dict.fromkeys(COLUMNS)
    values.update(owner=owner, pid=pid, host="box", started_at=beat_at - 100, beat_at=beat_at,
                  beat_every_s=5.0, state="idle", sent=0, reconciled=0, failed=0, dead=0)
    values.update(fields)
    return values


def build_legacy_outbox(conn: sqlite3.Connection, version: int,
                        rows: dict[str, tuple[str, str | None]]) -> None:
    """The schema steps before `version` as a plugin from before the application id stamp ran them
    (application_id stays 0), plus `rows`: event id -> (state, error code)."""
    for step in MIGRATIONS[:version]:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {int(version)}")
    for event_id, (state, code) in rows.items():
        conn.execute("INSERT INTO events (id, destination, workspace_id, session_id, peer_id, role,"
                     " content, captured_at, next_attempt_at, updated_at, state, error_code)"
                     " VALUES (?, 'd', 'w', 's', 'p', 'user', 'c', 0, 0, 0, ?, ?)",
                     (event_id, state, code))


def legacy_outbox(path: str, version: int, rows: dict[str, tuple[str, str | None]]) -> None:
    """An outbox file as the plugin wrote it before the stamp: WAL mode, then its schema steps."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    build_legacy_outbox(conn, version, rows)
    conn.close()


# A plugin from before the stamp, killed after its first migration: everything but the WAL switch
# is still only in the -wal file (nothing checkpointed it), so the main file's header says
# user_version 0.
CHILD_LEGACY_KILLED = r"""
import os, sqlite3, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
from outbox_helpers import build_legacy_outbox
conn = sqlite3.connect(sys.argv[2], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
build_legacy_outbox(conn, 1, {"queued-before-the-kill": ("pending", None)})
os._exit(0)  # no close: no checkpoint
"""

CHILD_ENQUEUE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from honcho_hub.storage.outbox import Outbox, NewEvent
path, tag, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
box = Outbox(path, busy_timeout_s=5.0, max_rows=1_000_000)
for i in range(count):
    box.enqueue_batches([[NewEvent(f"ev_{tag}_{i}", "d", "w", f"chat-{tag}", "user", "user",
                                   f"{tag} {i}", float(i))]])
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
    """A child Python running `script`; its working folder is a temporary one, never the
    checkout."""
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tempfile.gettempdir())


def hold_write_lock(path: str) -> subprocess.Popen:
    """A real second process holding the outbox write lock until `release_lock` is called."""
    child = run_child(CHILD_HOLD_LOCK, path)
    assert child.stdout.readline().strip() == "locked"
    return child


def release_lock(child: subprocess.Popen) -> None:
    child.communicate("\n", timeout=30)  # and its pipes closed


class OutboxTestCase(unittest.TestCase):
    """An outbox file of its own in a temporary folder (`self.path`), opened on a manual clock."""

    def open(self, path=None, **kw):
        self.clock = getattr(self, "clock", None) or ManualClock()
        box = Outbox(path or self.path, clock=self.clock, **kw)
        self.addCleanup(box.close)
        return box

    def setUp(self):
        self.path = temp_outbox_path(self)
