"""Derivation-aware freshness: once the worker delivered a session's messages, what Honcho knows
is about to change, so Honcho's queue status for the session is polled in the background (at each
turn and after each step of the delivery worker, each session at most once per its interval) and,
once its derivation is done, the base packs are reloaded instead of waiting for `cache_ttl_s`. When
derivation counts as done, and the interval, are told in docs/architecture.md ("Recall").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..bounded import BoundedMap
from ..errors import HonchoRequestError
from ..gateway import queries
from ..gateway.gateway import HonchoGateway
from ..settings.config import Settings
from .cache import Submit

# A delivered session's queue status is asked at most once per FRESHNESS_POLL_S at first, then
# once per tenth of its age (most derivations end within a minute; one still running later waits
# on a busy deriver, which asking every 5 s would only load more), at most FRESHNESS_POLL_MAX_S.
FRESHNESS_POLL_S = 5.0
FRESHNESS_POLL_MAX_S = 60.0
_POLL_AGE_SHARE = 0.1
# With no derivation work ever seen, memory counts as fresh this long after delivery.
FRESH_MIN_AGE_S = 10.0
FRESHNESS_MAX_S = 600.0  # a session still deriving after this is left to the TTL
MAX_DERIVING = 1_000  # delivered sessions followed at once; the oldest are left to the TTL
MAX_DESTINATIONS = 8  # destinations whose latest turn's scope is kept


@dataclass
class _Deriving:
    """A session whose messages were delivered and whose derivation is not known to be done."""

    delivered_at: float
    polled_at: float | None = None  # when the last poll started
    checked_at: float | None = None  # when Honcho last answered one
    polling: bool = False
    seen_pending: bool = False
    pending: int | None = None  # work units waiting or running at the last poll


class Freshness:
    """The delivered sessions whose derivation is followed. `on_fresh(settings, scope_id)` is called
    when one's derivation is done: what Honcho knows at that destination changed."""

    def __init__(self, gateway_for: Callable[[Settings], HonchoGateway], submit: Submit,
                 on_fresh: Callable[[Settings, str | None], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._gateway_for, self._submit, self._on_fresh = gateway_for, submit, on_fresh
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # (destination, session) -> how its derivation stands
        self._deriving: BoundedMap[tuple[str, str], _Deriving] = BoundedMap(MAX_DERIVING)
        # destination -> the scope its latest turn recalled in, for the polls with no turn
        self._scopes: BoundedMap[str, str | None] = BoundedMap(MAX_DESTINATIONS)

    def note_delivered(self, destination: str, session_id: str) -> None:
        """The worker delivered (or found delivered) messages of this session. Cheap; any thread."""
        with self._lock:
            self._deriving.put((destination, session_id), _Deriving(self._monotonic()))

    def state(self, settings: Settings, session_id: str) -> dict[str, object]:
        """For status: `fresh`, or `deriving` with the pending work units of the last answered
        poll and how many seconds ago Honcho answered it (both None: not answered yet)."""
        with self._lock:
            entry = self._deriving.get((settings.destination(), session_id))
            if entry is None:
                return {"state": "fresh", "pending": 0, "checked_age_s": None}
            checked = (None if entry.checked_at is None
                       else max(0, round(self._monotonic() - entry.checked_at)))
            return {"state": "deriving", "pending": entry.pending, "checked_age_s": checked}

    def follow_unprompted(self, settings: Settings) -> None:
        """`follow` with no turn (the delivery worker's thread calls it after each step): a
        derivation done reloads the base pack of the destination's latest turn's scope."""
        destination = settings.destination()
        with self._lock:
            if not self._deriving:
                return
            scope_id = self._scopes.get(destination)
        self.follow(settings, scope_id)

    def follow(self, settings: Settings, scope_id: str | None) -> None:
        """Poll, in the background, the queue status of this destination's delivered sessions that
        are due."""
        now, destination = self._monotonic(), settings.destination()
        due = []
        with self._lock:
            self._scopes.put(destination, scope_id)
            for key, entry in list(self._deriving.items()):
                if key[0] != destination or entry.polling:
                    continue
                if now - entry.delivered_at > FRESHNESS_MAX_S:
                    del self._deriving[key]  # the TTL refreshes it
                elif (entry.polled_at is None
                      or now - entry.polled_at >= poll_interval_s(now - entry.delivered_at)):
                    entry.polling, entry.polled_at = True, now
                    due.append(key)
        for key in due:
            if not self._submit(self._poll, settings, key, scope_id):
                with self._lock:
                    unpolled = self._deriving.get(key)
                    if unpolled is not None:
                        unpolled.polling = False

    def _poll(self, settings: Settings, key: tuple[str, str], scope_id: str | None) -> None:
        try:
            pending: int | None = queries.pending_work(self._gateway_for(settings), key[1])
        except HonchoRequestError:
            pending = None  # asked again at the next interval
        with self._lock:
            entry = self._deriving.get(key)
            if entry is None:
                return
            entry.polling = False
            if pending is None:
                return
            entry.pending, entry.checked_at = pending, self._monotonic()
            entry.seen_pending = entry.seen_pending or pending > 0
            age = self._monotonic() - entry.delivered_at
            if pending != 0 or not (entry.seen_pending or age >= FRESH_MIN_AGE_S):
                return
            del self._deriving[key]
        self._on_fresh(settings, scope_id)


def poll_interval_s(age_s: float) -> float:
    """How long after a poll of a session delivered `age_s` ago the next one is due."""
    return min(FRESHNESS_POLL_MAX_S, max(FRESHNESS_POLL_S, age_s * _POLL_AGE_SHARE))
