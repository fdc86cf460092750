"""Every request composed from the SDK's objects, written once: plain values in and out.

Each runs through `HonchoGateway.call`, so SDK errors are translated at the gateway's one boundary;
nothing here calls the dialectic unless `ask` is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import PermanentError
from .gateway import HonchoGateway, sdk

LISTING_PAGE = 100
LISTING_PAGES = 10  # a bounded walk: at most 1,000 conclusions are checked before giving up


@dataclass(frozen=True)
class Found:
    id: str
    content: str
    where: str = ""  # peer or session, for display


@dataclass(frozen=True)
class Conclusion:
    """One conclusion of a listing, with the session it came from where Honcho names one."""

    id: str
    content: str
    session_id: str | None
    created_at: Any  # a datetime as the SDK gives it, or None
    level: str = "explicit"  # explicit, deductive, inductive or contradiction
    source_ids: tuple[str, ...] = ()  # the conclusions a derived one rests on


@dataclass(frozen=True)
class PairConclusion:
    """A conclusion of any observer and observed peer, as a workspace-wide listing gives it."""

    id: str
    content: str
    observer: str
    observed: str
    level: str
    session_id: str | None


@dataclass(frozen=True)
class ConclusionPage:
    items: tuple[Conclusion, ...]
    pages: int
    total: int


@dataclass(frozen=True)
class PeerView:
    """What one peer knows of another (or of itself): the representation and the card."""

    representation: str | None = None
    card: tuple[str, ...] = ()


# -- the dialectic ---------------------------------------------------------------------------------


def ask(gw: HonchoGateway, observer: str, target: str, query: str, *, session_id: str | None,
        scope: str | None, reasoning_level: str | None, timeout_s: float) -> str:
    """The dialectic: what `observer` knows about `target`. A scoped question names no session."""
    gw.ensure_known(session_id)

    def request(client: Any) -> str:
        answer = gw.reader_peer(observer).chat(
            query, target=target, session=None if scope else session_id, scope=scope,
            reasoning_level=reasoning_level, timeout=timeout_s)
        return str(answer) if answer else ""
    return gw.call(request)


# -- conclusions -----------------------------------------------------------------------------------


def create_conclusion(gw: HonchoGateway, observer: str, target: str, content: str,
                      session_id: str | None) -> Found:
    """Exactly one conclusion of `observer` about `target`."""
    gw.ensure_known(session_id)

    def request(client: Any) -> Found:
        item = {"content": content, **({"session_id": session_id} if session_id else {})}
        created = gw.reader_peer(observer).conclusions_of(target).create([item])
        return Found(created[0].id, created[0].content)
    return gw.call(request)


def create_conclusions(gw: HonchoGateway, observer: str, target: str, contents: list[str],
                       session_id: str | None) -> list[Found]:
    """Conclusions of `observer` about `target`, one request (1 to 100): Honcho stores each as
    explicit, with its own time and no metadata, in `session_id`, which must exist (it is made
    first, with the configured peers)."""
    gw.ensure_known(session_id)

    def request(client: Any) -> list[Found]:
        items = [{"content": content, **({"session_id": session_id} if session_id else {})}
                 for content in contents]
        created = gw.reader_peer(observer).conclusions_of(target).create(items)
        return [Found(c.id, c.content) for c in created]
    return gw.call(request)


def find_conclusion(gw: HonchoGateway, observer: str, target: str,
                    conclusion_id: str) -> Found | None:
    """The conclusion with this id if it is one of `observer`'s about `target` (Honcho's delete
    does not check), else None. A filtered lookup first; a server without the id filter gets a
    bounded walk over the listing."""
    view = gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target))
    try:
        return _with_id(gw.call(lambda client: view.get_many([conclusion_id])), conclusion_id)
    except PermanentError:
        pass
    page = gw.call(lambda client: view.list(size=LISTING_PAGE))
    for _ in range(LISTING_PAGES):
        found = _with_id(page.items, conclusion_id)
        if found is not None or not page.has_next_page():
            return found
        page = gw.call(lambda client: page.get_next_page())  # noqa: B023  # gw.call runs it at once
    return None


def _with_id(conclusions: Any, conclusion_id: str) -> Found | None:
    return next((Found(c.id, c.content) for c in conclusions if c.id == conclusion_id), None)


def delete_conclusion(gw: HonchoGateway, observer: str, target: str, conclusion_id: str) -> None:
    gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target).delete(conclusion_id))


def list_conclusions(gw: HonchoGateway, observer: str, target: str, page: int,
                     size: int) -> ConclusionPage:
    """One page of `observer`'s conclusions about `target`, newest first (Honcho's listing
    order)."""
    listing = gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target)
                      .list(page=page, size=size))
    return _conclusion_page(listing, size)


def _conclusion_page(listing: Any, size: int) -> ConclusionPage:
    return ConclusionPage(tuple(_conclusion(c) for c in listing.items[:size]),
                          listing.pages or 0, listing.total or 0)


def _conclusion(c: Any) -> Conclusion:
    return Conclusion(c.id, c.content, c.session_id, c.created_at, c.level or "explicit",
                      tuple(c.source_ids or ()))


def session_conclusions(gw: HonchoGateway, session_id: str,
                        limit: int) -> tuple[list[PairConclusion], bool]:
    """The conclusions Honcho holds in `session_id`, of every peer pair: at most `limit`, and
    whether there are more."""
    return _workspace_listing(gw, {"session_id": session_id}, limit)


def citing_conclusions(gw: HonchoGateway, conclusion_ids: list[str],
                       limit: int) -> tuple[list[PairConclusion], bool]:
    """The conclusions, of every peer pair, that cite one of `conclusion_ids` as a premise (what
    dreams derived from them): at most `limit`, and whether there are more. Honcho finds them by
    `source_ids` containing a list; a bare id, as the SDK's `derived()` sends it, is refused with
    422 at ddbb90e, and no answer carries `source_ids`."""
    if not conclusion_ids:
        return [], False
    anyof = {"OR": [{"source_ids": {"contains": [cid]}} for cid in conclusion_ids]}
    return _workspace_listing(gw, anyof, limit)


def _workspace_listing(gw: HonchoGateway, filters: dict[str, Any],
                       limit: int) -> tuple[list[PairConclusion], bool]:
    """A bounded walk over a workspace-wide conclusion listing, newest first."""
    page = gw.call(lambda client: client.conclusions.list(size=min(LISTING_PAGE, max(1, limit)),
                                                          filters=filters))
    found: list[PairConclusion] = []
    while True:
        found += [PairConclusion(c.id, c.content, c.observer_id, c.observed_id,
                                 c.level or "explicit", c.session_id) for c in page.items]
        if len(found) >= limit or not page.has_next_page():
            return found[:limit], len(found) > limit or page.has_next_page()
        page = gw.call(lambda client: page.get_next_page())  # noqa: B023  # gw.call runs it at once


def query_conclusions(gw: HonchoGateway, observer: str, target: str, query: str,
                      limit: int) -> list[Found]:
    """Semantic search over `observer`'s conclusions about `target` (needs embeddings on the
    server)."""
    found = gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target)
                    .query(query, top_k=limit))
    return [Found(c.id, c.content) for c in found[:limit]]


# -- evidence for a correction --------------------------------------------------------------------


@dataclass(frozen=True)
class SaidMessage:
    """A message of a session, as the evidence of a conclusion shows it."""

    id: str
    peer_id: str
    content: str
    created_at: Any  # a datetime as the SDK gives it


def conclusion_by_id(gw: HonchoGateway, observer: str, target: str,
                     conclusion_id: str) -> Conclusion | None:
    """The conclusion with this id, with its level, session and time, if it is one of
    `observer`'s about `target`; else None. Honcho at ddbb90e answers without `source_ids`."""
    listing = gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target)
                      .list(size=1, filters={"id": {"in": [conclusion_id]}}))
    return next((_conclusion(c) for c in listing.items if c.id == conclusion_id), None)


def conclusions_at_level(gw: HonchoGateway, observer: str, target: str, level: str, page: int,
                         size: int) -> ConclusionPage:
    """One page of `observer`'s conclusions about `target` at `level` (explicit, deductive,
    inductive or contradiction), newest first."""
    listing = gw.call(lambda client: gw.reader_peer(observer).conclusions_of(target)
                      .list(page=page, size=size, filters={"level": level}))
    return _conclusion_page(listing, size)


def messages_before(gw: HonchoGateway, session_id: str, at: datetime,
                    limit: int) -> list[SaidMessage]:
    """The newest `limit` messages of `session_id` made at `at` or before, newest first."""
    listing = gw.call(lambda client: gw.reader_session(session_id).messages(
        filters={"created_at": {"lte": at.isoformat()}}, size=limit, reverse=True))
    return [SaidMessage(m.id, m.peer_id, m.content, m.created_at) for m in listing.items[:limit]]


def refresh_card(gw: HonchoGateway, observer: str, target: str) -> None:
    """Ask Honcho to rebuild `observer`'s card of `target` from its conclusions alone (a
    `card_refresh` dream with `rebuild`: the current card is not shown to it). The SDK's
    `schedule_dream` sends only `omni`, so this posts to the same route on the SDK's HTTP client
    (its auth, timeouts and errors)."""
    def request(client: Any) -> None:
        client._get_http_client().post(
            f"/v3/workspaces/{client.workspace_id}/schedule_dream",
            body={"observer": observer, "observed": target, "dream_type": "card_refresh",
                  "rebuild": True})
    gw.call(request)


# -- messages and dreams ---------------------------------------------------------------------------


def search_session(gw: HonchoGateway, session_id: str, query: str, limit: int) -> list[Found]:
    found = gw.call(lambda client: gw.reader_session(session_id).search(query, limit=limit))
    return [Found(m.id, m.content, m.peer_id) for m in found[:limit]]


def search_workspace(gw: HonchoGateway, query: str, limit: int, scope: str | None) -> list[Found]:
    found = gw.call(lambda client: client.search(query, limit=limit,
                                                 **({"scope": scope} if scope else {})))
    return [Found(m.id, m.content, f"{m.session_id}/{m.peer_id}") for m in found[:limit]]


def schedule_dream(gw: HonchoGateway, observer: str, observed: str, session_id: str | None) -> None:
    gw.call(lambda client: client.schedule_dream(observer=observer, observed=observed,
                                                 session=session_id))


# -- cards and representations ---------------------------------------------------------------------


def read_card(gw: HonchoGateway, observer: str, target: str) -> list[str]:
    """`observer`'s card of `target`; [] when there is none. Honcho answers null for an observer
    with no card and 404 for an observer it has not seen yet (a chat whose first message is still
    queued): both mean no card, and reading creates nothing."""
    try:
        card = gw.call(lambda client: gw.reader_peer(observer).get_card(target=target))
    except PermanentError as exc:
        if exc.code == "http_404":
            return []
        raise
    return [str(fact) for fact in card or ()]


def set_card(gw: HonchoGateway, observer: str, target: str, facts: list[str]) -> list[str]:
    """Replace `observer`'s card of `target` with `facts`, whole (Honcho creates the observer if
    new; the target need not exist); returns the card as Honcho stored it."""
    stored = gw.call(lambda client: gw.reader_peer(observer).set_card(facts, target=target))
    return [str(fact) for fact in stored or ()]


def peer_view(gw: HonchoGateway, observer: str, target: str) -> PeerView:
    """What `observer` knows of `target` across sessions, in one request."""
    context = gw.call(lambda client: gw.reader_peer(observer).context(target=target))
    return PeerView(context.representation, tuple(context.peer_card or ()))


def scoped_peer_view(gw: HonchoGateway, observer: str, target: str, scope: str) -> PeerView:
    """What `observer` knows of `target` within `scope` (the card is not scoped), on one client."""
    def request(client: Any) -> PeerView:
        peer = gw.reader_peer(observer)
        return PeerView(peer.representation(target=target, scope=scope),
                        tuple(peer.get_card(target=target) or ()))
    return gw.call(request)


def self_view(gw: HonchoGateway, peer_id: str, scope: str | None) -> PeerView:
    """What the peer knows of itself (a scope confines the representation)."""
    peer = gw.reader_peer(peer_id)
    if scope:
        representation = gw.call(lambda client: peer.representation(scope=scope))
        card = gw.call(lambda client: peer.get_card())
    else:
        own = gw.call(lambda client: peer.context())
        representation, card = own.representation, own.peer_card
    return PeerView(representation, tuple(card or ()))


# -- a session's peers ----------------------------------------------------------------------------


def peer_configuration(gw: HonchoGateway, session_id: str,
                       peer_id: str) -> dict[str, bool | None] | None:
    """The server's flags of `peer_id` in the session ({"observe_me", "observe_others"}; None where
    it holds no explicit value), or None when the session or the peer in it does not exist."""
    try:
        config = gw.call(lambda client: gw.reader_session(session_id)
                         .get_peer_configuration(peer_id))
    except PermanentError as exc:
        if exc.code == "http_404":
            return None
        raise
    return {"observe_me": config.observe_me, "observe_others": config.observe_others}


def set_peer_configuration(gw: HonchoGateway, session_id: str, peer_id: str,
                           flags: dict[str, bool]) -> None:
    """Set `peer_id`'s flags in the session. Honcho ADDS the peer to the session when it is not in
    it: set only a peer read there first. 404 (PermanentError) for a session it does not hold."""
    config = sdk().api_types.SessionPeerConfig(**flags)
    gw.call(lambda client: gw.reader_session(session_id).set_peer_configuration(peer_id, config))


# -- the server ------------------------------------------------------------------------------------


def pending_work(gw: HonchoGateway, session_id: str) -> int:
    """Derivation work units of the session waiting or running."""
    status = gw.call(lambda client: client.queue_status(session=session_id))
    return status.pending_work_units + status.in_progress_work_units


def workspace_metadata(gw: HonchoGateway) -> Any:
    """The workspace's metadata: one authenticated request, as the operator's check makes."""
    return gw.call(lambda client: client.get_metadata())
