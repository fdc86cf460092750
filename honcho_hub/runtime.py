"""Process-wide state that must outlive a re-import of the plugin's modules, and background starts.
Agent Zero imports `usr.plugins.*` anew when plugin files change, so what must survive lives in one
`ProcessState` on a module registered outside that namespace; floors above keep their own values on
it through a `Kept` (docs/architecture.md, "Bottom floor"). Imports nothing of ours.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Generic, TypedDict, TypeVar, cast

log = logging.getLogger(__name__)

STATE_MODULE = "_honcho_hub_process_state"

T = TypeVar("T")


class ApiCheck(TypedDict):
    """What the endpoint checks learned about one destination's API."""
    ok_at: float | None
    failed_at: float | None
    code: str | None
    auth: bool


class RestartHold(TypedDict):
    """The holds on starting workers (delivery.lifecycle.hold_restart): each reason's deadline
    (monotonic seconds); only the generation that placed them honours them."""
    generation: object
    holds: dict[str, float]


@dataclass(eq=False)
class ProcessState:
    """What the process keeps across module generations; `lock` guards every field.

    Plain data on purpose: the instance in the registry may have been made by an older
    generation's class, which a newer generation uses as it is (after `process_state` has added the
    fields that class lacked), so behaviour belongs in this generation's functions, never in methods
    here. The floors above keep their own values on it, each through a `Kept`."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    api_checks: dict[str, ApiCheck] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)
    restart_hold: RestartHold | None = None
    # logger name -> (its level before debug, the handler debug added or None)
    debug_saved_levels: dict[str, tuple[int, logging.Handler | None]] = field(default_factory=dict)


def process_state() -> ProcessState:
    """The state shared by every module generation of this process."""
    registry = sys.modules.get(STATE_MODULE)
    if registry is None:
        registry = sys.modules.setdefault(
            STATE_MODULE, types.ModuleType(STATE_MODULE, "Honcho Memory Hub process state"))
    kept = vars(registry)
    state = kept.get("state")
    if state is None:
        # Generations before ProcessState kept their values as attributes of the registry module:
        # adopt them (the journal holds the file lock; a second one for the same file could not
        # take it).
        own = {f.name for f in fields(ProcessState)}
        made = ProcessState(**{name: kept[name] for name in own if name in kept})
        for name, value in kept.items():
            if name not in own and name != "state" and not name.startswith("_"):
                setattr(made, name, value)  # one of a floor above's values: read through its Kept
        state = kept.setdefault("state", made)  # dict.setdefault: one winner per race
    # Made by an older generation: it may lack what this one keeps.
    if type(state) is not ProcessState:
        with state.lock:
            for f in fields(ProcessState):
                if not hasattr(state, f.name):
                    setattr(state, f.name,
                            f.default if f.default_factory is MISSING else f.default_factory())
    return state


class Kept(Generic[T]):
    """A value a floor above keeps on the process state, as its attribute `name` (so every module
    generation finds it where an older one left it); `make` gives its value where none is kept
    yet."""

    def __init__(self, name: str, make: Callable[[], T]) -> None:
        self.name, self._make = name, make

    def of(self, state: ProcessState) -> T:
        """The value kept on `state`, made on first use."""
        with state.lock:
            if not hasattr(state, self.name):
                setattr(state, self.name, self._make())
            return cast(T, getattr(state, self.name))

    def put(self, state: ProcessState, value: T) -> None:
        """Keep `value` on `state` in place of the one it had."""
        with state.lock:
            setattr(state, self.name, value)


def record_api_check(destination: str, ok: bool, code: str | None, auth: bool,
                     now: float) -> None:
    """Remember what an endpoint check learned about the API, for status in this process."""
    state = process_state()
    with state.lock:
        known = state.api_checks.setdefault(destination, {"ok_at": None, "failed_at": None,
                                                          "code": None, "auth": False})
        if ok:
            known["ok_at"] = now
        else:
            known["failed_at"], known["code"], known["auth"] = now, code, auth


def warn_once(key: str, message: str, *args: Any, logger: logging.Logger = log) -> None:
    """Log a condition once per process, on `logger` (a missing dependency would otherwise log on
    every message, a settings problem on every turn)."""
    state = process_state()
    with state.lock:
        if key in state.warned:
            return
        state.warned.add(key)
    logger.warning(message, *args)


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
    """Wait for the background starts running now (tests, shutdown); False if one is still
    running."""
    deadline = time.monotonic() + timeout_s
    with _starters_lock:
        running = list(_starters.values())
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in running)


def close_pool(pool: ThreadPoolExecutor, unfinished: Callable[[], Iterable[Future]],
               timeout_s: float) -> bool:
    """Shut `pool` down: the work not started is cancelled, the running work waited for at most
    `timeout_s`, then (none left) the idle threads joined. True when every thread has ended; a
    thread still working ends with its work (each of ours runs under a deadline)."""
    pool.shutdown(wait=False, cancel_futures=True)
    _, running = wait_for_futures(list(unfinished()), timeout=max(0.0, timeout_s))
    if running:
        return False
    pool.shutdown(wait=True)  # the threads are idle: they end at once
    return True
