"""Purge: remove what the plugin keeps on disk beside its outbox — the outbox file (with its -wal
and -shm), the capture journal folder beside it and the marker — before an uninstall. Agent Zero's
uninstall keeps them, and deletes the plugin folder (with this command) after.

Refused while rows wait to be sent or are being sent, and while another live process uses the
outbox, unless forced. Never refused away: a file the setting names that is not an outbox of ours,
a symbolic link, a folder without the journal's mark, a file in it the journal did not write.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from typing import Any

from ..errors import OutboxError
from ..settings.config import Settings
from ..storage import journal, memory_log, processes
from ..storage.db import EXISTING_WAIT_S
from ..storage.marker import marker_path
from ..storage.outbox import EventState, Outbox

PURGED, REFUSED = "purged", "refused"
SIDE_FILES = ("-wal", "-shm")  # SQLite's, beside the outbox file; removed before it
# What the page may show of a report: counts and path-free words, never a path or queued text.
PAGE_FIELDS = ("state", "reason", "outbox", "pending", "sending", "dead", "delivered",
               "memory_records", "in_journal", "journal_files", "marker", "live_processes", "notes")


def survey(settings: Settings, *, own_journal: str = "", in_journal: int = 0) -> dict[str, Any]:
    """What a purge would remove and whether it is refused unforced (`reason`), removing nothing.
    `own_journal` is this process's journal file (its lock is no other live process's);
    `in_journal` the messages it holds not yet in the outbox (they wait, like pending rows)."""
    path = settings.outbox_path
    report: dict[str, Any] = {"state": None, "reason": None, "outbox": False, "pending": 0,
                              "sending": 0, "dead": 0, "delivered": 0, "memory_records": 0,
                              "in_journal": in_journal, "journal_files": 0,
                              "marker": os.path.isfile(marker_path(settings)),
                              "live_processes": 0, "removed": [], "kept": [], "notes": []}
    if os.path.islink(path) or os.path.lexists(path) and not os.path.isfile(path):
        report["state"] = REFUSED
        report["reason"] = "the outbox setting names a symbolic link or not a file; not followed"
        return report
    if os.path.isfile(path):
        try:
            _read_outbox(settings, report)
        except OutboxError as exc:
            report["state"] = REFUSED
            report["reason"] = f"the file is not an outbox the plugin can open ({exc.code}); kept"
            return report
    folder = os.path.join(os.path.dirname(path), journal.FOLDER)
    if journal.is_our_folder(folder):
        names = [name for name in _names(folder) if _is_journal_file(name)]
        report["journal_files"] = len(names)
        report["live_processes"] += _locked_journals(folder, names, own_journal)
    if own_journal and os.path.dirname(own_journal) != folder and os.path.isfile(own_journal):
        report["journal_files"] += 1
    waiting = report["pending"] + report["sending"] + in_journal
    if waiting or report["live_processes"]:
        report["reason"] = (f"{report['pending']} pending and {report['sending']} sending rows,"
                            f" {in_journal} in the journal,"
                            f" {report['live_processes']} other live processes")
    return report


def purge(settings: Settings, *, force: bool = False, own_journal: str = "",
          in_journal: int = 0) -> dict[str, Any]:
    """Remove the outbox `settings` name and what beside it is ours (and `own_journal`, this
    process's closed journal file, wherever it is); a report of what was removed and what was kept
    (paths: the command's own answer, never status nor the page). Never raises OSError."""
    report = survey(settings, own_journal=own_journal, in_journal=in_journal)
    if refuses(report, force):
        report["state"] = REFUSED
        return report
    report["state"], report["reason"] = PURGED, None
    folder = os.path.join(os.path.dirname(settings.outbox_path), journal.FOLDER)
    if journal.is_our_folder(folder):
        _remove_journal_folder(folder, report)
    elif os.path.lexists(folder):
        report["kept"].append(folder)
        report["notes"].append("a journal folder without the plugin's mark is not ours: kept")
    if own_journal and os.path.dirname(own_journal) != folder:
        _remove_file(own_journal, report)
    path = settings.outbox_path
    for file in (marker_path(settings), *(path + side for side in SIDE_FILES), path):
        _remove_file(file, report)
    return report


def refuses(report: dict[str, Any], force: bool) -> bool:
    """Whether a survey refuses the purge: a file not ours always; messages waiting or another live
    process unless `force`."""
    return report["state"] == REFUSED or bool(report["reason"]) and not force


def page_report(report: dict[str, Any]) -> dict[str, Any]:
    """A report as the sidebar shows it: its counts, and how many files were removed and kept."""
    return {**{name: report[name] for name in PAGE_FIELDS},
            "removed": len(report["removed"]), "kept": len(report["kept"])}


def _read_outbox(settings: Settings, report: dict[str, Any]) -> None:
    """Counts and other live processes, from the outbox (opening it tells ours from any file)."""
    box = Outbox.for_settings(settings, busy_timeout_s=EXISTING_WAIT_S)
    try:
        counts = box.stats()["counts"]
        rows = processes.listed(box.db)
        writes = memory_log.summary(box.db, latest=0)
    finally:
        box.close()
    report["outbox"] = True
    report["pending"] = counts[EventState.PENDING.value]
    report["sending"] = counts[EventState.LEASED.value]
    report["dead"] = counts[EventState.DEAD.value]
    report["delivered"] = counts[EventState.DELIVERED.value]
    report["memory_records"] = writes["remembered"] + writes["forgotten"]
    # As status sees them: a row not stale is a process beating now; this one is not "another".
    now, here = time.time(), (os.getpid(), processes.host_name())
    report["live_processes"] = sum(
        1 for row in rows
        if not processes.is_stale(row, now) and (row["pid"], row["host"]) != here)


def _is_journal_file(name: str) -> bool:
    return (name.removeprefix(journal.CREATING).startswith(journal.PREFIX)
            and name.endswith(journal.SUFFIX))


def _locked_journals(folder: str, names: list[str], own_journal: str) -> int:
    """Journal files whose lock a live process holds (each process locks its own); this process's
    own is left out (a lock of another open file of it would conflict with ours)."""
    live = 0
    for name in names:
        if os.path.join(folder, name) == own_journal:
            continue
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            live += exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        finally:
            os.close(fd)
    return live


def _remove_journal_folder(folder: str, report: dict[str, Any]) -> None:
    """The journal files and the mark, then the folder if nothing else is in it."""
    for name in _names(folder):
        if _is_journal_file(name) or name == journal.MARK:
            _remove_file(os.path.join(folder, name), report, quiet=True)
    try:
        os.rmdir(folder)
    except OSError:
        report["kept"].append(folder)
        report["notes"].append("the journal folder holds files the plugin did not write: kept")
    else:
        report["removed"].append(folder)


def _remove_file(path: str, report: dict[str, Any], *, quiet: bool = False) -> None:
    """Unlink a regular file (never through a link); a link or folder there is kept."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        report["kept"].append(path)
        return
    try:
        os.unlink(path)
    except OSError:
        report["kept"].append(path)
        return
    if not quiet:
        report["removed"].append(path)


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def report_text(report: dict[str, Any]) -> str:
    """The command's answer: what was removed and what was kept (it may name files)."""
    lines = ([f"removed {path}" for path in report["removed"]]
             + [f"kept {path}" for path in report["kept"]] + report["notes"])
    if report["state"] == PURGED and not report["removed"]:
        lines.insert(0, "nothing to purge")
    if report["state"] == PURGED and report["dead"]:
        lines.append(f"{report['dead']} dead letters were removed with the outbox")
    return "\n".join(lines)
