"""Recall: the query-aware memory pack injected before a user turn. Bounded in time, cached, never dialectic.

The typed text (redacted) is the search query for `Session.context`, from the agent's perspective
about the user, or through the chat's scope when it has one. A refused scoped call (a key that is not
workspace-level, an SDK that rejects the combination) falls back to the unscoped view and says so in
status; it never touches the delivery worker's circuits.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .config import Settings
from .errors import AuthError, PermanentError
from .honcho_gateway import HonchoGateway
from .recall_cache import RecallCache
from .recall_pack import MemoryPack, build_pack, render_block
from .redact import RedactionError, redact


@dataclass(frozen=True)
class RecallResult:
    block: str  # what to inject; '' for nothing
    source: str  # hit, fresh, stale, timeout, error, disabled
    pack: MemoryPack | None = None


class Recaller:
    """One per process: a gateway of its own (recall never shares delivery's circuits) and the cache."""

    def __init__(self, gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._gateway_factory = gateway_factory or _default_gateway
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._gateway: HonchoGateway | None = None
        self._gateway_key: tuple | None = None
        self._cache: RecallCache | None = None
        self._epoch_seen: int | None = None
        self.scope_problem: str | None = None

    def recall(self, settings: Settings, session_id: str, user_text: str, template: str,
               scope_id: str | None = None) -> RecallResult:
        """The rendered block for this turn, waiting at most `recall_timeout_s`; never raises on Honcho."""
        if not settings.recall_enabled:
            return RecallResult("", "disabled")
        query = self._query(user_text, settings)
        gateway, cache = self._parts(settings)
        self._follow_epoch(settings, cache)
        key = cache_key(settings, session_id, query, scope_id)
        pack, source = cache.get(key, (settings.destination(), session_id),
                                 lambda: self._load(gateway, settings, session_id, query, scope_id),
                                 settings.recall_timeout_s)
        return RecallResult(render_block(pack, template) if pack else "", source, pack)

    def gateway(self, settings: Settings) -> HonchoGateway:
        """Recall's gateway (deadline-bound client), also used by status for scope progress."""
        return self._parts(settings)[0]

    def clear_cache(self, settings: Settings | None = None) -> int:
        """Forget every cached pack; returns how many there were. With settings, other processes sharing
        the outbox folder (Agent Zero, the command line) forget theirs at their next recall too."""
        if settings is not None:
            bump_epoch(settings)
        with self._lock:
            return self._cache.clear() if self._cache is not None else 0

    def _follow_epoch(self, settings: Settings, cache: RecallCache) -> None:
        epoch = read_epoch(settings)
        if self._epoch_seen is not None and epoch != self._epoch_seen:
            cache.clear()
        self._epoch_seen = epoch

    def cache_entries(self) -> int:
        with self._lock:
            return self._cache.entries() if self._cache is not None else 0

    def cache_counters(self) -> dict[str, int]:
        """Hits, loads, stale packs served, timeouts and errors of the current cache, for status."""
        with self._lock:
            return dict(self._cache.counters) if self._cache is not None else {}

    def close(self) -> None:
        with self._lock:
            if self._gateway is not None:
                self._gateway.close()
            self._cache = self._gateway = None

    def _query(self, user_text: str, settings: Settings) -> str:
        text = " ".join((user_text or "").split())
        if len(text) < max(1, settings.recall_min_query_chars):
            return ""
        try:
            return redact(text)[:2000]  # a search query, not the message: bounded
        except RedactionError:
            return ""  # fail closed: recall without a query rather than send unredacted text

    def _parts(self, settings: Settings) -> tuple[HonchoGateway, RecallCache]:
        with self._lock:
            key = (settings.api_url, settings.workspace_id, settings.recall_timeout_s)
            if self._gateway is None or key != self._gateway_key:
                if self._gateway is not None:
                    self._gateway.close()
                self._gateway, self._gateway_key = self._gateway_factory(settings), key
            if (self._cache is None or self._cache.ttl_s != settings.cache_ttl_s
                    or self._cache.max_entries != settings.cache_max_entries):
                self._cache = RecallCache(settings.cache_ttl_s, settings.cache_max_entries, self._monotonic)
            return self._gateway, self._cache

    def _load(self, gateway: HonchoGateway, settings: Settings, session_id: str, query: str,
              scope_id: str | None) -> MemoryPack:
        common = dict(query=query, tokens=settings.max_context_tokens, target=settings.user_peer_id,
                      perspective=settings.agent_peer_id, top_k=settings.search_top_k,
                      max_conclusions=settings.max_conclusions, limit_to_session=settings.recall_limit_to_session)
        data = None
        if scope_id and gateway.supports_scopes():
            try:
                data = gateway.context(session_id, scope=scope_id, **common)
                self.scope_problem = None
            except (AuthError, PermanentError) as exc:
                self.scope_problem = f"scope unavailable: {exc.code}"
        if data is None:
            data = gateway.context(session_id, **common)
        return build_pack(data, settings.max_context_tokens, settings.recall_include_messages, settings.user_peer_id)


def epoch_path(settings: Settings) -> str:
    """A marker beside the outbox whose change tells every process to drop its recall cache."""
    return os.path.join(os.path.dirname(settings.outbox_path), "recall-cache.epoch")


def read_epoch(settings: Settings) -> int:
    try:
        return os.stat(epoch_path(settings)).st_mtime_ns
    except OSError:
        return 0


def bump_epoch(settings: Settings) -> None:
    try:
        with open(epoch_path(settings), "w", encoding="utf-8") as handle:
            handle.write(str(time.time_ns()))
        os.utime(epoch_path(settings), ns=(time.time_ns(), time.time_ns()))
    except OSError:
        pass  # no shared folder (yet): this process's cache is still cleared


def cache_key(settings: Settings, session_id: str, query: str, scope_id: str | None) -> tuple:
    """Every input that changes what Honcho would return, with the query as a digest."""
    digest = hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id, session_id,
            settings.max_context_tokens, digest, scope_id, settings.search_top_k, settings.max_conclusions,
            settings.recall_include_messages, settings.recall_limit_to_session)


def _default_gateway(settings: Settings) -> HonchoGateway:
    # Recall's own client times out at the recall deadline: a hung Honcho costs the turn no more.
    return HonchoGateway.for_settings(settings, settings.recall_timeout_s)
