"""The only module that talks to the Honcho SDK (`honcho-ai`), and the one place SDK errors are translated.

Clients are built with `max_retries=0` (the outbox owns retries) and the configured timeout, one per
(API URL, key, workspace); the key is read from the provider on every use, so a fixed key takes
effect at the next call. `honcho` is imported lazily: capture and status work without it installed.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence, TypeVar

import httpx

from .errors import AuthError, DeliveryError, PermanentError, SdkMissingError, TransientError, UnreachableError
from . import scopes
from .config import Settings
from .outbox import NewEvent
from .recall_pack import ContextData
from .settings_values import ID_RE

T = TypeVar("T")
MAX_MESSAGES_PER_CALL = 100
MAX_CONTENT_CHARS = 25_000
MAX_CACHED_READERS = 1_000
MAX_CACHED_SESSIONS = 10_000
SOURCE = "agent-zero/honcho-hub"
# Observation settings by role, applied before a session's first message (Honcho auto-creates peers
# with its defaults otherwise): the human is modelled; the agent models others but is not modelled.
OBSERVATION = {"user": {"observe_me": True, "observe_others": True},
               "agent": {"observe_me": False, "observe_others": True}}
_CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def sdk():
    """The honcho module, or SdkMissingError when it is not installed."""
    try:
        import honcho
    except ImportError as exc:
        raise SdkMissingError("sdk_missing") from exc
    return honcho


class HonchoGateway:
    """Sends event batches to one API URL + workspace; safe to call from several sender threads."""

    def __init__(self, api_url: str, workspace_id: str, key_provider: Callable[[], str], timeout_s: float,
                 http_client_factory: Callable[[], httpx.Client] | None = None,
                 peer_roles: dict[str, str] | None = None,
                 supports_scopes: Callable[[], bool] | None = None) -> None:
        self.api_url, self.workspace_id = api_url, workspace_id
        # The configured peers join every session at creation, so both have their observation
        # settings before the first message of either; events of other peers (older settings) add theirs.
        self._peer_roles = dict(peer_roles or {})
        self.supports_scopes = supports_scopes or (lambda: scopes.sdk_supports_scopes(sdk()))
        self._scopes: dict[str, Any] = {}  # scope id -> Scope object, created once per client
        self._readers: dict[str, Any] = {}  # session id -> Session object used only to read
        self._peers: dict[str, Any] = {}  # peer id -> Peer object, built without a request
        self._known_peers: set[str] = set()  # configured peers known to exist on the server
        self._memberships: set[tuple[str, str]] = set()  # (scope id, session id) known to be set
        self.scope_problem: str | None = None  # why scoping failed last, for status
        self._key_provider, self._timeout_s = key_provider, timeout_s
        self._http_client_factory = http_client_factory or httpx.Client
        self._lock = threading.Lock()
        self._client: Any = None
        self._client_key: str | None = None
        self._http: httpx.Client | None = None  # ours: the SDK closes only clients it made itself
        self._sessions: dict[str, Any] = {}
        self._session_peers: dict[str, set[str]] = {}

    @classmethod
    def for_settings(cls, settings: Settings, timeout_s: float | None = None, **kwargs: Any) -> "HonchoGateway":
        """A gateway to the settings' destination, with their key provider and peers; timeout defaults
        to the SDK timeout (recall and checks pass their own)."""
        return cls(settings.api_url, settings.workspace_id, settings.key_provider,
                   settings.sdk_timeout_s if timeout_s is None else timeout_s,
                   peer_roles={settings.user_peer_id: "user", settings.agent_peer_id: "agent"}, **kwargs)

    def send(self, events: Sequence[NewEvent]) -> None:
        """Deliver one session's events in order, at most 100 per request; raises DeliveryError."""
        for event in events:
            _check(event)
        with _translated():
            session = self._session(events[0].session_id, {e.peer_id: e.role for e in events})
            self._ensure_membership(events[0].session_id, events[-1].scope_id)
            for start in range(0, len(events), MAX_MESSAGES_PER_CALL):
                session.add_messages([_message(e) for e in events[start:start + MAX_MESSAGES_PER_CALL]])

    def existing_event_ids(self, session_id: str, event_ids: Iterable[str]) -> set[str]:
        """Which of these event ids the session already holds (metadata filter); raises DeliveryError."""
        wanted = list(event_ids)
        found: set[str] = set()
        with _translated():
            session = self._cached_session(session_id)
            for start in range(0, len(wanted), MAX_MESSAGES_PER_CALL):
                part = wanted[start:start + MAX_MESSAGES_PER_CALL]
                page = session.messages(filters={"OR": [{"metadata": {"event_id": i}} for i in part]},
                                        size=MAX_MESSAGES_PER_CALL)
                found.update(str((m.metadata or {}).get("event_id")) for m in page.items)
        return found & set(wanted)

    def context(self, session_id: str, *, query: str | None, tokens: int, target: str, perspective: str,
                scope: str | None = None, top_k: int | None = None, max_conclusions: int | None = None,
                limit_to_session: bool = False) -> ContextData:
        """Session context for recall: scoped (the scope replaces the perspective) or from `perspective`.

        Honcho answers 404 when a peer, the session or the scope does not exist yet (a new install's first
        turn, a chat whose first message is still queued): nothing is known there, so the context is empty.
        """
        try:
            with _translated():
                result = self._cached_session(session_id).context(
                    summary=True, tokens=tokens, peer_target=target, search_query=query or None,
                    peer_perspective=None if scope else perspective, scope=scope,
                    search_top_k=top_k if query else None, max_conclusions=max_conclusions,
                    limit_to_session=limit_to_session and not scope)
        except PermanentError as exc:
            if exc.code != "http_404":
                raise
            return ContextData()
        return ContextData(representation=result.peer_representation, card=list(result.peer_card or []),
                           summary=result.summary.content if result.summary else None,
                           messages=[(m.peer_id, m.content) for m in result.messages])

    def ensure_known(self, session_id: str | None) -> None:
        """Before an explicit action names them: the session with its peers' observation settings, or
        without a session the configured peers. Honcho answers 404 for a peer or session it has not seen,
        which is the case in a chat whose first message is still queued. Requests once per client."""
        with _translated():
            if session_id:
                self._session(session_id, {})
                return
            client = self._sdk_client()
            with self._lock:
                missing = [p for p in self._peer_roles if p not in self._known_peers]
            for peer_id in missing:
                client.peer(peer_id)  # get-or-create
                with self._lock:
                    self._known_peers.add(peer_id)

    def ensure_session_in_scope(self, session_id: str, scope_id: str) -> None:
        """Create the session with its peers' observation settings, then put it in the scope."""
        with _translated():
            self._session(session_id, {})
            self._ensure_membership(session_id, scope_id)

    def call(self, request: Callable[[Any], T]) -> T:
        """Run `request(client)` with SDK errors translated: for callers composing other SDK calls."""
        with _translated():
            return request(self._sdk_client())

    def reader_session(self, session_id: str) -> Any:
        """A session object for reads (no request), for use inside `call`."""
        return self._cached_session(session_id)

    def reader_peer(self, peer_id: str) -> Any:
        """A peer object (no get-or-create request), for use inside `call`."""
        client = self._sdk_client()
        with self._lock:
            peer = self._peers.get(peer_id)
        if peer is None:
            from honcho.peer import Peer

            peer = Peer(peer_id, client)
            with self._lock:
                self._peers[peer_id] = peer
        return peer

    def scope_status(self, scope_id: str) -> dict[str, str]:
        """Backfill state per session of a scope (pending, completed, failed); raises DeliveryError."""
        with _translated():
            return {sid: job.state for sid, job in self._scope(scope_id).status().items()}

    def close(self) -> None:
        """Close the HTTP client; the next call builds a new one."""
        with self._lock:
            self._reset_client()

    # -- internals -------------------------------------------------------------------------------

    def _sdk_client(self) -> Any:
        key = self._key_provider()
        with self._lock:
            if self._client is None or key != self._client_key:
                self._reset_client()
                self._http = self._http_client_factory()
                self._client = sdk().Honcho(api_key=key or None, base_url=self.api_url,
                                            workspace_id=self.workspace_id, max_retries=0,
                                            timeout=self._timeout_s, http_client=self._http)
                self._client_key = key
            return self._client

    def _reset_client(self) -> None:
        # The SDK leaves an HTTP client it was given open, so its connections would linger until garbage
        # collection (after close(), a stopped worker or a changed key): we close the one we made.
        if self._http is not None:
            try:
                self._http.close()
            except Exception:
                pass  # closing is best effort
        self._client, self._client_key, self._http = None, None, None
        self._sessions.clear()
        self._session_peers.clear()
        self._scopes.clear()
        self._readers.clear()
        self._peers.clear()
        self._known_peers.clear()
        self._memberships.clear()

    def _session(self, session_id: str, event_roles: dict[str, str]) -> Any:
        """The session object, created with explicit peer observation settings before any message."""
        client = self._sdk_client()
        roles = {**self._peer_roles, **event_roles}
        peers = {peer: OBSERVATION.get(role, OBSERVATION["user"]) for peer, role in roles.items()}
        with self._lock:
            known = self._session_peers.get(session_id)
            session = self._sessions.get(session_id)
        missing = {p: c for p, c in peers.items() if known is None or p not in known}
        if session is None or missing:
            config = sdk().api_types.SessionPeerConfig
            pairs = [(p, config(**c)) for p, c in missing.items()]
            session = client.session(session_id, peers=pairs) if session is None else session
            if known is not None:
                session.add_peers(pairs)
            with self._lock:
                if len(self._sessions) >= MAX_CACHED_SESSIONS:  # long uptime: forget, re-ensure on next use
                    self._sessions.clear()
                    self._session_peers.clear()
                self._sessions[session_id] = session
                self._session_peers.setdefault(session_id, set()).update(missing)
        return session

    def _ensure_membership(self, session_id: str, scope_id: str | None) -> None:
        """Put the session in its scope before its messages; a refusal does not stop delivery."""
        if not scope_id or (scope_id, session_id) in self._memberships or not self.supports_scopes():
            return
        try:
            self._scope(scope_id).add_sessions([session_id])
        except Exception as exc:
            error = translate(exc)
            if not isinstance(error, (AuthError, PermanentError)):
                raise error from exc
            self.scope_problem = error.code  # e.g. a key that is not workspace-level: deliver unscoped
            return
        with self._lock:
            self._memberships.add((scope_id, session_id))
        self.scope_problem = None

    def _scope(self, scope_id: str) -> Any:
        client = self._sdk_client()
        with self._lock:
            scope = self._scopes.get(scope_id)
        if scope is None:
            scope = client.scope(scope_id)  # get-or-create, once per client
            with self._lock:
                self._scopes[scope_id] = scope
        return scope

    def _cached_session(self, session_id: str) -> Any:
        """A session object for reads, without the get-or-create request (and built once)."""
        client = self._sdk_client()
        with self._lock:
            session = self._sessions.get(session_id) or self._readers.get(session_id)
        if session is None:
            from honcho.session import Session

            session = Session(session_id, client)
            with self._lock:
                if len(self._readers) >= MAX_CACHED_READERS:
                    self._readers.clear()
                self._readers[session_id] = session
        return session


def _check(event: NewEvent) -> None:
    """Client-side validation of Honcho's limits: a rejected event is permanent, sent or not."""
    if len(event.content) > MAX_CONTENT_CHARS or not ID_RE.match(event.peer_id) or not ID_RE.match(event.session_id):
        raise PermanentError("invalid")


def _message(event: NewEvent) -> Any:
    params = sdk().api_types.MessageCreateParams
    return params(content=event.content, peer_id=event.peer_id,
                  metadata={"event_id": event.id, "source": SOURCE, "role": event.role},
                  created_at=datetime.fromtimestamp(event.captured_at, tz=timezone.utc))


class _translated:
    """Translate SDK and httpx errors into our kinds, at this one boundary."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or isinstance(exc, DeliveryError) or not isinstance(exc, Exception):
            return False
        raise translate(exc) from exc


def translate(exc: Exception) -> DeliveryError:
    """Map one SDK/httpx/validation error to a DeliveryError with a sanitized code."""
    honcho = sdk()
    status = getattr(exc, "status", 0) if isinstance(exc, honcho.HonchoError) else 0
    if isinstance(exc, honcho.RateLimitError):
        return TransientError("http_429", retry_after=exc.retry_after)
    if isinstance(exc, (honcho.AuthenticationError, honcho.PermissionDeniedError)):
        return AuthError(f"auth_{status}")
    if status >= 500:
        return TransientError(f"http_{status}", ambiguous=True)
    if status == 408:
        return TransientError("http_408", ambiguous=True)
    if status >= 400:
        return PermanentError(f"http_{status}")
    if isinstance(exc, (honcho.TimeoutError, honcho.ConnectionError)):
        cause = exc.__cause__
        if isinstance(cause, _CONNECT_FAILURES):
            return UnreachableError("connect_timeout" if isinstance(cause, httpx.TimeoutException) else "unreachable")
        # The request went out and no answer came back: the server may have stored it.
        return UnreachableError("timeout" if isinstance(exc, honcho.TimeoutError) else "reset", ambiguous=True)
    if isinstance(exc, (ValueError, TypeError, OverflowError)):  # pydantic's ValidationError is a ValueError
        return PermanentError("invalid")
    return TransientError("unexpected", ambiguous=True)
