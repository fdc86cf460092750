"""The outbox file on disk (storage/db.py): whose it is, what pruned rows leave behind, who may read
it."""

import contextlib
import os
import sqlite3
import stat
import struct
import tempfile
import unittest
from collections.abc import Iterator
from unittest import mock

from hub_testkit import ROOT
from outbox_helpers import (
    CHILD_ENQUEUE,
    CHILD_LEGACY_KILLED,
    ManualClock,
    enqueue,
    event,
    lease,
    legacy_outbox,
    on_disk,
    open_with_connection,
    run_child,
    settle,
    temp_outbox_path,
)

from honcho_hub.errors import OutboxCorrupt, OutboxForeign, OutboxUnavailable
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.db import APPLICATION_ID, JOURNAL_SIZE_LIMIT, SCHEMA_VERSION
from honcho_hub.storage.marker import marker_path
from honcho_hub.storage.outbox import Outbox, Settlement

MB = 1024 * 1024
OTHER_APP_ID = 0x47504B47  # GeoPackage's id: a well-known SQLite application


def header(path: str) -> dict:
    """The header fields these tests look at, read from the file's first 100 bytes."""
    with open(path, "rb") as handle:
        raw = handle.read(100)
    return {"journal": (raw[18], raw[19]), "user_version": struct.unpack(">i", raw[60:64])[0],
            "application_id": struct.unpack(">i", raw[68:72])[0]}


def snapshot(folder: str) -> dict:
    """Every entry of a folder with its bytes and modification time: "untouched" means this is
    equal."""
    entries = {}
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        with open(full, "rb") as handle:
            entries[name] = (handle.read(), os.stat(full).st_mtime_ns)
    return entries


def auto_vacuum(path: str) -> int:
    """The file's auto_vacuum mode, read by a fresh connection (an older one may report a stale
    value)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    finally:
        conn.close()


def mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


class FileTestCase(unittest.TestCase):
    def setUp(self):
        self.path = temp_outbox_path(self)
        self.folder = os.path.dirname(self.path)
        self.clock = ManualClock()

    def open(self, path=None, **kw):
        box = Outbox(path or self.path, clock=self.clock, **kw)
        self.addCleanup(box.close)
        return box

    def sqlite(self, path=None):
        conn = sqlite3.connect(path or self.path, isolation_level=None)
        self.addCleanup(conn.close)
        return conn


def other_program(journal: str):
    """Another program's database (user_version 0, its own table, a row in it) in that journal
    mode."""
    def make(path: str) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
        conn.close()  # the last connection: in WAL mode checkpointed, -wal and -shm removed
    return make


def begun_by_another_connection_of_ours(path: str) -> None:
    """The file as our first connection leaves it after its first write (auto_vacuum, a
    transaction of its own: SQLite ignores it inside one) and before its second (the stamp): what
    a connection opened by another thread or process at that moment sees, and what a kill at that
    moment leaves for good."""
    open(path, "wb").close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.close()


def another_programs_empty_database(path: str) -> None:
    """Page 1 written with nothing in it (an application id of 0, no table, default vacuum)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA user_version = 0")
    conn.execute("VACUUM")
    conn.close()


def other_application_id(path: str) -> None:
    """Our own schema, even our user_version, under another program's application id."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {OTHER_APP_ID}")
    conn.close()
    legacy_outbox(path, 2, {"theirs": ("pending", None)})


def other_events_table(journal: str):
    """user_version 1 and a table named `events` that is not ours."""
    def make(path: str) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("CREATE TABLE events (kind TEXT, at REAL)")
        conn.execute("PRAGMA user_version = 1")
        conn.close()
    return make


def write(data: bytes):
    def make(path: str) -> None:
        with open(path, "wb") as handle:
            handle.write(data)
    return make


def empty_with_leftover_wal(path: str) -> None:
    open(path, "wb").close()
    with open(path + "-wal", "wb") as handle:
        handle.write(b"\x37\x7f\x06\x82" + b"\x00" * 28)


class ForeignFileTest(FileTestCase):
    def test_files_that_are_not_our_outbox_are_refused_untouched(self):
        # Another program's database is foreign; a file SQLite cannot read is corrupt (it may be
        # ours, damaged).
        cases = {"another program's database": (other_program("DELETE"), OutboxForeign),
                 "another program's database in WAL mode": (other_program("WAL"), OutboxForeign),
                 "another application id over our schema": (other_application_id, OutboxForeign),
                 "an unrelated events table at user_version 1":
                     (other_events_table("DELETE"), OutboxForeign),
                 "an unrelated events table at user_version 1 in WAL mode":
                     (other_events_table("WAL"), OutboxForeign),
                 "an empty file beside a leftover WAL": (empty_with_leftover_wal, OutboxForeign),
                 "another program's empty database":
                     (another_programs_empty_database, OutboxForeign),
                 "not SQLite at all": (write(os.urandom(8192)), OutboxCorrupt),
                 "the SQLite magic in a file shorter than a header":
                     (write(b"SQLite format 3\x00" + b"\x01" * 40), OutboxCorrupt)}
        for name, (make, kind) in cases.items():
            with self.subTest(name):
                path = temp_outbox_path(self)
                os.makedirs(os.path.dirname(path))
                make(path)
                before = snapshot(os.path.dirname(path))
                with self.assertRaises(OutboxCorrupt) as caught:
                    self.open(path)
                self.assertEqual(caught.exception.code, kind.code)
                self.assertNotIn(path, str(caught.exception))
                self.assertEqual(snapshot(os.path.dirname(path)), before)

    def test_a_newer_outbox_of_ours_is_refused_without_switching_it_to_wal(self):
        os.makedirs(self.folder)
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()
        before = snapshot(self.folder)
        with self.assertRaises(OutboxCorrupt):
            self.open()
        self.assertEqual(header(self.path)["journal"], (1, 1))  # still a rollback journal
        self.assertEqual(snapshot(self.folder), before)

    def test_outboxes_from_before_the_stamp_are_adopted_migrated_and_stamped(self):
        def killed_after_first_migration(path):
            child = run_child(CHILD_LEGACY_KILLED, ROOT, path)
            out, err = child.communicate(timeout=60)
            self.assertEqual(child.returncode, 0, err)
            self.assertEqual(header(path)["user_version"], 0)  # the migration is only in the WAL

        cases = {"version 1": lambda path: legacy_outbox(
                     path, 1, {"queued-before-the-kill": ("pending", None)}),
                 "version 2": lambda path: legacy_outbox(
                     path, 2, {"queued-before-the-kill": ("pending", None)}),
                 "version 1 still in its WAL": killed_after_first_migration}
        for name, make in cases.items():
            with self.subTest(name):
                path = temp_outbox_path(self)
                os.makedirs(os.path.dirname(path))
                make(path)
                box = self.open(path)
                self.assertEqual([e.id for e in lease(box, "w", 10, 60)],
                                 ["queued-before-the-kill"])
                box.close()
                self.assertEqual(header(path)["application_id"], APPLICATION_ID)
                self.assertEqual(header(path)["user_version"], SCHEMA_VERSION)

    def test_a_new_or_empty_file_becomes_a_stamped_outbox_with_incremental_vacuum(self):
        for name, make in (("no file", None),
                           ("an empty file", lambda path: open(path, "wb").close()),
                           ("a file another connection of ours began",
                            begun_by_another_connection_of_ours)):
            with self.subTest(name):
                path = temp_outbox_path(self)
                if make is not None:
                    os.makedirs(os.path.dirname(path))
                    make(path)
                enqueue(self.open(path), [event(1)])
                self.assertEqual(header(path)["application_id"], APPLICATION_ID)
                self.assertEqual(auto_vacuum(path), 2)  # incremental


def paste(n: int) -> str:
    """A 1 MB paste whose text says which one it is, at both ends and in the middle."""
    marker = f"PRUNED-PASTE-{n:02d}-7c1e"
    filler = "".join(chr(0x61 + (i * 7 + n) % 26) for i in range(4096))
    body = (filler * (MB // len(filler)))[:MB - 3 * len(marker)]
    return marker + body[:len(body) // 2] + marker + body[len(body) // 2:] + marker


class DiskTest(FileTestCase):
    def deliver_pastes(self, box, count=20):
        for n in range(count):
            enqueue(box, [event(n, f"chat-{n}", content=paste(n))])
        for _ in range(count):
            settle(box, "w", Settlement(delivered=[e.id for e in lease(box, "w", 1, 60)]))

    def test_delivered_pastes_pruned_leave_a_small_file_and_none_of_their_text(self):
        cases = {"new outbox": lambda path: None,
                 "outbox from before auto_vacuum": lambda path: legacy_outbox(path, 2, {})}
        for name, make in cases.items():
            with self.subTest(name):
                path = temp_outbox_path(self)
                os.makedirs(os.path.dirname(path))
                make(path)
                box = self.open(path)
                self.deliver_pastes(box)
                self.assertEqual(box.prune(delivered_retention_s=0), 20)
                sizes, texts = on_disk(path)
                self.assertLess(sizes[""], MB)
                self.assertLessEqual(sizes["-wal"], JOURNAL_SIZE_LIMIT)
                for suffix, data in texts.items():
                    self.assertNotIn(b"PRUNED-PASTE-", data,
                                     f"pruned text found in {suffix or 'main file'}")

    def test_every_connection_overwrites_deleted_content_and_limits_its_journal(self):
        _, conn = open_with_connection(self.path, self.open)
        self.assertEqual(conn.execute("PRAGMA secure_delete").fetchone()[0], 1)
        self.assertEqual(conn.execute("PRAGMA journal_size_limit").fetchone()[0],
                         JOURNAL_SIZE_LIMIT)

    def test_the_one_time_vacuum_waits_for_an_idle_queue(self):
        legacy_outbox(self.path, 2, {})
        box = self.open()
        self.deliver_pastes(box, 2)
        enqueue(box, [event(99, "chat-waiting")])
        self.assertEqual(box.prune(delivered_retention_s=0), 2)
        self.assertEqual(auto_vacuum(self.path), 0)  # not while a row waits
        settle(box, "w", Settlement(delivered=[e.id for e in lease(box, "w", 1, 60)]))
        self.clock.advance(1)
        self.assertEqual(box.prune(delivered_retention_s=3600), 0)
        self.assertEqual(auto_vacuum(self.path), 2)

    def test_a_vacuum_that_meets_a_lock_is_left_for_a_later_prune(self):
        legacy_outbox(self.path, 2, {})
        box, conn = open_with_connection(self.path, lambda: self.open(busy_timeout_s=0.05))
        self.deliver_pastes(box, 2)
        other = self.sqlite()

        def lock_before_vacuum(statement):
            if statement.strip().upper() == "VACUUM" and not other.in_transaction:
                # another writer takes the lock just as VACUUM starts
                other.execute("BEGIN IMMEDIATE")

        conn.set_trace_callback(lock_before_vacuum)
        # the rows are gone; no error escapes
        self.assertEqual(box.prune(delivered_retention_s=0), 2)
        conn.set_trace_callback(None)
        self.assertTrue(other.in_transaction)
        other.execute("ROLLBACK")
        self.assertEqual(auto_vacuum(self.path), 0)
        self.assertEqual(box.prune(delivered_retention_s=0), 0)
        self.assertEqual(auto_vacuum(self.path), 2)
        sizes, texts = on_disk(self.path)
        self.assertLess(sizes[""], MB)
        self.assertNotIn(b"PRUNED-PASTE-", texts[""] + texts["-wal"])


class SnapshotTest(FileTestCase):
    def test_stats_reads_one_snapshot_while_another_connection_commits(self):
        box, conn = open_with_connection(self.path, self.open)
        enqueue(box, [event(1)])
        other = self.sqlite()
        selects = []

        def commit_after_first_read(statement):
            if statement.lstrip().upper().startswith("SELECT"):
                selects.append(statement)
                if len(selects) == 2:  # stats' first read is done: another process delivers the row
                    other.execute("UPDATE events SET state = 'delivered'")

        conn.set_trace_callback(commit_after_first_read)
        stats = box.stats()
        conn.set_trace_callback(None)
        self.assertGreaterEqual(len(selects), 2)  # the commit did land between two of stats' reads
        self.assertEqual((stats["counts"]["pending"], stats["counts"]["delivered"]), (1, 0))
        self.assertEqual(stats["oldest_pending_captured_at"], 1_700_000_001.0)
        self.assertEqual(box.stats()["counts"]["delivered"], 1)  # the next call sees the commit


# Another process counting the rows: a connection of this process would share the first one's view.
COUNT_ROWS = r"""
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM events").fetchone()[0])
"""


class SameProcessTest(FileTestCase):
    def test_opening_the_outbox_again_keeps_the_locks_of_the_connection_already_open(self):
        # The checks at open must not close a descriptor of the database or its -shm: that would
        # drop the POSIX locks the first connection holds, and the next process would reset the
        # shared index under it.
        first = self.open()
        enqueue(first, [event(1)])
        enqueue(self.open(), [event(2)])
        child = run_child(CHILD_ENQUEUE, ROOT, self.path, "other", "5")
        out, err = child.communicate(timeout=60)
        self.assertEqual(out.strip(), "done", err)
        # lands in the -wal the other process sees (not in one it deleted)
        enqueue(first, [event(3)])
        self.assertEqual(first.stats()["counts"]["pending"], 8)
        count = run_child(COUNT_ROWS, self.path)
        out, err = count.communicate(timeout=60)
        self.assertEqual(out.strip(), "8", err)


@contextlib.contextmanager
def written_during_the_switch_to_wal(path: str) -> Iterator[list[str]]:
    """Inside the block, another connection holds the file's write lock from the moment a connection
    opened on `path` first asks to switch it to WAL until that connection asks again: what a second
    opener of a new outbox (another process, or this one's capture writer or delivery worker) does
    when it stamps the file or switches it at that moment. Yields the switches the opener ran."""
    switches: list[str] = []
    connect = sqlite3.connect
    other = None

    def on_statement(statement: str) -> None:
        nonlocal other
        if "journal_mode=WAL" not in statement:
            return
        switches.append(statement)
        if len(switches) == 1:
            other = connect(path, isolation_level=None, check_same_thread=False)
            other.execute("BEGIN IMMEDIATE")
        elif len(switches) == 2:
            other.execute("ROLLBACK")

    def tracing(database, *args, **kwargs):
        conn = connect(database, *args, **kwargs)
        if database == path:
            conn.set_trace_callback(on_statement)
        return conn

    try:
        with mock.patch.object(sqlite3, "connect", tracing):
            yield switches
    finally:
        if other is not None:
            other.close()


class NewFileRaceTest(FileTestCase):
    def test_a_new_outbox_written_by_another_opener_during_its_switch_to_wal_still_opens(self):
        # The switch reads the file, then asks for its write lock; SQLite refuses that at once while
        # another connection writes (waiting inside a read for the write lock could deadlock),
        # whatever the busy timeout. The opener tries again within its busy timeout.
        with written_during_the_switch_to_wal(self.path) as switches:
            box = self.open(busy_timeout_s=5.0)
        self.assertGreaterEqual(len(switches), 2, "the other writer was never met")
        enqueue(box, [event(1)])
        self.assertEqual(header(self.path)["journal"], (2, 2))  # WAL
        self.assertEqual(box.stats()["counts"]["pending"], 1)


class SymlinkTest(FileTestCase):
    def test_a_symlink_at_the_outbox_or_its_companion_files_is_refused(self):
        for suffix in ("", "-wal", "-shm", "-journal"):
            for dangling in (False, True):
                with self.subTest(suffix=suffix or "outbox", dangling=dangling):
                    path = temp_outbox_path(self)
                    os.makedirs(os.path.dirname(path))
                    elsewhere = tempfile.TemporaryDirectory()
                    self.addCleanup(elsewhere.cleanup)
                    target = os.path.join(elsewhere.name, "target")
                    if not dangling:
                        open(target, "wb").close()
                    os.symlink(target, path + suffix)
                    with self.assertRaises(OutboxUnavailable) as caught:
                        self.open(path)
                    self.assertNotIn(path, str(caught.exception))
                    self.assertEqual(os.listdir(elsewhere.name), [] if dangling else ["target"])
                    if not dangling:
                        self.assertEqual(os.path.getsize(target), 0)


class PermissionTest(FileTestCase):
    def test_an_existing_outbox_readable_by_others_becomes_owner_only(self):
        first = self.open()
        enqueue(first, [event(1)])  # keeps -wal and -shm in place while it is open
        names = [self.path + suffix for suffix in ("", "-wal", "-shm")]
        for name in names:
            os.chmod(name, 0o644)
        self.open()
        self.assertEqual({name: mode(name) for name in names}, {name: 0o600 for name in names})

    def test_an_existing_folder_holding_only_the_outbox_becomes_owner_only(self):
        def with_the_plugins_other_files():
            self.open().close()
            os.mkdir(os.path.join(self.folder, "journal"))
            open(marker_path(build_settings({"outbox_path": self.path}, {}, {})), "w").close()

        for name, prepare in (("empty", lambda: None),
                              ("with an outbox", lambda: self.open().close()),
                              ("with the plugin's journal folder and cache marker",
                               with_the_plugins_other_files)):
            with self.subTest(name):
                self.path = temp_outbox_path(self)
                self.folder = os.path.dirname(self.path)
                os.makedirs(self.folder)
                prepare()
                os.chmod(self.folder, 0o755)
                self.open()
                self.assertEqual(mode(self.folder), 0o700)

    def test_a_folder_with_other_content_or_shared_keeps_its_mode(self):
        def other_file(folder):
            open(os.path.join(folder, "notes.txt"), "w").close()

        cases = [("holds another file", 0o755, other_file),
                 ("sticky, like /tmp", 0o1777, lambda folder: None)]
        if os.geteuid() == 0:  # only root can give a folder to another user
            cases.append(("owned by another user", 0o777,
                          lambda folder: os.chown(folder, 65534, 65534)))
        for name, folder_mode, prepare in cases:
            with self.subTest(name):
                path = temp_outbox_path(self)
                folder = os.path.dirname(path)
                os.makedirs(folder)
                prepare(folder)
                os.chmod(folder, folder_mode)
                self.open(path)
                self.assertEqual(mode(folder), folder_mode)

    @unittest.skipUnless(os.geteuid() == 0, "only root can give a file to another user")
    def test_an_outbox_file_owned_by_another_user_keeps_its_mode(self):
        self.open().close()
        os.chmod(self.path, 0o644)
        os.chown(self.path, 65534, 65534)
        self.open()
        self.assertEqual(mode(self.path), 0o644)


if __name__ == "__main__":
    unittest.main()
