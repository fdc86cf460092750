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
from ..storage import journal, processes
from ..storage.db import EXISTING_WAIT_S
from ..storage.marker import marker_path
from ..storage.outbox import EventState, Outbox

PURGED, REFUSED = "purged", "refused"
SIDE_FILES = ("-wal", "-shm")  # SQLite's, beside the outbox file; removed before it


def purge(settings: Settings, *, force: bool = False) -> dict[str, Any]:
    """Remove the outbox `settings` name and what beside it is ours; a report of what was removed
    and what was kept (paths: the command's own answer, never status). Never raises OSError."""
    path = settings.outbox_path
    report: dict[str, Any] = {"state": REFUSED, "reason": None, "pending": 0, "sending": 0,
                              "dead": 0, "live_processes": 0, "removed": [], "kept": [],
                              "notes": []}
    if os.path.islink(path) or os.path.lexists(path) and not os.path.isfile(path):
        report["reason"] = "the outbox setting names a symbolic link or not a file; not followed"
        return report
    if os.path.isfile(path):
        try:
            _read_outbox(settings, report)
        except OutboxError as exc:
            report["reason"] = f"the file is not an outbox the plugin can open ({exc.code}); kept"
            return report
    folder = os.path.join(os.path.dirname(path), journal.FOLDER)
    ours = journal.is_our_folder(folder)
    if ours:
        report["live_processes"] += _locked_journals(folder)
    waiting = report["pending"] + report["sending"]
    if not force and (waiting or report["live_processes"]):
        report["reason"] = (f"{report['pending']} pending and {report['sending']} sending rows,"
                            f" {report['live_processes']} other live processes")
        return report
    report["state"] = PURGED
    if ours:
        _remove_journal_folder(folder, report)
    elif os.path.lexists(folder):
        report["kept"].append(folder)
        report["notes"].append("a journal folder without the plugin's mark is not ours: kept")
    for file in (marker_path(settings), *(path + side for side in SIDE_FILES), path):
        _remove_file(file, report)
    return report


def _read_outbox(settings: Settings, report: dict[str, Any]) -> None:
    """Counts and other live processes, from the outbox (opening it tells ours from any file)."""
    box = Outbox.for_settings(settings, busy_timeout_s=EXISTING_WAIT_S)
    try:
        counts = box.stats()["counts"]
        rows = processes.listed(box.db)
    finally:
        box.close()
    report["pending"] = counts[EventState.PENDING.value]
    report["sending"] = counts[EventState.LEASED.value]
    report["dead"] = counts[EventState.DEAD.value]
    # As status sees them: a row not stale is a process beating now; this one is not "another".
    now, here = time.time(), (os.getpid(), processes.host_name())
    report["live_processes"] = sum(
        1 for row in rows
        if not processes.is_stale(row, now) and (row["pid"], row["host"]) != here)


def _is_journal_file(name: str) -> bool:
    return (name.removeprefix(journal.CREATING).startswith(journal.PREFIX)
            and name.endswith(journal.SUFFIX))


def _locked_journals(folder: str) -> int:
    """Journal files whose lock a live process holds (each process locks its own)."""
    live = 0
    for name in _names(folder):
        if not _is_journal_file(name):
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
