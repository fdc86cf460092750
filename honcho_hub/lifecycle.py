"""Install, update and uninstall steps behind `hooks.py`; none of them ever raises.

Agent Zero deletes a plugin whose `install()` raises, so a failed pip run is reported and the plugin
runs degraded: capture only needs the standard library and PyYAML, both present in Agent Zero.
Workers are found among the live threads by a marker attribute rather than through a module global,
because Agent Zero re-imports plugin modules when their files change and a global would be new.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

WORKER_MARKER = "honcho_hub_worker"
PIP_TIMEOUT_S = 600.0
MAX_DRAIN_S = 5.0


def install_requirements(requirements: str, python: str | None = None,
                         timeout_s: float = PIP_TIMEOUT_S) -> str:
    """Run pip for `requirements` with the given interpreter; returns ok, failed, timeout or missing."""
    if not os.path.isfile(requirements):
        log.warning("honcho install: %s not found; dependencies not installed",
                    os.path.basename(requirements))
        return "missing"
    command = [python or sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
               "--quiet", "-r", requirements]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        log.warning("honcho install: pip did not finish in %.0f s; running degraded", timeout_s)
        return "timeout"
    except OSError as exc:
        log.warning("honcho install: pip could not start (%s); running degraded", type(exc).__name__)
        return "failed"
    if done.returncode != 0:
        # pip's own output may echo index URLs with credentials, so only the exit code is logged.
        log.warning("honcho install: pip exited with %d; running degraded (delivery needs honcho-ai;"
                    " run `%s -m pip install -r requirements.txt` to see why)", done.returncode,
                    os.path.basename(command[0]))
        return "failed"
    importlib.invalidate_caches()
    log.info("honcho install: requirements installed")
    return "ok"


def migrate_outbox(path: str) -> str:
    """Bring an existing outbox to the current schema; 'absent' when there is none yet (capture makes it)."""
    from .outbox import Outbox
    from .outbox_db import OutboxError

    if not os.path.exists(path):
        return "absent"
    try:
        Outbox(path).close()
    except OutboxError as exc:
        log.warning("honcho install: outbox not migrated (%s)", exc.code)
        return exc.code
    log.info("honcho install: outbox schema is current")
    return "migrated"


def plugin_workers() -> list[threading.Thread]:
    """Live worker threads of this plugin, whatever module generation started them."""
    return [t for t in threading.enumerate() if getattr(t, WORKER_MARKER, False) and t.is_alive()]


def stop_workers(drain_s: float = 0.0, stop_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Drain each worker for at most `drain_s` in total (≤ 5 s), then stop them; never raises.
    `stopped` counts the workers that have ended; one whose request still hangs ends with it."""
    deadline = monotonic() + max(0.0, min(drain_s, MAX_DRAIN_S))
    report: dict[str, Any] = {"workers": 0, "drained": 0, "stopped": 0}
    for worker in plugin_workers():
        report["workers"] += 1
        try:
            remaining = deadline - monotonic()
            if remaining > 0:
                moved = worker.drain(remaining)  # type: ignore[attr-defined]
                report["drained"] += moved.get("delivered", 0) if isinstance(moved, dict) else int(moved or 0)
            worker.stop(stop_s)  # type: ignore[attr-defined]
            if worker.is_alive():  # a request still hangs; the stop is signalled and it ends with it
                log.warning("honcho: a worker is still finishing a request; it stops when that ends")
            else:
                report["stopped"] += 1
        except Exception:  # best-effort shutdown: one bad worker must not keep the others running
            log.exception("honcho: a worker did not stop cleanly")
    log.info("honcho: stopped %d of %d workers", report["stopped"], report["workers"])
    return report
