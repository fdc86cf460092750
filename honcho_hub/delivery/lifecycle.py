"""Install, update and uninstall steps behind `hooks.py`; none of them ever raises (Agent Zero
deletes a plugin whose `install()` raises). Workers are found among the live threads by a marker
attribute, and `stop_workers(hold_s=...)` keeps them stopped after uninstall or pre_update until the
plugin's modules reload or (pre_update) the install hook after the pull ends the hold. Why, and how
a hold ends: docs/architecture.md ("Delivery"), docs/updating.md.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from ..runtime import RestartHold, process_state

log = logging.getLogger(__name__)

WORKER_MARKER = "honcho_hub_worker"
PIP_TIMEOUT_S = 600.0
PIP_PROBE_TIMEOUT_S = 30.0  # `python -m pip --version`: whether the interpreter has pip
MAX_DRAIN_S = 5.0
# pre_update's reason, and how long its hold lasts at most: the install hook that follows the pull
# lifts it (end_update_hold); this bound only ends it when the pull failed and no install followed.
UPDATE = "pre_update"
UPDATE_HOLD_S = 30.0
# This module generation, as a hold records it: a re-import of the plugin makes a new object.
_GENERATION = object()


@dataclass(frozen=True)
class Installed:
    """What installing the requirements did: `outcome` ok, failed, timeout, missing (no
    requirements file) or no_installer; `installer` pip or uv when one ran."""

    outcome: str
    installer: str | None = None


def install_requirements(requirements: str, python: str | None = None,
                         timeout_s: float = PIP_TIMEOUT_S,
                         search_path: str | None = None) -> Installed:
    """Install `requirements` for the interpreter `python` (default: this one) with its own pip,
    else with `uv pip install --python` (v2.x's image venv may lack pip; Agent Zero's own code
    installs that way): uv found on `search_path` (default PATH), then beside the interpreter."""
    if not os.path.isfile(requirements):
        log.warning("honcho install: %s not found; dependencies not installed",
                    os.path.basename(requirements))
        return Installed("missing")
    python = python or sys.executable
    command = _installer_command(python, requirements, search_path)
    if command is None:
        log.warning("honcho install: %s has no pip and no uv was found on PATH; dependencies not"
                    " installed, running degraded (install them with `uv pip install --python %s"
                    " -r requirements.txt` or give the interpreter pip)",
                    os.path.basename(python), python)
        return Installed("no_installer")
    installer = "pip" if command[1:3] == ["-m", "pip"] else "uv"
    return Installed(_run_installer(command, installer, timeout_s), installer)


def _installer_command(python: str, requirements: str, search_path: str | None) -> list[str] | None:
    """pip's command when `python` has pip, else uv's, else None."""
    if _has_pip(python):
        return [python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "-r",
                requirements]
    uv = (shutil.which("uv", path=search_path)
          or shutil.which("uv", path=os.path.dirname(os.path.abspath(python))))
    if uv is None:
        return None
    return [uv, "pip", "install", "--quiet", "--python", python, "-r", requirements]


def _has_pip(python: str) -> bool:
    try:
        return subprocess.run([python, "-m", "pip", "--version"], capture_output=True,
                              timeout=PIP_PROBE_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _run_installer(command: list[str], installer: str, timeout_s: float) -> str:
    """Run the install command; ok, failed or timeout, logged with the installer's name."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        log.warning("honcho install: %s did not finish in %.0f s; running degraded", installer,
                    timeout_s)
        return "timeout"
    except OSError as exc:
        log.warning("honcho install: %s could not start (%s); running degraded", installer,
                    type(exc).__name__)
        return "failed"
    if done.returncode != 0:
        # The installer's own output may echo index URLs with credentials: only the exit code.
        hint = ("python -m pip install" if installer == "pip"
                else "uv pip install --python <Agent Zero's python>")
        log.warning("honcho install: %s exited with %d; running degraded (delivery needs"
                    " honcho-ai; run `%s -r requirements.txt` to see why)", installer,
                    done.returncode, hint)
        return "failed"
    importlib.invalidate_caches()
    log.info("honcho install: requirements installed with %s", installer)
    return "ok"


def migrate_outbox(path: str) -> str:
    """Create the outbox (folder and file) or bring an existing one to the current schema:
    'created', 'migrated', or the error code of why it cannot be used (the plugin still installs;
    capture reports it)."""
    from ..errors import OutboxError
    from ..storage.outbox import Outbox

    existed = os.path.exists(path)
    try:
        Outbox(path).close()
    except OutboxError as exc:
        log.warning("honcho install: outbox not usable (%s)", exc.code)
        return exc.code
    log.info("honcho install: outbox %s", "schema is current" if existed else "created")
    return "migrated" if existed else "created"


class PluginThread(Protocol):
    """A thread marked WORKER_MARKER (a delivery worker or the scope registrar) of any module
    generation: only what every generation's class has."""

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None, /) -> None: ...

    def drain(self, timeout_s: float, /) -> Mapping[str, int]: ...  # what moved, by outcome

    def stop(self, timeout_s: float, /) -> Any: ...


def _is_plugin_thread(thread: threading.Thread) -> TypeGuard[PluginThread]:
    return bool(getattr(thread, WORKER_MARKER, False))


def plugin_workers() -> list[PluginThread]:
    """Live worker threads of this plugin, whatever module generation started them."""
    return [t for t in threading.enumerate() if _is_plugin_thread(t) and t.is_alive()]


def hold_restart(seconds: float, reason: str,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
    """Keep this module generation from starting workers for `seconds` (math.inf: while it is
    loaded), for `reason`. Each reason holds on its own (a switch-off, an update and an uninstall
    may overlap, and each ends its own way); the same reason again only lengthens its hold."""
    state = process_state()
    with state.lock:
        until = monotonic() + max(0.0, seconds)
        known = state.restart_hold
        holds = dict(known["holds"]) if _ours(known) else {}
        holds[reason] = max(until, holds.get(reason, until))
        state.restart_hold = {"generation": _GENERATION, "holds": holds}
    log.info("honcho: workers held after %s%s", reason,
             "" if math.isinf(seconds)
             else f" for at most {seconds:.0f} s or until the plugin reloads")


def release_hold(reason: str) -> bool:
    """Lift this module generation's hold for `reason` alone (switching the plugin on ends its
    switch-off's hold, never an uninstall's or an update's: those still hold); whether there was
    one."""
    state = process_state()
    with state.lock:
        hold = state.restart_hold
        if not _ours(hold) or reason not in hold["holds"]:
            return False
        holds = {other: until for other, until in hold["holds"].items() if other != reason}
        state.restart_hold = {"generation": _GENERATION, "holds": holds}
    log.info("honcho: the hold after %s was lifted", reason)
    return True


def end_update_hold() -> bool:
    """After an update's pull (the install hook): lift pre_update's hold, whichever module
    generation placed it, as the hook may be the old hooks.py or the new one (Agent Zero caches it;
    its file watcher may have reloaded it); whether there was one. A hold of another shape (an
    older release's) is left to run out."""
    state = process_state()
    with state.lock:
        hold = state.restart_hold
        if not (isinstance(hold, dict) and isinstance(hold.get("holds"), dict)
                and UPDATE in hold["holds"]):
            return False
        holds = {other: until for other, until in hold["holds"].items() if other != UPDATE}
        state.restart_hold = {"generation": hold.get("generation"), "holds": holds}
    log.info("honcho: the hold after pre_update was lifted: the update's install ran")
    return True


def restart_held(monotonic: Callable[[], float] = time.monotonic) -> bool:
    """Whether a worker must not start now: a hold by this module generation, for any reason, that
    has not run out. Hub.ensure_worker asks before starting one; cheap (no I/O)."""
    hold = process_state().restart_hold
    if not _ours(hold):
        return False
    now = monotonic()
    return any(now < until for until in hold["holds"].values())


def held_for(reason: str) -> bool:
    """Whether this module generation holds the workers for `reason` now (cheap: no I/O)."""
    hold = process_state().restart_hold
    return _ours(hold) and time.monotonic() < hold["holds"].get(reason, -math.inf)


def _ours(hold: RestartHold | None) -> TypeGuard[RestartHold]:
    """Whether `hold` was placed by this module generation (an older one's may have another
    shape: it is never read)."""
    return hold is not None and hold["generation"] is _GENERATION


def stop_workers(drain_s: float = 0.0, stop_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic,
                 hold_s: float = 0.0, reason: str = "stop") -> dict[str, Any]:
    """Drain each worker for at most `drain_s` in total (≤ 5 s), then stop them, waiting at most
    `stop_s` for all of them together; never raises. `stopped` counts the workers that have ended;
    one whose request still hangs ends with it. With `hold_s` > 0 no worker of this generation
    starts again for that long (see hold_restart); the hold is in place before the first worker
    stops, so a capture meanwhile cannot start another."""
    if hold_s > 0:
        hold_restart(hold_s, reason, monotonic)
    drain_until = monotonic() + max(0.0, min(drain_s, MAX_DRAIN_S))
    stop_until: float | None = None  # from the first stop on
    report: dict[str, Any] = {"workers": 0, "drained": 0, "stopped": 0}
    for worker in plugin_workers():
        report["workers"] += 1
        remaining = drain_until - monotonic()
        if remaining > 0:
            report["drained"] += _delivered_by(worker, remaining)
        if stop_until is None:
            stop_until = monotonic() + max(0.0, stop_s)
        try:
            worker.stop(max(0.0, stop_until - monotonic()))
        except Exception:  # best-effort shutdown: one bad worker must not keep the others running
            log.exception("honcho: a worker did not stop cleanly")
            continue
        if worker.is_alive():  # a request still hangs; the stop is signalled, it ends with it
            log.warning("honcho: a worker is still finishing a request; it stops when that ends")
        else:
            report["stopped"] += 1
    log.info("honcho: stopped %d of %d workers", report["stopped"], report["workers"])
    return report


def _delivered_by(worker: PluginThread, timeout_s: float) -> int:
    """What `worker`'s drain delivered (a registrar delivers nothing); 0 when the drain fails or
    answers in another shape, as a thread an older version of the plugin left running may."""
    try:
        return int(worker.drain(timeout_s).get("delivered", 0))
    except Exception:
        log.warning("honcho: a worker's drain did not say what it delivered; it is stopped anyway")
        return 0
