"""Process-wide state that must outlive a re-import of the plugin's modules, and the background starts.

Agent Zero purges `usr.plugins.*` from `sys.modules` when plugin files change and imports them anew,
so a module global would silently start over. What must survive — the capture journal (its file lock
and the messages not yet in the outbox), counters, the capture writer, the endpoint checks, what was
warned — lives in one module object registered under a name outside that namespace. The services are
rebuilt by the new generation's `hub.Hub` around it; a worker thread of an older generation is found by
its marker among the live threads and asked to stop.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
from typing import Any, Callable

from .capture.service import Counters

log = logging.getLogger(__name__)

STATE_MODULE = "_honcho_hub_process_state"


def process_state() -> types.ModuleType:
    """The registry shared by every module generation of this process."""
    state = sys.modules.get(STATE_MODULE)
    if state is None:
        state = types.ModuleType(STATE_MODULE, "Honcho Memory Hub process state")
        state.lock = threading.RLock()
        state = sys.modules.setdefault(STATE_MODULE, state)
    with state.lock:  # a state made by an older generation may lack what a newer one keeps
        for name, make in (("api_checks", dict), ("capture_counters", Counters), ("journal", lambda: None),
                           ("writer", lambda: None), ("replay_secrets", lambda: None), ("warned", set)):
            if not hasattr(state, name):
                setattr(state, name, make())
    return state


def record_api_check(destination: str, ok: bool, code: str | None, auth: bool, now: float) -> None:
    """Remember what an endpoint check learned about the API, for status in this process."""
    state = process_state()
    with state.lock:
        known = state.api_checks.setdefault(destination, {"ok_at": None, "failed_at": None, "code": None,
                                                          "auth": False})
        if ok:
            known["ok_at"] = now
        else:
            known.update(failed_at=now, code=code, auth=auth)


def warn_once(key: str, message: str, *args: Any) -> None:
    """Log a condition once per process (a missing dependency would otherwise log on every message)."""
    state = process_state()
    with state.lock:
        if key in state.warned:
            return
        state.warned.add(key)
    log.warning(message, *args)


_starters: dict[Any, threading.Thread] = {}
_starters_lock = threading.Lock()


def in_background(name: str, work: Callable[[], Any], single: bool = True) -> None:
    """Run `work` on a short-lived thread — when `single`, only if none of that name runs — logging
    errors. For what must not run on the caller's thread (Agent Zero's event loop): first imports,
    first requests."""
    def run() -> None:
        try:
            work()
        except Exception:
            log.exception("honcho: background start %s failed", name)

    thread = threading.Thread(target=run, name=f"honcho-hub-{name}", daemon=True)
    with _starters_lock:
        for key in [key for key, known in _starters.items() if not known.is_alive()]:
            del _starters[key]  # finished ones: the registry stays as small as what runs
        key = name if single else (name, id(thread))
        if single and key in _starters:
            return
        _starters[key] = thread
        thread.start()


def join_background(timeout_s: float) -> bool:
    """Wait for the background starts running now (tests, shutdown); False if one is still running."""
    deadline = time.monotonic() + timeout_s
    with _starters_lock:
        running = list(_starters.values())
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in running)
