"""A resource built from settings and rebuilt when the settings it depends on change: `Keyed` holds
one, `KeyedMany` several at once (one per destination, say), up to a bound. Each names its key, the
settings it was built from; when the key differs, the old one is closed and a new one built
(docs/architecture.md, "Bottom floor", gives the rule and an example).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

S = TypeVar("S")
R = TypeVar("R")


def fields(*names: str) -> Callable[[object], Hashable]:
    """A key function: the named attributes of the settings, as one tuple."""
    if not names:
        raise ValueError("a key needs at least one setting")
    get = operator.attrgetter(*names)
    return ((lambda settings: get(settings)) if len(names) > 1
            else (lambda settings: (get(settings),)))


def close_resource(resource: object) -> None:
    """The default way to let a resource go: its close(), when it has one."""
    close = getattr(resource, "close", None)
    if close is not None:
        close()


class Keyed(Generic[S, R]):
    """One resource, built on first use and rebuilt (the old one closed) when its key changes.

    Thread-safe: concurrent callers get the same resource; a build runs under the lock (callers
    wait for it rather than build twice). The replaced resource is closed after the lock is
    released, so a close that waits (for a writer pass, a pool's threads) does not hold up callers
    of the new one.
    """

    def __init__(self, key: Callable[[S], Hashable], build: Callable[[S], R],
                 close: Callable[[R], None] = close_resource) -> None:
        self._key_of, self._build, self._close = key, build, close
        self._lock = threading.Lock()
        self._held: tuple[Hashable, R] | None = None  # (key, resource) of the last build

    def get(self, settings: S) -> R:
        """The resource for these settings, built or rebuilt if its key changed."""
        key = self._key_of(settings)
        with self._lock:
            old = self._held
            if old is not None and old[0] == key:
                return old[1]
            resource = self._build(settings)  # raises: the old one stays, nothing is half replaced
            self._held = (key, resource)
        if old is not None:
            self._close(old[1])
        return resource

    def peek(self) -> R | None:
        """The resource built last, without building one (None before the first get or after
        reset)."""
        held = self._held
        return held[1] if held is not None else None

    def reset(self) -> None:
        """Close the resource and forget it; the next get builds a new one. Idempotent."""
        with self._lock:
            old, self._held = self._held, None
        if old is not None:
            self._close(old[1])


class KeyedMany(Generic[S, R]):
    """Up to `limit` resources at once, one per key (e.g. one SDK client per destination and
    timeout).

    When a new key would exceed the limit, every resource held is closed and the set starts over:
    settings changing that often are a burst of edits, and the clients of superseded values are the
    ones to drop. Thread-safe as `Keyed`; resources dropped by a reset or by the limit are closed
    after the lock is released.
    """

    def __init__(self, key: Callable[[S], Hashable], build: Callable[[S], R], limit: int,
                 close: Callable[[R], None] = close_resource) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._key_of, self._build, self._close, self.limit = key, build, close, limit
        self._lock = threading.Lock()
        self._resources: dict[Hashable, R] = {}

    def get(self, settings: S) -> R:
        """The resource for these settings' key, built if none is held for it."""
        key = self._key_of(settings)
        dropped: list[R] = []
        with self._lock:
            resource = self._resources.get(key)
            if resource is not None:
                return resource
            resource = self._build(settings)
            if len(self._resources) >= self.limit:
                dropped = list(self._resources.values())
                self._resources.clear()
            self._resources[key] = resource
        for old in dropped:
            self._close(old)
        return resource

    def __len__(self) -> int:
        with self._lock:
            return len(self._resources)

    def reset(self) -> None:
        """Close every resource held and forget them. Idempotent."""
        with self._lock:
            dropped = list(self._resources.values())
            self._resources.clear()
        for old in dropped:
            self._close(old)
