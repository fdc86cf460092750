"""The base pack: what the agent knows about the user across chats (representation and card, kept
warm per peers and scope, with the agent's model of itself when asked for), plus each session's
newest summary. A turn whose query-aware pack is not ready gets it, so even a new chat's first turn
gets cross-chat memory without waiting."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import replace

from ..bounded import BoundedMap
from ..errors import AuthError, HonchoRequestError, PermanentError
from ..gateway import queries
from ..gateway.gateway import HonchoGateway
from ..settings.config import Settings
from .cache import Submit, session_key
from .loads import load_deadline
from .pack import ContextData

EMPTY_BASE_S = 15.0


class BasePacks:
    """The base packs by (destination, peers, scope), those loading, and the sessions' summaries.
    `scope_refused(problem)` is told when a scoped load was refused and the unscoped view used."""

    def __init__(self, gateway_for: Callable[[Settings], HonchoGateway], submit: Submit,
                 scope_refused: Callable[[str | None], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._gateway_for, self._submit, self._scope_refused = gateway_for, submit, scope_refused
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # key -> (loaded at, base)
        self._bases: BoundedMap[tuple, tuple[float, ContextData]] = BoundedMap()
        self._loading: set[tuple] = set()
        self._summaries: BoundedMap[Hashable, str] = BoundedMap()  # session key -> newest summary

    def warm(self, settings: Settings, scope_id: str | None = None) -> bool:
        """Load the base pack for (peers, scope) in the background unless it is fresh or loading."""
        key = _base_key(settings, scope_id)
        with self._lock:
            known = self._bases.get(key)
            fresh = (known is not None
                     and self._monotonic() - known[0] < _base_ttl(known[1], settings))
            if key in self._loading or fresh:
                return False
            self._loading.add(key)
        if not self._submit(self._load, settings, scope_id, key):
            with self._lock:
                self._loading.discard(key)
            return False
        return True

    def data(self, settings: Settings, session_id: str, scope_id: str | None) -> ContextData | None:
        """What is known across chats, with the session's newest summary; None before the first
        load."""
        known = self._known(settings, scope_id)
        with self._lock:
            summary = self._summaries.get(session_key(settings, session_id))
        if known is None:
            return None
        return ContextData(representation=known.representation, card=list(known.card),
                           summary=summary)

    def with_self_model(self, settings: Settings, scope_id: str | None,
                        data: ContextData) -> ContextData | None:
        """`data` with the agent's model of itself from the base load; None before the first
        load."""
        known = self._known(settings, scope_id)
        if known is None:
            return None
        return replace(data, agent_representation=known.agent_representation,
                       agent_card=list(known.agent_card))

    def knows_user(self, settings: Settings, scope_id: str | None) -> bool:
        """Whether the base load found anything about the user."""
        known = self._known(settings, scope_id)
        return known is not None and bool(known.representation or known.card)

    def note_summary(self, settings: Settings, session_id: str, summary: str) -> None:
        with self._lock:
            self._summaries.put(session_key(settings, session_id), summary,
                                settings.cache_max_entries)

    def summary(self, settings: Settings, session_id: str) -> str | None:
        with self._lock:
            return self._summaries.get(session_key(settings, session_id))

    def expire(self, settings: Settings) -> None:
        """Every base pack of the settings' destination is due: reloaded at the next warm, and
        served as it was until the reload lands."""
        with self._lock:
            for key, (_, data) in list(self._bases.items()):
                if key[:2] == (settings.api_url, settings.workspace_id):
                    self._bases[key] = (-math.inf, data)

    def clear(self) -> None:
        with self._lock:
            self._bases.clear()
            self._summaries.clear()

    # -- internals -------------------------------------------------------------------------------

    def _known(self, settings: Settings, scope_id: str | None) -> ContextData | None:
        with self._lock:
            known = self._bases.get(_base_key(settings, scope_id))
        return known[1] if known is not None else None

    def _load(self, settings: Settings, scope_id: str | None, key: tuple) -> None:
        data: ContextData | None
        try:
            with load_deadline(settings, self._monotonic):
                data = self._fetch(settings, scope_id)
        except PermanentError as exc:
            # Not found: nothing known about the user yet.
            data = ContextData() if exc.code == "http_404" else None
        except HonchoRequestError:
            data = None  # kept as it was; tried again at the next turn
        with self._lock:
            self._loading.discard(key)
            if data is not None:
                self._bases.put(key, (self._monotonic(), data), settings.cache_max_entries)

    def _fetch(self, settings: Settings, scope_id: str | None) -> ContextData:
        gateway = self._gateway_for(settings)
        observer, target = settings.agent_peer_id, settings.user_peer_id
        view: queries.PeerView | None = None
        if scope_id and gateway.supports_scopes():
            try:
                view = queries.scoped_peer_view(gateway, observer, target, scope_id)
            except (AuthError, PermanentError) as exc:
                if exc.code == "http_404":
                    # The scope (or peer) does not exist yet: nothing known there, not refused.
                    raise
                self._scope_refused(f"scope unavailable: {exc.code}")
        if view is None:
            view = queries.peer_view(gateway, observer, target)
        data = ContextData(representation=view.representation, card=list(view.card))
        if settings.include_agent_representation:
            data = _with_self_model(gateway, settings,
                                    scope_id if gateway.supports_scopes() else None, data)
        return data


def _with_self_model(gateway: HonchoGateway, settings: Settings, scope_id: str | None,
                     data: ContextData) -> ContextData:
    """`data` with the agent's representation and card of itself (a scope confines the
    representation). Honcho derives nothing about a peer whose observe_me is false (the seed and
    unified presets): then only a dream or an explicitly set card gives it one. Missing (404) is an
    empty self-model."""
    try:
        own = queries.self_view(gateway, settings.agent_peer_id, scope_id)
    except PermanentError as exc:
        if exc.code != "http_404":
            raise
        return data
    return replace(data, agent_representation=own.representation or None, agent_card=list(own.card))


def _base_ttl(data: ContextData, settings: Settings) -> float:
    """How long a base pack is kept: an empty one (nothing known about the user yet, as on a new
    install) is asked again soon, since the first deliveries are about to change that."""
    return (settings.cache_ttl_s if (data.representation or data.card)
            else min(settings.cache_ttl_s, EMPTY_BASE_S))


def _base_key(settings: Settings, scope_id: str | None) -> tuple:
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id,
            scope_id, settings.include_agent_representation)
