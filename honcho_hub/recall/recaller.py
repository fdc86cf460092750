"""Recall: the memory pack injected before a user turn. Prepared early, bounded in time, never dialectic.

The typed text (masked, redacted) is the search query for `Session.context`, from the agent's perspective
about the user, or through the chat's scope when it has one. The query-aware load starts when the user's
message is captured (`prefetch`), the earliest moment the query is known, so it overlaps Agent Zero's own
prompt building; the recall hook then waits for it at most `recall_wait_s`. When it is not ready in time,
the turn gets the **base pack**: what the agent knows about the user across chats (representation and
card, kept warm per peers and scope) plus the session's latest summary — so even a new chat's first turn
gets cross-chat memory without waiting. A refused scoped call (a key that is not workspace-level, an SDK
that rejects the combination) falls back to the unscoped view and says so in status; it never touches
the delivery worker's circuits. Loads run on a small bounded pool; a slow server holds a pool thread, never
the turn.

Memory controls: the query-aware load is made every `context_cadence` user turns (counted at prefetch);
the turns between reuse the session's last load without a request. With `include_agent_representation`
the base load also fetches the agent's model of itself, which every pack then carries in its own share of
the budget. With `dialectic_enabled`, each prefetched turn tells the dialectic layer (`dialectic.py`),
which computes its note in the background on this pool; the pack carries the newest ready note. The
cache holds what Honcho returned; the pack is built at each turn.

Derivation-aware freshness: when the worker has delivered a session's messages (`note_delivered`), what
Honcho knows is about to change. Recall of that destination then asks Honcho's queue status for that
session — in the background, at most once per FRESHNESS_POLL_S — and once its derivation is done refreshes
the base pack instead of waiting for `cache_ttl_s`. Derivation is queued after the messages are stored,
so "done" needs work seen pending and then drained, or FRESH_MIN_AGE_S without any work seen; after
FRESHNESS_MAX_S the TTL is the fallback. Nothing is polled for a session nothing was delivered to.

A chat's session after a forget: chats/forget.py moves the chat to its next generation, kept in the
outbox, and moves the marker beside the outbox (the one clearing the cache moves), so that every process
sharing the outbox hears of it. `chat_session` names the chat's current session from memory: what a forget
in this process told it (`chat_forgotten`), or what it read from the outbox, on a reader thread of its own,
when the chat was first named and again once the marker moved. On Agent Zero's event loop it only looks
(until the read lands, the generation last known is named: the first one for a chat not read yet); the
threads that serve a turn, the tool and status wait a bounded time for the read.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_until_done
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from ..bounded import BoundedMap
from ..errors import AuthError, DeliveryError, OutboxError, PermanentError
from ..gateway import deadline, queries
from ..gateway.gateway import Context, HonchoGateway
from ..keyed import Keyed, KeyedMany, fields
from ..names import session_for, session_id_for
from ..safety.redact import redact
from ..settings.config import Settings
from ..settings.spec import GATEWAY_FIELDS
from ..storage.marker import move_marker, read_marker
from ..storage.outbox import with_existing_outbox
from .cache import RecallCache
from .dialectic import Dialectic
from .pack import ContextData, MemoryPack, build_pack, render_block

RECALL_THREADS = 6
MAX_QUEUED_LOADS = 32  # beyond this, a load is not started: the turn gets the base pack
EMPTY_BASE_S = 15.0
FRESHNESS_POLL_S = 5.0  # at most one queue-status request per delivered session per this many seconds
FRESH_MIN_AGE_S = 10.0  # with no derivation work ever seen, memory counts as fresh this long after delivery
FRESHNESS_MAX_S = 600.0  # a session still deriving after this is left to the TTL
MAX_GATEWAYS = 8  # recall's clients held at once (destinations × humans)
MAX_DERIVING = 1_000  # delivered sessions followed at once; the oldest are left to the TTL
MAX_CHATS = 10_000  # chats whose generation is kept in memory; the least recently learned go first
QUERY_CHARS = 2000
_QUERY_WINDOW = 2 * QUERY_CHARS  # cut (at a space) before masking and redaction: a paste can be 10 MB


@dataclass
class _Deriving:
    """A session whose messages were delivered and whose derivation is not known to be done."""

    delivered_at: float
    polled_at: float | None = None
    polling: bool = False
    seen_pending: bool = False
    pending: int | None = None  # work units waiting or running at the last poll


@dataclass(frozen=True)
class RecallResult:
    block: str  # what to inject; '' for nothing
    source: str  # hit, fresh, reused, base, stale, timeout, error, disabled
    pack: MemoryPack | None = None


class Recaller:
    """One per process: a gateway of its own (recall never shares delivery's circuits), the cache, the base
    packs and the pool that loads them."""

    def __init__(self, gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                 monotonic: Callable[[], float] = time.monotonic, threads: int = RECALL_THREADS,
                 ask_gateway_factory: Callable[[Settings], HonchoGateway] | None = None) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # One per destination and human (chats of several humans take turns), up to MAX_GATEWAYS; past that
        # the settings changed, and the gateways of former values are closed.
        self._gateway: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            fields(*GATEWAY_FIELDS, "recall_timeout_s"), gateway_factory or _default_gateway, MAX_GATEWAYS)
        # The dialectic's requests time out at ask_timeout_s each, but the session get-or-create before them
        # uses the client's timeout: the SDK's, not recall's short deadline.
        self._ask_gateway: KeyedMany[Settings, HonchoGateway] = KeyedMany(
            fields(*GATEWAY_FIELDS, "sdk_timeout_s"), ask_gateway_factory or HonchoGateway.for_settings,
            MAX_GATEWAYS)
        self._dialectic = Dialectic(self._ask_gateway.get, monotonic)
        self._cache: Keyed[Settings, RecallCache] = Keyed(
            fields("cache_ttl_s", "cache_max_entries"),
            lambda s: RecallCache(s.cache_ttl_s, s.cache_max_entries, self._monotonic))
        self._epoch_seen: int | None = None
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="honcho-hub-recall")
        self._queued = 0  # submitted, not started
        self._unfinished = 0  # submitted, not finished
        self._idle = threading.Condition(self._lock)
        # Bounded by cache_max_entries, given at each put (a setting that may change).
        self._bases: BoundedMap[tuple, tuple[float, ContextData]] = BoundedMap()  # (peers, scope) -> base
        self._bases_loading: set[Hashable] = set()
        self._summaries: BoundedMap[Hashable, str] = BoundedMap()  # session key -> newest summary
        self._turns: BoundedMap[Hashable, int] = BoundedMap()  # session key -> user turns prefetched
        # (destination, session) -> its derivation, followed since delivery
        self._deriving: BoundedMap[tuple[str, str], _Deriving] = BoundedMap(MAX_DERIVING)
        # (outbox, destination, chat) -> (how often the chat was forgotten, the marker when that was learned)
        self._generations: BoundedMap[tuple[str, str, str], tuple[int, int]] = BoundedMap(MAX_CHATS)
        self._generation_reads: dict[tuple[str, str, str], Future] = {}
        # Reads of the outbox on a thread of their own: a hung Honcho holding every pool thread delays no read.
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="honcho-hub-recall-chats")
        self.scope_problem: str | None = None

    def prefetch(self, settings: Settings, session_id: str, user_text: str, scope_id: str | None = None,
                 mask: Callable[[str], str] | None = None, secrets: Mapping[str, str] | None = None) -> bool:
        """Start this message's query-aware load, and keep the base pack warm; returns at once (safe on
        the event loop: masking, redaction and the request all run on the pool)."""
        if not settings.recall_enabled:
            return False
        load = self._count_turn(settings, session_id)
        return self._submit(self._prefetch, settings, session_id, user_text, scope_id, mask, secrets, load)

    def warm(self, settings: Settings, scope_id: str | None = None) -> bool:
        """Load the base pack for (peers, scope) in the background unless it is fresh or loading."""
        if not settings.recall_enabled:
            return False
        key = _base_key(settings, scope_id)
        with self._lock:
            known = self._bases.get(key)
            if key in self._bases_loading or (known and self._monotonic() - known[0] < _base_ttl(known[1], settings)):
                return False
            self._bases_loading.add(key)
        if not self._submit(self._load_base, settings, scope_id, key):
            with self._lock:
                self._bases_loading.discard(key)
            return False
        return True

    def recall(self, settings: Settings, session_id: str, user_text: str, template: str,
               scope_id: str | None = None, mask: Callable[[str], str] | None = None,
               wait_s: float | None = None, secrets: Mapping[str, str] | None = None,
               deliberate: bool = False) -> RecallResult:
        """The rendered block for this turn: the query-aware pack when it is ready within `wait_s`
        (default `recall_wait_s`, never past `recall_timeout_s`), else the base pack, else the session's
        last pack. Never raises on Honcho. `recall_enabled` switches automatic recall only: a
        `deliberate` one (the agent asked, through the tool) runs regardless."""
        if not settings.recall_enabled and not deliberate:
            return RecallResult("", "disabled")
        limit = settings.recall_timeout_s
        wait = min(limit, settings.recall_wait_s if wait_s is None else wait_s)
        gateway, cache = self._parts(settings)
        self._follow_epoch(settings, cache)
        session_key = (settings.destination(), session_id)
        data: ContextData | None
        if not deliberate and not self._context_turn(settings, session_key):
            data, source = cache.last(session_key), "reused"
        else:
            query = self._query(user_text, settings, mask, secrets)
            data, source = cache.get(cache_key(settings, session_id, query, scope_id), session_key,
                                     lambda: self._load(gateway, settings, session_id, query, scope_id),
                                     wait, self._submit)
        self._follow_derivation(settings, scope_id)
        pack = self._pack(settings, session_id, data, scope_id) if data is not None else None
        if source not in ("hit", "fresh", "reused") or pack is None:
            base = self._base_data(settings, session_id, scope_id)
            base_pack = self._pack(settings, session_id, base, scope_id, include_messages=False) if base else None
            if base_pack is not None and not base_pack.empty:
                pack, source = base_pack, "base"
        self.warm(settings, scope_id)
        return RecallResult(render_block(pack, template) if pack else "", source, pack)

    def base_preview(self, settings: Settings, session_id: str, scope_id: str | None, template: str) -> str | None:
        """The base pack a turn of this session would get, rendered as its block ('' for an empty pack), or
        None before the first base load for these peers and scope. Reads what is loaded: no request, no
        load started, nothing counted."""
        base = self._base_data(settings, session_id, scope_id)
        if base is None:
            return None
        return render_block(self._pack(settings, session_id, base, scope_id, include_messages=False), template)

    def gateway(self, settings: Settings) -> HonchoGateway:
        """Recall's gateway (deadline-bound client), also used by status for scope progress."""
        return self._parts(settings)[0]

    def clear_cache(self, settings: Settings | None = None) -> int:
        """Forget every cached pack; returns how many there were. With settings, other processes sharing
        the outbox folder (Agent Zero, the command line) forget theirs at their next recall too."""
        if settings is not None:
            move_marker(settings)
        self._forget_loaded()
        cache = self._cache.peek()
        return cache.clear() if cache is not None else 0

    def _follow_epoch(self, settings: Settings, cache: RecallCache) -> None:
        epoch = read_marker(settings)
        if self._epoch_seen is not None and epoch != self._epoch_seen:
            cache.clear()
            self._forget_loaded()
        self._epoch_seen = epoch

    def _forget_loaded(self) -> None:
        """Drop what was loaded beside the cache: base packs, summaries, dialectic notes."""
        self._dialectic.clear()
        with self._lock:
            self._bases.clear()
            self._summaries.clear()

    def cache_entries(self) -> int:
        cache = self._cache.peek()
        return cache.entries() if cache is not None else 0

    def cache_counters(self) -> dict[str, int]:
        """Hits, loads, stale packs served, timeouts and errors of the current cache, for status."""
        cache = self._cache.peek()
        return dict(cache.counters) if cache is not None else {}

    def prewarm(self, settings: Settings, session_id: str, scope_id: str | None = None) -> bool:
        """A new chat: start its dialectic note before its first turn (when the dialectic and its prewarm are
        on; rate-limited). Which chats are new is the caller's to say. Returns at once."""
        return settings.recall_enabled and self._dialectic.prewarm(settings, session_id, scope_id, self._submit)

    def note_delivered(self, destination: str, session_id: str) -> None:
        """The worker delivered (or found delivered) messages of this session: Honcho's derivation of them
        is about to change what it knows. Cheap; any thread."""
        with self._lock:
            self._deriving.put((destination, session_id), _Deriving(self._monotonic()))

    def freshness(self, settings: Settings, session_id: str) -> dict[str, object]:
        """For status: `fresh`, or `deriving` with the pending work units of the last poll (None: not
        polled yet)."""
        with self._lock:
            entry = self._deriving.get((settings.destination(), session_id))
        if entry is None:
            return {"state": "fresh", "pending": 0}
        return {"state": "deriving", "pending": entry.pending}

    def dialectic_counters(self) -> dict[str, int]:
        """The dialectic layer's counters, for status."""
        return self._dialectic.counters()

    def chat_session(self, settings: Settings, chat_id: str, project: str | None = None, wait_s: float = 0.0) -> str:
        """The Honcho session a chat's turns name now (limits.session_for): once the chat was forgotten, its
        current generation's. With `wait_s` 0 — Agent Zero's event loop — only memory is looked at: a chat not
        read yet, or read before the marker beside the outbox moved, is named with the generation last known
        (the first for a chat never read) while the reader thread reads it. Other threads pass a bound: the
        marker is followed, and the read waited for that long at most."""
        session = session_for(settings.session_strategy, chat_id, project)
        if session != session_id_for(chat_id):
            return session  # a project's or the global session: shared with other chats, never forgotten
        if wait_s > 0:
            self._follow_epoch(settings, self._cache.get(settings))
        key = _chat_key(settings, chat_id)
        with self._lock:
            known = self._generations.get(key)
            current = known is not None and self._epoch_seen in (None, known[1])
        if not current:
            reading = self._read_generation(settings, key)
            if reading is not None and wait_s > 0:
                wait_until_done([reading], wait_s)  # not read in time: the generation last known
                with self._lock:
                    known = self._generations.get(key)
        return session_id_for(chat_id, known[0]) if known is not None else session

    def chat_forgotten(self, settings: Settings, chat_id: str, generation: int) -> None:
        """This process forgot the chat (chats/forget.py moved it to `generation` and the marker): its turns
        name the new session from now on, without waiting for a read. Reads the marker (a `stat`)."""
        self._learn_generation(_chat_key(settings, chat_id), generation, read_marker(settings))

    def close(self, wait: bool = False) -> None:
        """Cancel the loads not started and close the clients; with `wait`, once the running loads
        (each within its deadline) and the pools' threads have ended."""
        self._pool.shutdown(wait=wait, cancel_futures=True)
        self._reader.shutdown(wait=wait, cancel_futures=True)
        self._gateway.reset()
        self._ask_gateway.reset()
        self._cache.reset()

    # -- internals -------------------------------------------------------------------------------

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no background load is queued or running (benchmarks, tests); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout_s)

    def _submit(self, work: Callable, *args) -> bool:
        """Run `work(*args)` on the pool unless too many loads wait already; False when not started."""
        with self._lock:
            if self._queued >= MAX_QUEUED_LOADS:
                return False
            self._queued += 1
            self._unfinished += 1

        def run() -> None:
            with self._lock:
                self._queued -= 1
            try:
                work(*args)
            finally:
                self._done()
        try:
            self._pool.submit(run)
        except RuntimeError:  # the pool was shut down (the plugin is being reloaded)
            with self._lock:
                self._queued -= 1
            self._done()
            return False
        return True

    def _done(self) -> None:
        with self._idle:
            self._unfinished -= 1
            self._idle.notify_all()

    def _read_generation(self, settings: Settings, key: tuple[str, str, str]) -> Future | None:
        """The read of the chat's generation on the reader thread, started unless one is under way; None when
        none could start (too many waiting, or the reader was shut down)."""
        with self._lock:
            reading = self._generation_reads.get(key)
            if reading is not None or len(self._generation_reads) >= MAX_QUEUED_LOADS:
                return reading
            try:
                # Under the lock: the read ends (and leaves the map) only once it is in the map.
                reading = self._reader.submit(self._load_generation, settings, key)
            except RuntimeError:  # shut down: the plugin is being reloaded
                return None
            self._generation_reads[key] = reading
            self._unfinished += 1
        return reading

    def _load_generation(self, settings: Settings, key: tuple[str, str, str]) -> None:
        try:
            # The marker first: a forget committed after this read moves the marker after this look at it,
            # so the value read is followed up at the next turn.
            epoch = read_marker(settings)
            try:
                generation = with_existing_outbox(settings, lambda box: box.chat_generation(key[1], key[2]), 0)
            except OutboxError:
                return  # unknown as before; read again when the chat is next named
            self._learn_generation(key, generation, epoch)
        finally:
            with self._lock:
                self._generation_reads.pop(key, None)
            self._done()

    def _learn_generation(self, key: tuple[str, str, str], generation: int, epoch: int) -> None:
        """Keep what was learned with the marker it was learned under, unless something newer is known: a read
        that began before the marker moved is older than a forget told since; under one marker, generations
        only grow (a read that began before a forget this process made, whose marker could not be moved)."""
        with self._lock:
            known = self._generations.get(key)
            if known is not None and known[1] > epoch:
                return
            if known is not None and known[1] == epoch:
                generation = max(generation, known[0])
            self._generations.put(key, (generation, epoch))

    def _count_turn(self, settings: Settings, session_id: str) -> bool:
        """Count a user turn of the session; True when it is one that makes the context call (the first,
        then every `context_cadence`)."""
        session_key = (settings.destination(), session_id)
        with self._lock:
            turn = self._turns.get(session_key, 0) + 1
            self._turns.put(session_key, turn, settings.cache_max_entries)
        return (turn - 1) % settings.context_cadence == 0

    def _context_turn(self, settings: Settings, session_key: Hashable) -> bool:
        """Whether the session's current turn makes the context call (a turn never prefetched does)."""
        with self._lock:
            turn = self._turns.get(session_key)
        return turn is None or (turn - 1) % settings.context_cadence == 0

    def _prefetch(self, settings: Settings, session_id: str, user_text: str, scope_id: str | None,
                  mask: Callable[[str], str] | None, secrets: Mapping[str, str] | None, load: bool) -> None:
        gateway, cache = self._parts(settings)
        self._follow_epoch(settings, cache)
        session_key = (settings.destination(), session_id)
        query = self._query(user_text, settings, mask, secrets)
        if load:
            cache.start(cache_key(settings, session_id, query, scope_id), session_key,
                        lambda: self._load(gateway, settings, session_id, query, scope_id))
        self.warm(settings, scope_id)
        if settings.dialectic_enabled:
            with self._lock:
                summary = self._summaries.get(session_key)
            self._dialectic.on_user_turn(settings, session_id, scope_id, query, summary,
                                         self._user_known(settings, session_key, scope_id, cache), self._submit)

    def _follow_derivation(self, settings: Settings, scope_id: str | None) -> None:
        """Poll, in the background, the queue status of this destination's delivered sessions that are due."""
        now, destination = self._monotonic(), settings.destination()
        due = []
        with self._lock:
            for key, entry in list(self._deriving.items()):
                if key[0] != destination or entry.polling:
                    continue
                if now - entry.delivered_at > FRESHNESS_MAX_S:
                    del self._deriving[key]  # the TTL refreshes it
                elif entry.polled_at is None or now - entry.polled_at >= FRESHNESS_POLL_S:
                    entry.polling, entry.polled_at = True, now
                    due.append(key)
        for key in due:
            if not self._submit(self._poll_derivation, settings, key, scope_id):
                with self._lock:
                    unpolled = self._deriving.get(key)
                    if unpolled is not None:
                        unpolled.polling = False

    def _poll_derivation(self, settings: Settings, key: tuple[str, str], scope_id: str | None) -> None:
        try:
            pending: int | None = queries.pending_work(self._parts(settings)[0], key[1])
        except DeliveryError:
            pending = None  # asked again at the next interval
        with self._lock:
            entry = self._deriving.get(key)
            if entry is None:
                return
            entry.polling = False
            if pending is None:
                return
            entry.pending = pending
            entry.seen_pending = entry.seen_pending or pending > 0
            done = pending == 0 and (entry.seen_pending or self._monotonic() - entry.delivered_at >= FRESH_MIN_AGE_S)
            if not done:
                return
            del self._deriving[key]
        self.memory_changed(settings, scope_id)

    def memory_changed(self, settings: Settings, scope_id: str | None = None) -> None:
        """What Honcho knows at this destination changed (derivation done, the agent wrote memory): every
        base pack there is reloaded now, in the background, and served as it was until the reload lands."""
        with self._lock:
            for base_key, (_, data) in list(self._bases.items()):
                if base_key[:2] == (settings.api_url, settings.workspace_id):
                    self._bases[base_key] = (-math.inf, data)
        self.warm(settings, scope_id)

    def _user_known(self, settings: Settings, session_key: Hashable, scope_id: str | None, cache: RecallCache) -> bool:
        """Whether Honcho has told anything about the user yet (else the dialectic asks its cold question)."""
        with self._lock:
            base = self._bases.get(_base_key(settings, scope_id))
        last = cache.peek_last(session_key)
        return any(data is not None and bool(data.representation or data.card)
                   for data in (base[1] if base else None, last))

    def _query(self, user_text: str, settings: Settings, mask: Callable[[str], str] | None,
               secrets: Mapping[str, str] | None) -> str:
        text = (user_text or "")[:_QUERY_WINDOW]
        if len(user_text or "") > _QUERY_WINDOW and " " in text:
            text = text.rsplit(" ", 1)[0]  # never end inside a word: a cut credential would not be matched
        try:
            # Redacted with its line breaks (a key wrapped onto a second line is found whole), then made
            # one line: a search query, not the message.
            text = redact(mask(text) if mask else text, secrets)
        except Exception:  # RedactionError, or the host's masker failing
            return ""  # fail closed: recall without a query rather than send unredacted text
        text = " ".join(text.split())  # shorter than the minimum (nothing but spaces, say): no query
        return text[:QUERY_CHARS] if len(text) >= max(1, settings.recall_min_query_chars) else ""

    def _parts(self, settings: Settings) -> tuple[HonchoGateway, RecallCache]:
        return self._gateway.get(settings), self._cache.get(settings)

    def _load(self, gateway: HonchoGateway, settings: Settings, session_id: str, query: str,
              scope_id: str | None) -> ContextData:
        def fetch(scope: str | None) -> Context:
            return gateway.context(session_id, query=query, tokens=settings.max_context_tokens,
                                   target=settings.user_peer_id, perspective=settings.agent_peer_id, scope=scope,
                                   top_k=settings.search_top_k, max_conclusions=settings.max_conclusions,
                                   limit_to_session=settings.recall_limit_to_session)

        context = None
        with self._load_deadline(settings):
            if scope_id and gateway.supports_scopes():
                try:
                    context = fetch(scope_id)
                    self.scope_problem = None
                except (AuthError, PermanentError) as exc:
                    self.scope_problem = f"scope unavailable: {exc.code}"
            if context is None:
                context = fetch(None)
        data = _pack_input(context)
        if data.summary:
            self._summaries.put((settings.destination(), session_id), data.summary, settings.cache_max_entries)
        return data

    def _load_base(self, settings: Settings, scope_id: str | None, key: tuple) -> None:
        """What the agent knows about the user across chats: representation and card (no query)."""
        data: ContextData | None
        try:
            with self._load_deadline(settings):
                data = self._base_load(settings, scope_id)
        except PermanentError as exc:
            data = ContextData() if exc.code == "http_404" else None  # nothing known about the user yet
        except DeliveryError:
            data = None  # kept as it was; tried again at the next turn
        with self._lock:
            self._bases_loading.discard(key)
            if data is not None:
                self._bases.put(key, (self._monotonic(), data), settings.cache_max_entries)

    def _load_deadline(self, settings: Settings) -> AbstractContextManager:
        """A background load's deadline: the turn waits recall_timeout_s at most, and the load goes on filling
        the cache after that, but its reads end with those of any other call, at two SDK timeouts."""
        return deadline.within(settings.operation_deadline_s, self._monotonic)

    def _base_load(self, settings: Settings, scope_id: str | None) -> ContextData:
        gateway = self._parts(settings)[0]
        data: ContextData | None = None
        if scope_id and gateway.supports_scopes():
            try:
                data = _base_data_of(queries.scoped_peer_view(
                    gateway, settings.agent_peer_id, settings.user_peer_id, scope_id))
            except (AuthError, PermanentError) as exc:
                if exc.code == "http_404":
                    raise  # the scope (or peer) does not exist yet: nothing known there, not refused
                self.scope_problem = f"scope unavailable: {exc.code}"
        if data is None:
            data = _base_data_of(queries.peer_view(gateway, settings.agent_peer_id, settings.user_peer_id))
        if settings.include_agent_representation:
            data = _with_self_model(gateway, settings, scope_id if gateway.supports_scopes() else None, data)
        return data

    def _base_data(self, settings: Settings, session_id: str, scope_id: str | None) -> ContextData | None:
        """What is known across chats, with the session's newest summary; None before the first base load."""
        with self._lock:
            known = self._bases.get(_base_key(settings, scope_id))
            summary = self._summaries.get((settings.destination(), session_id))
        if known is None:
            return None
        return ContextData(representation=known[1].representation, card=list(known[1].card), summary=summary)

    def _pack(self, settings: Settings, session_id: str, data: ContextData, scope_id: str | None,
              include_messages: bool | None = None) -> MemoryPack:
        """The turn's pack from loaded data, with the agent's self-model from the base load when asked for
        and the session's newest dialectic note when there is one."""
        share = 0.0
        if settings.include_agent_representation:
            with self._lock:
                known = self._bases.get(_base_key(settings, scope_id))
            if known is not None:
                data = replace(data, agent_representation=known[1].agent_representation,
                               agent_card=list(known[1].agent_card))
                share = settings.agent_representation_share
        return build_pack(data, settings.max_context_tokens,
                          settings.recall_include_messages if include_messages is None else include_messages,
                          settings.user_peer_id, agent_share=share,
                          note=self._dialectic.note(settings, session_id))



def _pack_input(context: Context) -> ContextData:
    """The pack's input from what the gateway returned."""
    return ContextData(representation=context.representation, card=list(context.card), summary=context.summary,
                       messages=list(context.messages))


def _base_data_of(view: queries.PeerView) -> ContextData:
    return ContextData(representation=view.representation, card=list(view.card))


def _with_self_model(gateway: HonchoGateway, settings: Settings, scope_id: str | None,
                     data: ContextData) -> ContextData:
    """`data` with the agent's representation and card of itself (a scope confines the representation).
    Honcho derives nothing about a peer whose observe_me is false (the seed and unified presets): then only
    a dream or an explicitly set card gives it one. Missing (404) is an empty self-model, not a failure."""
    try:
        own = queries.self_view(gateway, settings.agent_peer_id, scope_id)
    except PermanentError as exc:
        if exc.code != "http_404":
            raise
        return data
    return replace(data, agent_representation=own.representation or None, agent_card=list(own.card))


def _base_ttl(data: ContextData, settings: Settings) -> float:
    """How long a base pack is kept: an empty one (nothing known about the user yet, as on a new install)
    is asked again soon, since the first deliveries are about to change that."""
    return settings.cache_ttl_s if (data.representation or data.card) else min(settings.cache_ttl_s, EMPTY_BASE_S)


def _chat_key(settings: Settings, chat_id: str) -> tuple[str, str, str]:
    return (settings.outbox_path, settings.destination(), chat_id)


def _base_key(settings: Settings, scope_id: str | None) -> tuple:
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id, scope_id,
            settings.include_agent_representation)


def cache_key(settings: Settings, session_id: str, query: str, scope_id: str | None) -> tuple:
    """Every input that changes what Honcho would return, with the query as a digest."""
    digest = hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id, session_id,
            settings.max_context_tokens, digest, scope_id, settings.search_top_k, settings.max_conclusions,
            settings.recall_include_messages, settings.recall_limit_to_session)


def _default_gateway(settings: Settings) -> HonchoGateway:
    # Recall's own client times out at the recall deadline: a hung Honcho costs the turn no more.
    return HonchoGateway.for_settings(settings, settings.recall_timeout_s)
