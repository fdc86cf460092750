"""Purge (ops/purge.py, `python -m honcho_hub purge`): what uninstall keeps beside the outbox is
removed on request, refused while rows wait or another live process uses the outbox."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import tempfile
import unittest

from outbox_helpers import enqueue, event, lease

from honcho_hub.cli import main as cli
from honcho_hub.ops import purge
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import journal, processes
from honcho_hub.storage.marker import marker_path, move_marker
from honcho_hub.storage.outbox import Outbox


class PurgeWorld:
    """A real outbox in a temporary folder, with its journal folder and marker as the plugin makes
    them."""

    def __init__(self, test: unittest.TestCase) -> None:
        folder = tempfile.TemporaryDirectory()
        test.addCleanup(folder.cleanup)
        self.home = folder.name
        self.folder = os.path.join(folder.name, "state")
        os.makedirs(self.folder)
        self.path = os.path.join(self.folder, "outbox.sqlite3")
        self.env = {"HONCHO_OUTBOX_PATH": self.path, "HOME": folder.name}
        self.settings = build_settings({"outbox_path": self.path}, self.env, {})
        Outbox(self.path).close()
        journal.make_folder_beside(self.path)
        self.journal_folder = os.path.join(self.folder, journal.FOLDER)
        with open(os.path.join(self.journal_folder, "capture-1-ab.journal"), "wb") as handle:
            handle.write(journal.encode({"n": 1}, "queued words"))
        move_marker(self.settings)

    def queue(self, n: int = 1) -> Outbox:
        box = Outbox(self.path)
        enqueue(box, [event(i, dest=self.settings.destination()) for i in range(n)])
        return box

    def names(self) -> set[str]:
        return set(os.listdir(self.folder))


class PurgeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.world = PurgeWorld(self)

    def test_an_idle_outbox_is_removed_with_its_journal_folder_and_marker(self) -> None:
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.PURGED)
        self.assertEqual(self.world.names(), set())
        removed = report["removed"]
        self.assertIn(self.world.path, removed)
        self.assertIn(marker_path(self.world.settings), removed)
        self.assertIn(self.world.journal_folder, removed)

    def test_pending_rows_refuse_the_purge_and_nothing_is_removed(self) -> None:
        self.world.queue(2).close()
        before = self.world.names()
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertEqual(report["pending"], 2)
        self.assertEqual(report["removed"], [])
        self.assertEqual(self.world.names(), before)

    def test_rows_being_sent_refuse_the_purge(self) -> None:
        box = self.world.queue(1)
        lease(box, "worker-1", 10)
        box.close()
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertEqual(report["sending"], 1)
        self.assertTrue(os.path.exists(self.world.path))

    def test_force_purges_pending_rows(self) -> None:
        self.world.queue(2).close()
        report = purge.purge(self.world.settings, force=True)
        self.assertEqual(report["state"], purge.PURGED)
        self.assertEqual(self.world.names(), set())

    def test_another_live_process_refuses_the_purge(self) -> None:
        box = Outbox(self.world.path)
        processes.beat(box.db, processes.Beat(owner="other", beat_every_s=5.0, state="idle",
                                              pid=os.getpid() + 1))
        box.close()
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertEqual(report["live_processes"], 1)
        self.assertTrue(os.path.exists(self.world.path))

    def test_a_journal_locked_by_a_live_process_refuses_the_purge(self) -> None:
        path = os.path.join(self.world.journal_folder, "capture-2-cd.journal")
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        self.addCleanup(os.close, fd)
        other = os.open(path, os.O_RDONLY)  # another open file description: its own lock
        self.addCleanup(os.close, other)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertEqual(report["live_processes"], 1)
        self.assertTrue(os.path.exists(path))

    def test_a_journal_folder_without_our_mark_is_kept(self) -> None:
        os.unlink(os.path.join(self.world.journal_folder, journal.MARK))
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.PURGED)
        self.assertEqual(self.world.names(), {journal.FOLDER})
        self.assertIn(self.world.journal_folder, report["kept"])

    def test_a_file_of_someone_else_in_our_journal_folder_keeps_the_folder(self) -> None:
        theirs = os.path.join(self.world.journal_folder, "notes.txt")
        with open(theirs, "w") as handle:
            handle.write("mine")
        purge.purge(self.world.settings)
        self.assertEqual(os.listdir(self.world.journal_folder), ["notes.txt"])

    def test_another_programs_database_is_not_removed(self) -> None:
        import sqlite3

        other = os.path.join(self.world.folder, "theirs.sqlite3")
        conn = sqlite3.connect(other)
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()
        settings = build_settings({"outbox_path": other}, {"HOME": self.world.home}, {})
        report = purge.purge(settings, force=True)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertTrue(os.path.exists(other))

    def test_a_symbolic_link_at_the_outbox_path_is_not_followed(self) -> None:
        link = os.path.join(self.world.home, "link.sqlite3")
        os.symlink(self.world.path, link)
        settings = build_settings({"outbox_path": link}, {"HOME": self.world.home}, {})
        report = purge.purge(settings, force=True)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertTrue(os.path.exists(self.world.path))
        self.assertTrue(os.path.islink(link))

    def test_this_processs_own_locked_journal_is_not_another_live_process(self) -> None:
        own = journal.Journal(self.world.journal_folder, max_entries=10, max_bytes=1 << 20)
        own.open()
        self.addCleanup(own.close)
        report = purge.survey(self.world.settings, own_journal=own.path)
        self.assertEqual(report["live_processes"], 0)
        self.assertEqual(report["journal_files"], 2)

    def test_messages_still_in_this_processs_journal_refuse_the_purge(self) -> None:
        report = purge.purge(self.world.settings, in_journal=3)
        self.assertEqual(report["state"], purge.REFUSED)
        self.assertIn("3 in the journal", report["reason"])
        self.assertTrue(os.path.exists(self.world.path))

    def test_this_processs_journal_outside_the_outbox_folder_is_removed_with_the_rest(self) -> None:
        elsewhere = os.path.join(self.world.home, "state-journal")
        os.makedirs(elsewhere)
        own = journal.Journal(elsewhere, max_entries=10, max_bytes=1 << 20)
        own.open()
        own.close()
        report = purge.purge(self.world.settings, own_journal=own.path)
        self.assertEqual(report["state"], purge.PURGED)
        self.assertEqual(os.listdir(elsewhere), [])
        self.assertIn(own.path, report["removed"])

    def test_the_page_report_holds_counts_and_no_path(self) -> None:
        self.world.queue(1).close()
        report = purge.purge(self.world.settings, force=True)
        shown = purge.page_report(report)
        self.assertEqual((shown["state"], shown["pending"], shown["outbox"]),
                         (purge.PURGED, 1, True))
        self.assertEqual(shown["removed"], len(report["removed"]))
        self.assertNotIn(self.world.folder, repr(shown))
        self.assertNotIn("message 0", repr(shown))

    def test_nothing_to_purge_says_so(self) -> None:
        purge.purge(self.world.settings)
        report = purge.purge(self.world.settings)
        self.assertEqual(report["state"], purge.PURGED)
        self.assertEqual(report["removed"], [])


class PurgeCommandTest(unittest.TestCase):
    def setUp(self) -> None:
        self.world = PurgeWorld(self)

    def run_cli(self, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["purge", *args], environ=self.world.env, out=out)
        return code, out.getvalue(), err.getvalue()

    def test_without_yes_and_no_terminal_it_refuses(self) -> None:
        code, _, err = self.run_cli()
        self.assertEqual(code, cli.EXIT_USAGE)
        self.assertIn("--yes", err)
        self.assertTrue(os.path.exists(self.world.path))

    def test_yes_purges_and_names_what_it_removed(self) -> None:
        code, out, _ = self.run_cli("--yes")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertIn(self.world.path, out)
        self.assertFalse(os.path.exists(self.world.path))

    def test_pending_rows_refuse_until_forced(self) -> None:
        self.world.queue(1).close()
        code, _, err = self.run_cli("--yes")
        self.assertEqual(code, cli.EXIT_DEGRADED)
        self.assertIn("--force", err)
        self.assertTrue(os.path.exists(self.world.path))
        code, _, _ = self.run_cli("--yes", "--force")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertFalse(os.path.exists(self.world.path))


if __name__ == "__main__":
    unittest.main()
