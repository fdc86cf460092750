"""A map that keeps at most a number of entries, the least recently put (or moved to the end) going
first: the one way this package bounds what it remembers in memory over a long uptime — caches,
what it learned about chats, sessions and files. Forgetting the oldest entry only costs a request
or a rebuild later.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMap(OrderedDict[K, V]):
    """An ordered dict, oldest first, kept within its bound by `put`. Not thread-safe: its owner's
    lock guards it, as it would a dict. A read that counts as a use calls `move_to_end`."""

    def __init__(self, limit: int | None = None) -> None:
        """`limit`: the bound; None for a map whose bound each `put` gives (a setting that may
        change)."""
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V, limit: int | None = None) -> None:
        """Keep `value` as the newest entry, dropping the oldest past `limit` (default: the map's
        own); at least one entry is always kept."""
        bound = self.limit if limit is None else limit
        if bound is None:
            raise TypeError("this map's bound is given at each put")
        self[key] = value
        self.move_to_end(key)
        while len(self) > max(1, bound):
            self.popitem(last=False)
