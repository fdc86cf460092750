"""Recall: the memory pack a user's turn gets. Prepared early, bounded in time, never dialectic
unless the user opts in. `Recaller` composes the turn's query-aware load (cache.py: its cache and
single-flight loads), the base pack (bases.py), the context cadence (cadence.py), the dialectic note
(dialectic.py) and the refresh after derivation (freshness.py), on one bounded pool (loads.py). See
docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from ..errors import AuthError, PermanentError
from ..gateway.gateway import Context, HonchoGateway
from ..keyed import Keyed, KeyedMany, fields
from ..safety.redact import redact
from ..settings.config import Settings
from ..settings.spec import GATEWAY_FIELDS
from ..storage.marker import MarkerWatch, move_marker
from .bases import BasePacks
from .cache import RecallCache, session_key
from .cadence import Cadence
from .dialectic import Dialectic
from .freshness import Freshness
from .loads import RECALL_THREADS, Loads, load_deadline
from .pack import (
    ContextData,
    MemoryPack,
    build_pack,
    render_block,
    without_repeats,
    without_turn,
)
from .receipts import HeldBlocks, Receipt, receipt_of

MAX_GATEWAYS = 8  # recall's clients held at once (destinations × humans)
QUERY_CHARS = 2000
# Cut (at a space) before masking and redaction: a paste can be 10 MB.
_QUERY_WINDOW = 2 * QUERY_CHARS


@dataclass(frozen=True)
class RecallResult:
    block: str  # what to inject; '' for nothing
    source: str  # hit, fresh, reused, base, stale, timeout, error, disabled
    pack: MemoryPack | None = None


class Recaller:
    """One per process: the memory pack of a user's turn, from a gateway of its own (recall never
    shares delivery's circuits), the cache, the base packs and the pool that loads them. `marker`
    watches the marker beside the outbox (shared with the chats' sessions): when it moves, what
    recall holds goes."""

    def __init__(self, gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 monotonic: Callable[[], float] = time.monotonic, threads: int = RECALL_THREADS,
                 ask_gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 marker: MarkerWatch | None = None,
                 may_start: Callable[[], bool] = lambda: True) -> None:
        self._monotonic = monotonic
        # One per destination and human (chats of several humans take turns), up to MAX_GATEWAYS;
        # past that the settings changed, and the gateways of former values are closed.
        self._gateway: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            fields(*GATEWAY_FIELDS, "recall_timeout_s"), gateway_factory or _default_gateway,
            MAX_GATEWAYS)
        # The dialectic's requests time out at ask_timeout_s each, but the session get-or-create
        # before them uses the client's timeout: the SDK's, not recall's short deadline.
        self._ask_gateway: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            fields(*GATEWAY_FIELDS, "sdk_timeout_s"),
            ask_gateway_factory or HonchoGateway.for_settings, MAX_GATEWAYS)
        self._cache: Keyed[Settings, RecallCache] = Keyed(
            fields("cache_ttl_s", "cache_max_entries"),
            lambda s: RecallCache(s.cache_ttl_s, s.cache_max_entries, self._monotonic))
        self._loads = Loads(threads, may_start=may_start)  # held: no load starts
        self._dialectic = Dialectic(self._ask_gateway.get, monotonic)
        self._bases = BasePacks(self._gateway.get, self._loads.submit, self._scope_refused,
                                monotonic)
        self._cadence = Cadence()
        self._freshness = Freshness(self._gateway.get, self._loads.submit, self.memory_changed,
                                    monotonic)
        # What turns got, for their receipts; dropped with the cache.
        self._held = HeldBlocks(monotonic)
        self._marker = marker or MarkerWatch()
        self._marker.listen(self._drop_held)
        self._scope_lock = threading.Lock()
        # Why the last scoped load fell back to the unscoped view.
        self.scope_problem: str | None = None

    def prefetch(self, settings: Settings, session_id: str, user_text: str,
                 scope_id: str | None = None, mask: Callable[[str], str] | None = None,
                 secrets: Mapping[str, str] | None = None, ask_dialectic: bool = True) -> bool:
        """Start this message's query-aware load, and keep the base pack warm; returns at once (safe
        on the event loop: masking, redaction and the request all run on the pool). With the
        dialectic on, the turn counts toward its note unless `ask_dialectic` is false
        (chats.rules.asks_dialectic)."""
        if not settings.recall_enabled:
            return False
        load = self._cadence.count_turn(settings, session_key(settings, session_id))
        return self._loads.submit(self._prefetch, settings, session_id, user_text, scope_id, mask,
                                  secrets, load, ask_dialectic)

    def warm(self, settings: Settings, scope_id: str | None = None) -> bool:
        """Load the base pack for (peers, scope) in the background unless it is fresh or loading."""
        return settings.recall_enabled and self._bases.warm(settings, scope_id)

    def recall(self, settings: Settings, session_id: str, user_text: str, template: str,
               scope_id: str | None = None, mask: Callable[[str], str] | None = None,
               wait_s: float | None = None, secrets: Mapping[str, str] | None = None,
               deliberate: bool = False, load: bool = True) -> RecallResult:
        """The rendered block for this turn: the query-aware pack when it is ready within `wait_s`
        (default `recall_wait_s`, never past `recall_timeout_s`), else the base pack, else the
        session's last pack. Never raises on Honcho. `recall_enabled` switches automatic recall
        only: a `deliberate` one (the agent asked, through the tool) runs regardless. Not to
        `load` (a turn nobody typed: a nudge, an empty message): what is held, the session's last
        pack else the base pack, and no request made or started."""
        if not settings.recall_enabled and not deliberate:
            return RecallResult("", "disabled")
        limit = settings.recall_timeout_s
        wait = min(limit, settings.recall_wait_s if wait_s is None else wait_s)
        gateway, cache = self._parts(settings)
        self._marker.follow(settings)
        own = session_key(settings, session_id)
        data: ContextData | None
        if not load or (not deliberate and not self._cadence.loads_now(settings, own)):
            data, source = cache.last(own), "reused"
        else:
            words, cut = self._words(user_text, mask, secrets)
            query = _as_query(words, settings)
            data, source = cache.get(
                cache_key(settings, session_id, query, scope_id), own,
                lambda: self._load(gateway, settings, session_id, query, scope_id),
                wait, self._loads.submit)
            if data is not None:
                data = without_turn(data, words, settings.user_peer_id, cut)
        if load:
            self._freshness.follow(settings, scope_id)
        pack = self._pack(settings, session_id, data, scope_id) if data is not None else None
        if source not in ("hit", "fresh", "reused") or pack is None:
            base = self._bases.data(settings, session_id, scope_id)
            base_pack = (self._pack(settings, session_id, base, scope_id, include_messages=False)
                         if base else None)
            if base_pack is not None and not base_pack.empty:
                pack, source = base_pack, "base"
        if load:
            self.warm(settings, scope_id)
        return RecallResult(render_block(pack, template) if pack else "", source, pack)

    def receipt(self, settings: Settings, result: RecallResult) -> Receipt:
        """The receipt of a turn that got `result`: labels and counts, its block held (for the
        cache's lifetime, until the cache is cleared) under the receipt's id."""
        return receipt_of(self._held.hold(settings, result.block), result.source, result.pack,
                          result.block)

    def held_block(self, settings: Settings, receipt_id: str) -> str | None:
        """The block the turn of that receipt got ('' for nothing) while it is held; None once it
        is gone (expired, the cache cleared here or by another process sharing the outbox)."""
        self._marker.follow(settings)
        return self._held.get(settings, receipt_id)

    def base_preview(self, settings: Settings, session_id: str, scope_id: str | None,
                     template: str) -> str | None:
        """The base pack a turn of this session would get, rendered as its block ('' for an empty
        pack), or None before the first base load for these peers and scope. Reads what is loaded:
        no request, no load started, nothing counted."""
        base = self._bases.data(settings, session_id, scope_id)
        if base is None:
            return None
        return render_block(
            self._pack(settings, session_id, base, scope_id, include_messages=False), template)

    def gateway(self, settings: Settings) -> HonchoGateway:
        """Recall's gateway (deadline-bound client), also used by status for scope progress."""
        return self._parts(settings)[0]

    def clear_cache(self, settings: Settings | None = None) -> int:
        """Forget every cached pack; returns how many there were. With settings, other processes
        sharing the outbox folder (Agent Zero, the command line) forget theirs at their next recall
        too."""
        if settings is not None:
            move_marker(settings)
        self._forget_loaded()
        cache = self._cache.peek()
        return cache.clear() if cache is not None else 0

    def memory_changed(self, settings: Settings, scope_id: str | None = None) -> None:
        """What Honcho knows at this destination changed (derivation done, the agent wrote memory):
        every base pack there is reloaded now, in the background, and served as it was until the
        reload lands."""
        self._bases.expire(settings)
        self.warm(settings, scope_id)

    def cache_entries(self) -> int:
        cache = self._cache.peek()
        return cache.entries() if cache is not None else 0

    def cache_counters(self) -> dict[str, int]:
        """Hits, loads, stale packs served, timeouts and errors of the current cache, for status."""
        cache = self._cache.peek()
        return dict(cache.counters) if cache is not None else {}

    def recent_loads(self) -> list[str]:
        """How the latest loads a turn waited for ended (hit, fresh, timeout, error), oldest first,
        for status."""
        cache = self._cache.peek()
        return list(cache.recent) if cache is not None else []

    def prewarm(self, settings: Settings, session_id: str, scope_id: str | None = None) -> bool:
        """A new chat: start its dialectic note before its first turn (when the dialectic and its
        prewarm are on; rate-limited). Which chats are new is the caller's to say. Returns at
        once."""
        return settings.recall_enabled and self._dialectic.prewarm(settings, session_id, scope_id,
                                                                   self._loads.submit)

    def note_delivered(self, destination: str, session_id: str) -> None:
        """The worker delivered (or found delivered) messages of this session: Honcho's derivation
        of them is about to change what it knows. Cheap; any thread."""
        self._freshness.note_delivered(destination, session_id)

    def freshness(self, settings: Settings, session_id: str) -> dict[str, object]:
        """For status: `fresh`, or `deriving` with the pending work units of the last answered
        poll and its age in seconds (both None: not answered yet)."""
        return self._freshness.state(settings, session_id)

    def follow_derivation(self, settings: Settings) -> None:
        """Poll, on the pool, the queue status of the delivered sessions of this destination that
        are due, with no turn (the delivery worker's thread calls it after each step). Cheap when
        nothing is deriving."""
        self._freshness.follow_unprompted(settings)

    def dialectic_counters(self) -> dict[str, int]:
        """The dialectic layer's counters, for status."""
        return self._dialectic.counters()

    def unfinished(self) -> list[Future]:
        """The background loads not finished, for whoever must wait for them (a benchmark, a
        test)."""
        return self._loads.unfinished()

    def close(self, timeout_s: float = 0.0) -> bool:
        """Cancel the loads not started, wait at most `timeout_s` for the running ones (each ends
        within its deadline), and close the clients; True when the pool's threads have ended."""
        self._marker.unlisten(self._drop_held)
        ended = self._loads.close(timeout_s)
        self._gateway.reset()
        self._ask_gateway.reset()
        self._cache.reset()
        return ended

    # -- internals -------------------------------------------------------------------------------

    def _drop_held(self) -> None:
        """The marker moved (a process sharing the outbox cleared its cache or forgot a chat)."""
        cache = self._cache.peek()
        if cache is not None:
            cache.clear()
        self._forget_loaded()

    def _forget_loaded(self) -> None:
        """Drop what was loaded beside the cache: base packs, summaries, dialectic notes, the blocks
        behind receipts."""
        self._dialectic.clear()
        self._bases.clear()
        self._held.clear()

    def _scope_refused(self, problem: str | None) -> None:
        with self._scope_lock:
            self.scope_problem = problem

    def _prefetch(self, settings: Settings, session_id: str, user_text: str, scope_id: str | None,
                  mask: Callable[[str], str] | None, secrets: Mapping[str, str] | None,
                  load: bool, ask_dialectic: bool) -> None:
        gateway, cache = self._parts(settings)
        self._marker.follow(settings)
        own = session_key(settings, session_id)
        query = _as_query(self._words(user_text, mask, secrets)[0], settings)
        if load:
            cache.start(cache_key(settings, session_id, query, scope_id), own,
                        lambda: self._load(gateway, settings, session_id, query, scope_id))
        self.warm(settings, scope_id)
        if settings.dialectic_enabled and ask_dialectic:
            self._dialectic.on_user_turn(settings, session_id, scope_id, query,
                                         self._bases.summary(settings, session_id),
                                         self._user_known(settings, own, scope_id, cache),
                                         self._loads.submit)

    def _user_known(self, settings: Settings, own: Hashable, scope_id: str | None,
                    cache: RecallCache) -> bool:
        """Whether Honcho has told anything about the user yet (else the dialectic asks its cold
        question); `own`: the session's key."""
        last = cache.peek_last(own)
        return self._bases.knows_user(settings, scope_id) or (
            last is not None and bool(last.representation or last.card))

    def _words(self, user_text: str, mask: Callable[[str], str] | None,
               secrets: Mapping[str, str] | None) -> tuple[str, bool]:
        """The message on one line, masked, redacted and cut to QUERY_CHARS (at a space); whether
        it was cut. '' when it cannot be redacted."""
        text = (user_text or "")[:_QUERY_WINDOW]
        cut = len(user_text or "") > _QUERY_WINDOW
        if cut and " " in text:
            # Never end inside a word: a cut credential would not be matched.
            text = text.rsplit(" ", 1)[0]
        try:
            # Redacted with its line breaks (a key wrapped onto a second line is found whole), then
            # made one line: a search query, not the message.
            text = redact(mask(text) if mask else text, secrets)
        except Exception:  # RedactionError, or the host's masker failing
            return "", False  # fail closed: recall without a query rather than send unredacted text
        text = " ".join(text.split())
        return text[:QUERY_CHARS], cut or len(text) > QUERY_CHARS

    def _parts(self, settings: Settings) -> tuple[HonchoGateway, RecallCache]:
        return self._gateway.get(settings), self._cache.get(settings)

    def _load(self, gateway: HonchoGateway, settings: Settings, session_id: str, query: str,
              scope_id: str | None) -> ContextData:
        """The query-aware load: the session's context, scoped when the chat has a scope (a refused
        scope falls back to the unscoped view and says so in status; it never touches delivery's
        circuits)."""
        def fetch(scope: str | None) -> Context:
            return gateway.context(session_id, query=query, tokens=settings.max_context_tokens,
                                   target=settings.user_peer_id,
                                   perspective=settings.agent_peer_id, scope=scope,
                                   top_k=settings.search_top_k,
                                   max_conclusions=settings.max_conclusions,
                                   limit_to_session=settings.recall_limit_to_session)

        context = None
        with load_deadline(settings, self._monotonic):
            if scope_id and gateway.supports_scopes():
                try:
                    context = fetch(scope_id)
                    self._scope_refused(None)
                except (AuthError, PermanentError) as exc:
                    self._scope_refused(f"scope unavailable: {exc.code}")
            if context is None:
                context = fetch(None)
        data = _pack_input(context)
        if data.summary:
            self._bases.note_summary(settings, session_id, data.summary)
        return data

    def _pack(self, settings: Settings, session_id: str, data: ContextData, scope_id: str | None,
              include_messages: bool | None = None) -> MemoryPack:
        """The turn's pack from loaded data, with the agent's self-model from the base load when
        asked for and the session's newest dialectic note when there is one; each conclusion and
        card fact once (pack.without_repeats)."""
        share = 0.0
        if settings.include_agent_representation:
            with_self = self._bases.with_self_model(settings, scope_id, data)
            if with_self is not None:
                data, share = with_self, settings.agent_representation_share
        return build_pack(without_repeats(data), settings.max_context_tokens,
                          (settings.recall_include_messages if include_messages is None
                           else include_messages),
                          settings.user_peer_id, agent_share=share,
                          note=self._dialectic.note(settings, session_id))


def _as_query(words: str, settings: Settings) -> str:
    """The turn's words as its search query: none when shorter than the minimum (nothing but
    spaces, say)."""
    return words if len(words) >= max(1, settings.recall_min_query_chars) else ""


def _pack_input(context: Context) -> ContextData:
    """The pack's input from what the gateway returned."""
    return ContextData(representation=context.representation, card=list(context.card),
                       summary=context.summary, messages=list(context.messages))


def cache_key(settings: Settings, session_id: str, query: str, scope_id: str | None) -> tuple:
    """Every input that changes what Honcho would return, with the query as a digest."""
    digest = hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id,
            session_id, settings.max_context_tokens, digest, scope_id, settings.search_top_k,
            settings.max_conclusions, settings.recall_include_messages,
            settings.recall_limit_to_session)


def _default_gateway(settings: Settings) -> HonchoGateway:
    # Recall's own client times out at the recall deadline: a hung Honcho costs the turn no more.
    return HonchoGateway.for_settings(settings, settings.recall_timeout_s)
