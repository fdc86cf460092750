"""The only module that talks to the Honcho SDK, and the one place SDK errors are translated.

Clients (`honcho-ai`) are built with `max_retries=0`, one per (API URL, key, workspace); `honcho`
is imported lazily, so capture and status work without it installed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType, TracebackType
from typing import Any, Literal, TypeVar

import httpx

from ..bounded import BoundedMap
from ..errors import (
    AuthError,
    HonchoRequestError,
    PermanentError,
    SdkMissingError,
    TransientError,
    UnreachableError,
)
from ..names import ID_RE, MAX_CONTENT_CHARS, MAX_MESSAGES_PER_CALL
from ..settings.config import Settings
from . import deadline, scopes

T = TypeVar("T")
# entries of each per-client cache (sessions, readers, peers, scopes, memberships): the sessions in
# use, not every chat of a long uptime (a session kept to send and one to read cost about 2 KB;
# forgetting one costs one idempotent request on its next use)
MAX_CACHED = 256
# the configured API URL cannot be used: nothing is sent anywhere
API_URL_INVALID = "api_url_invalid"
SOURCE = "agent-zero/honcho-hub"
# Observation settings by role, applied before a session's first message (Honcho auto-creates
# peers with its defaults otherwise). These are the `seed` preset's (the human is modelled; the
# agent models others but is not modelled), used by a gateway built without settings;
# `for_settings` passes the configured preset's.
OBSERVATION = {"user": {"observe_me": True, "observe_others": True},
               "agent": {"observe_me": False, "observe_others": True}}
_CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


# The gateway's own values: callers turn theirs into these (delivery its leased events, recall this
# context into its pack's input), so the SDK boundary knows nothing of storage or features.

@dataclass(frozen=True)
class Message:
    """One message to add to a session. `id` travels in its metadata (`event_id`): the lookup that
    finds what Honcho holds already matches on it."""

    id: str
    session_id: str
    peer_id: str
    role: str  # "user" or "agent": the peer's observation settings, and kept in the metadata
    content: str
    created_at: float  # seconds since the epoch
    scope_id: str | None = None  # the scope the session joins before its messages, if any


@dataclass(frozen=True)
class Context:
    """What a session's context holds; empty where Honcho knows nothing yet."""

    representation: str | None = None
    card: tuple[str, ...] = ()
    summary: str | None = None
    messages: tuple[tuple[str, str], ...] = ()  # (peer id, content), oldest first


def sdk() -> ModuleType:
    """The honcho module, or SdkMissingError when it is not installed."""
    try:
        import honcho
    except ImportError as exc:
        raise SdkMissingError("sdk_missing") from exc
    return honcho


class _Client:
    """One SDK client, the HTTP client under it and what was learned through it (objects built
    without a request, sessions and peers known to exist). Retired when the key changes or on
    close(); its HTTP client is closed once no call of any thread uses it any more, never under a
    request in flight."""

    def __init__(self, sdk_client: Any, http: httpx.Client, key: str, cache_limit: int) -> None:
        self.sdk, self.http, self.key = sdk_client, http, key
        self.users = 0  # calls using it now (guarded by the gateway's lock)
        self.retired = False
        # Each bounded by cache_limit (a long uptime, many chats): forgetting an entry costs a
        # request later, as every object here is rebuilt or re-ensured on its next use.
        # session id -> Session created with its peers' settings; -> the peers added with theirs
        self.sessions: BoundedMap[str, Any] = BoundedMap(cache_limit)
        self.session_peers: BoundedMap[str, set[str]] = BoundedMap(cache_limit)
        # session id -> Session to read
        self.readers: BoundedMap[str, Any] = BoundedMap(cache_limit)
        self.peers: BoundedMap[str, Any] = BoundedMap(cache_limit)  # peer id -> Peer, no request
        self.scopes: BoundedMap[str, Any] = BoundedMap(cache_limit)  # scope id -> Scope, made once
        self.known_peers: set[str] = set()  # configured peers known to exist on the server
        # (scope id, session id) known to be set
        self.memberships: BoundedMap[tuple[str, str], bool] = BoundedMap(cache_limit)

    def close_http(self) -> None:
        # The SDK leaves an HTTP client it was given open, so its connections would linger until
        # garbage collection: we close the one we made.
        try:
            self.http.close()
        except Exception:
            pass  # closing is best effort


class HonchoGateway:
    """Talks to one API URL + workspace; safe to call from several threads."""

    def __init__(self, api_url: str, workspace_id: str, key_provider: Callable[[], str],
                 timeout_s: float,
                 http_client_factory: Callable[[], httpx.Client] | None = None,
                 peer_roles: dict[str, str] | None = None,
                 observation: Mapping[str, Mapping[str, bool]] | None = None,
                 supports_scopes: Callable[[], bool] | None = None, cache_limit: int = MAX_CACHED,
                 refusal: str | None = None) -> None:
        self.api_url, self.workspace_id = api_url, workspace_id
        # The configured peers join every session at creation, so both have their observation
        # settings before the first message of either; messages of other peers (older settings) add
        # theirs.
        self._peer_roles = dict(peer_roles or {})
        # role -> {"observe_me", "observe_others"}. Sent only when a peer joins a session: Honcho
        # keeps the configuration a session's peer already has, so a change reaches new sessions
        # (and new peers) only.
        self._observation = {role: dict(flags)
                             for role, flags in (observation or OBSERVATION).items()}
        self.supports_scopes = supports_scopes or (lambda: scopes.sdk_supports_scopes(sdk()))
        self.scope_problem: str | None = None  # why scoping failed last, for status
        self._key_provider, self._timeout_s = key_provider, timeout_s
        self._http_client_factory = http_client_factory or httpx.Client
        self._cache_limit = max(1, cache_limit)
        self._refusal = refusal  # the code every call raises instead of building a client, if any
        self._lock = threading.Lock()
        self._current: _Client | None = None
        self._local = threading.local()  # the client a call of this thread holds, for nested uses

    @classmethod
    def for_settings(cls, settings: Settings, timeout_s: float | None = None, *,
                     with_human: bool = True, **kwargs: Any) -> HonchoGateway:
        """A gateway to the settings' destination, with their key provider and peers; timeout
        defaults to the SDK timeout (recall and checks pass their own). Without `with_human`
        (delivery, which runs with the global settings while chats may have other humans), sessions
        are created with the agent and the peers of the messages sent, never the default human: it
        would form views of another human.

        When the configured API URL cannot be used, the gateway builds no client: every call raises
        PermanentError `api_url_invalid`, so the key never goes to another server than the one the
        user named. Refusing at the call (not here) keeps every caller on the error path it already
        handles."""
        return cls(settings.api_url, settings.workspace_id, settings.key_provider,
                   settings.sdk_timeout_s if timeout_s is None else timeout_s,
                   peer_roles={**({settings.user_peer_id: "user"} if with_human else {}),
                               settings.agent_peer_id: "agent"},
                   observation={role: settings.observation_of(role) for role in ("user", "agent")},
                   refusal=API_URL_INVALID if settings.api_url_problem else None, **kwargs)

    def send(self, messages: Sequence[Message], boarding: Callable[[], bool] | None = None) -> bool:
        """Add one session's messages in order, at most 100 per request; raises
        HonchoRequestError. The session joins the last message's scope first (a chat may have
        joined a project since its first message). `boarding()` is asked once, right before the
        first message leaves: False withdraws the send, nothing is added and False is returned (a
        drain whose time ran out meanwhile has released the messages)."""
        for message in messages:
            _check(message)
        with _translated(), self._using() as client:
            session_id = messages[0].session_id
            session = self._session(client, session_id, {m.peer_id: m.role for m in messages})
            self._ensure_membership(client, session_id, messages[-1].scope_id)
            if boarding is not None and not boarding():
                return False
            for start in range(0, len(messages), MAX_MESSAGES_PER_CALL):
                session.add_messages(
                    [_params(m) for m in messages[start:start + MAX_MESSAGES_PER_CALL]])
        return True

    def existing_event_ids(self, session_id: str, event_ids: Iterable[str]) -> set[str]:
        """Which of these message ids (`Message.id`, sent as metadata `event_id`) the session
        already holds; raises HonchoRequestError."""
        wanted = list(event_ids)
        found: set[str] = set()
        with _translated(), self._using() as client:
            session = self._cached_session(client, session_id)
            for start in range(0, len(wanted), MAX_MESSAGES_PER_CALL):
                part = wanted[start:start + MAX_MESSAGES_PER_CALL]
                page = session.messages(
                    filters={"OR": [{"metadata": {"event_id": i}} for i in part]},
                    size=MAX_MESSAGES_PER_CALL)
                found.update(str((m.metadata or {}).get("event_id")) for m in page.items)
        return found & set(wanted)

    def context(self, session_id: str, *, query: str | None, tokens: int, target: str,
                perspective: str, scope: str | None = None, top_k: int | None = None,
                max_conclusions: int | None = None, limit_to_session: bool = False) -> Context:
        """Session context for recall: scoped (the scope replaces the perspective) or from
        `perspective`.

        Honcho answers 404 when a peer, the session or the scope does not exist yet (a new install's
        first turn, a chat whose first message is still queued): nothing is known there, so the
        context is empty.
        """
        try:
            with _translated(), self._using() as client:
                result = self._cached_session(client, session_id).context(
                    summary=True, tokens=tokens, peer_target=target, search_query=query or None,
                    peer_perspective=None if scope else perspective, scope=scope,
                    search_top_k=top_k if query else None, max_conclusions=max_conclusions,
                    limit_to_session=limit_to_session and not scope)
        except PermanentError as exc:
            if exc.code != "http_404":
                raise
            return Context()
        return Context(representation=result.peer_representation,
                       card=tuple(result.peer_card or ()),
                       summary=result.summary.content if result.summary else None,
                       messages=tuple((m.peer_id, m.content) for m in result.messages))

    def ensure_known(self, session_id: str | None) -> None:
        """Before an explicit action names them: the session with its peers' observation settings,
        or without a session the configured peers. Honcho answers 404 for a peer or session it has
        not seen, which is the case in a chat whose first message is still queued. Requests once per
        client."""
        with _translated(), self._using() as client:
            if session_id:
                self._session(client, session_id, {})
                return
            with self._lock:
                missing = [p for p in self._peer_roles if p not in client.known_peers]
            for peer_id in missing:
                client.sdk.peer(peer_id)  # get-or-create
                with self._lock:
                    client.known_peers.add(peer_id)  # configured peers only: two at most

    def session_peer_flags(self, session_id: str,
                           peers: Iterable[str]) -> dict[str, dict[str, bool | None] | None]:
        """The server's configuration of each peer in the session: {"observe_me", "observe_others"}
        (None where the server holds no explicit value), or None when the server holds no such
        session or peer (its flags are set when it joins). A peer whose configuration could not be
        read (unreachable, refused, an id Honcho would refuse) is left out, and so are the peers
        after it: a status read costs at most one failed request. Never raises: status asks."""
        found: dict[str, dict[str, bool | None] | None] = {}
        wanted = ([p for p in dict.fromkeys(peers) if ID_RE.match(p)]
                  if ID_RE.match(session_id) else [])
        for peer_id in wanted:
            try:
                with _translated(), self._using() as client:
                    config = self._cached_session(client, session_id).get_peer_configuration(
                        peer_id)
            except Exception as exc:  # a HonchoRequestError, or the SDK missing
                if isinstance(exc, PermanentError) and exc.code == "http_404":
                    found[peer_id] = None
                    continue
                # unreachable, refused, failing: the other peers' requests would fare no better
                break
            found[peer_id] = {"observe_me": config.observe_me,
                              "observe_others": config.observe_others}
        return found

    def ensure_session_in_scope(self, session_id: str, scope_id: str) -> None:
        """Create the session with its peers' observation settings, then put it in the scope."""
        with _translated(), self._using() as client:
            self._session(client, session_id, {})
            self._ensure_membership(client, session_id, scope_id)

    def call(self, request: Callable[[Any], T]) -> T:
        """Run `request(client)` with SDK errors translated: how gateway/queries.py composes its
        requests."""
        with _translated(), self._using() as client:
            return request(client.sdk)

    def reader_session(self, session_id: str) -> Any:
        """A session object for reads (no request), for use inside `call` (then on the call's
        client)."""
        with self._using() as client:
            return self._cached_session(client, session_id)

    def reader_peer(self, peer_id: str) -> Any:
        """A peer object (no get-or-create request), for use inside `call` (then on the call's
        client)."""
        from honcho.peer import Peer

        with self._using() as client:
            return self._reader(client.peers, (), peer_id, lambda: Peer(peer_id, client.sdk))

    def scope_status(self, scope_id: str) -> dict[str, str]:
        """Backfill state per session of a scope (pending, completed, failed); raises
        HonchoRequestError."""
        with _translated(), self._using() as client:
            return {sid: job.state
                    for sid, job in self._scope(client, scope_id).status().items()}

    def delete_session(self, session_id: str) -> str:
        """Ask Honcho to delete the session with its messages and what was derived from them:
        "accepted" (202: Honcho deletes in the background; it is gone from listings at once) or
        "gone" (404: no such session, or deleted already). Raises HonchoRequestError for anything
        else. What this gateway learned of the session is dropped, so a later use of the id creates
        it again."""
        if not ID_RE.match(session_id):
            raise PermanentError("invalid")
        try:
            with _translated(), self._using() as client:
                try:
                    self._cached_session(client, session_id).delete()
                finally:
                    with self._lock:
                        for cache in (client.sessions, client.session_peers, client.readers):
                            cache.pop(session_id, None)
                        for membership in [m for m in client.memberships if m[1] == session_id]:
                            del client.memberships[membership]
        except PermanentError as exc:
            if exc.code == "http_404":
                return "gone"
            raise
        return "accepted"

    def close(self) -> None:
        """Retire the client: closed now, or when the last call using it ends; the next call builds
        another."""
        with self._lock:
            idle = self._retire()
        if idle is not None:
            idle.close_http()

    # -- internals -------------------------------------------------------------------------------

    @contextmanager
    def _using(self) -> Iterator[_Client]:
        """The current client, held for the block: a key change or close() meanwhile retires it, but
        its HTTP client stays open until the block ends. Nested uses on one thread share the outer
        client."""
        held = getattr(self._local, "client", None)
        if held is not None:
            yield held
            return
        client = self._acquire()
        self._local.client = client
        try:
            yield client
        finally:
            self._local.client = None
            with self._lock:
                client.users -= 1
                idle = client.retired and client.users == 0
            if idle:
                client.close_http()

    def _acquire(self) -> _Client:
        if self._refusal is not None:
            raise PermanentError(self._refusal)
        key = self._key_provider()
        idle = None
        try:
            with self._lock:
                if self._current is None or self._current.key != key:
                    idle = self._retire()
                    self._current = self._new_client(key)
                self._current.users += 1
                return self._current
        finally:
            if idle is not None:  # the previous key's client, unused: closed outside the lock
                idle.close_http()

    def _new_client(self, key: str) -> _Client:
        honcho = sdk()  # before the HTTP client, so a missing SDK leaves nothing open
        http = deadline.bound(self._http_client_factory())  # a caller's deadline ends its requests
        try:
            sdk_client = honcho.Honcho(api_key=key or None, base_url=self.api_url,
                                       workspace_id=self.workspace_id, max_retries=0,
                                       timeout=self._timeout_s, http_client=http)
        except BaseException:
            http.close()
            raise
        return _Client(sdk_client, http, key, self._cache_limit)

    def _retire(self) -> _Client | None:
        """Forget the current client (call under the lock); returns it when no call uses it: close
        it."""
        current, self._current = self._current, None
        if current is None:
            return None
        current.retired = True
        return current if current.users == 0 else None

    def _session(self, client: _Client, session_id: str, message_roles: dict[str, str]) -> Any:
        """The session object, created with explicit peer observation settings before any
        message."""
        roles = {**self._peer_roles, **message_roles}
        peers = {peer: self._observation.get(role, self._observation["user"])
                 for peer, role in roles.items()}
        with self._lock:
            known = client.session_peers.get(session_id)
            session = client.sessions.get(session_id)
        missing = {p: c for p, c in peers.items() if known is None or p not in known}
        if session is None or missing:
            config = sdk().api_types.SessionPeerConfig
            pairs = [(p, config(**c)) for p, c in missing.items()]
            session = client.sdk.session(session_id, peers=pairs) if session is None else session
            if known is not None:
                session.add_peers(pairs)
            with self._lock:  # put together, so the two forget the same sessions
                client.sessions.put(session_id, session)
                added = client.session_peers.get(session_id, set()) | set(missing)
                client.session_peers.put(session_id, added)
        return session

    def _ensure_membership(self, client: _Client, session_id: str, scope_id: str | None) -> None:
        """Put the session in its scope before its messages; a refusal does not stop delivery."""
        if (not scope_id or (scope_id, session_id) in client.memberships
                or not self.supports_scopes()):
            return
        try:
            self._scope(client, scope_id).add_sessions([session_id])
        except Exception as exc:
            error = translate(exc)
            if not isinstance(error, (AuthError, PermanentError)):
                raise error from exc
            # e.g. a key that is not workspace-level: deliver unscoped
            self.scope_problem = error.code
            return
        with self._lock:
            client.memberships.put((scope_id, session_id), True)
        self.scope_problem = None

    def _scope(self, client: _Client, scope_id: str) -> Any:
        with self._lock:
            scope = client.scopes.get(scope_id)
        if scope is None:
            scope = client.sdk.scope(scope_id)  # get-or-create, once per client
            with self._lock:
                client.scopes.put(scope_id, scope)
        return scope

    def _cached_session(self, client: _Client, session_id: str) -> Any:
        """A session object for reads, without the get-or-create request (and built once)."""
        from honcho.session import Session

        return self._reader(client.readers, (client.sessions,), session_id,
                            lambda: Session(session_id, client.sdk))

    def _reader(self, cache: BoundedMap, also: tuple[BoundedMap, ...], key: str,
                build: Callable[[], Any]) -> Any:
        """The object cached under `key` (in `cache` or one of `also`), else built (no request) and
        kept."""
        with self._lock:
            found = next((known[key] for known in (*also, cache) if key in known), None)
        if found is None:
            found = build()
            with self._lock:
                cache.put(key, found)
        return found


def _check(message: Message) -> None:
    """Client-side validation of Honcho's limits: a rejected message is permanent, sent or not."""
    if (len(message.content) > MAX_CONTENT_CHARS or not ID_RE.match(message.peer_id)
            or not ID_RE.match(message.session_id)):
        raise PermanentError("invalid")


def _params(message: Message) -> Any:
    params = sdk().api_types.MessageCreateParams
    return params(content=message.content, peer_id=message.peer_id,
                  metadata={"event_id": message.id, "source": SOURCE, "role": message.role},
                  created_at=datetime.fromtimestamp(message.created_at, tz=UTC))


class _translated:
    """Translate SDK and httpx errors into our kinds, at this one boundary."""

    def __enter__(self) -> None:
        return None

    # Never swallows: passes the exception on or raises its translation.
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None or isinstance(exc, HonchoRequestError) or not isinstance(exc, Exception):
            return False
        raise translate(exc) from exc


def translate(exc: Exception) -> HonchoRequestError:
    """Map one SDK/httpx/validation error to a HonchoRequestError with a sanitized code."""
    honcho = sdk()
    status = exc.status if isinstance(exc, honcho.HonchoError) else 0
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
        ended = deadline.translated(cause)
        if ended is not None:
            return ended
        if isinstance(cause, _CONNECT_FAILURES):
            return UnreachableError("connect_timeout" if isinstance(cause, httpx.TimeoutException)
                                    else "unreachable")
        # The request went out and no answer came back: the server may have stored it.
        return UnreachableError("timeout" if isinstance(exc, honcho.TimeoutError) else "reset",
                                ambiguous=True)
    # pydantic's ValidationError is a ValueError
    if isinstance(exc, (ValueError, TypeError, OverflowError)):
        return PermanentError("invalid")
    return TransientError("unexpected", ambiguous=True)
