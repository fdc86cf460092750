"""A fake Honcho API (v3 routes the plugin uses), with dict state, a request log and scripted
faults.

Use `FakeHoncho().transport()` as the `httpx.MockTransport` of a real `honcho.Honcho`, or serve the
same object over loopback HTTP with `loopback.serve(fake)` so several processes share one state.
Behaviour follows the server facts in shared/HONCHO.md: get-or-create for workspaces, peers and
sessions; 1–100 messages per call; 25,000 characters per message; 401 for a wrong key. Checked
against a real server by tests/real_honcho/contract_fake_parity.py: like Honcho, the dialectic
(about its target, in its session) and conclusion creation answer 404 for a peer or session not seen
yet; a scope reports backfill only for sessions that had messages when they joined; an empty
listing has 0 pages; and `limit_to_session` drops the card. Checked by
contract_forget_completely.py: deleting a session deletes its conclusions, not those derived from
them; conclusions list by session, and by the ids they cite (`source_ids` contains a list; never in
an answer).
"""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

MAX_MESSAGES, MAX_CHARS = 100, 25_000
_ID = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
_WS = r"^/v3/workspaces/(?P<ws>[^/]+)"
# A representation as Honcho writes it, headings included (src/utils/representation.py,
# Representation.format_as_markdown), for tests of how recalled text reads.
HONCHO_REPRESENTATION = ("## Explicit Observations\n\n"
                         "[2025-05-01 10:00:00] alice keeps three beehives\n\n"
                         "## Deductive Observations\n\n"
                         "[2025-05-01 10:05:00] alice likes honey\n   Premises:\n"
                         "   - alice keeps three beehives\n\n")


@dataclass
class Fault:
    """One scripted failure: `kind` is status, reset or timeout; `after_store` lets the server act
    first."""

    match: str
    kind: str = "status"
    status: int = 500
    retry_after: str | None = None
    after_store: bool = False
    times: int = 1


class FakeHoncho:
    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.lock = threading.RLock()
        # notified on every request, for await_request
        self.arrived = threading.Condition(self.lock)
        self.workspaces: dict[str, dict] = {}
        self.peers: dict[tuple[str, str], dict] = {}
        self.sessions: dict[tuple[str, str], dict] = {}
        self.messages: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.faults: deque[Fault] = deque()
        # a request holding a message with this text gets a 422
        self.reject_marker: str | None = None
        self.scopes: dict[tuple[str, str], set[str]] = {}  # (workspace, scope) -> session ids
        # (workspace, scope) -> jobs
        self.backfills: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
        # (observer or "scope:<id>", target) -> text
        self.representations: dict[tuple[str, str], str] = {}
        self.cards: dict[tuple[str, str], list[str]] = {}
        self.summaries: dict[str, str] = {}  # session id -> summary text
        self.context_queries: list[dict] = []
        # e.g. 403: this key is not workspace-level
        self.scoped_context_status: int | None = None
        self.conclusions: dict[str, dict] = {}
        # ids never given again, as a real server's are unique
        self.deleted_conclusions: set[str] = set()
        self.dialectic_answer: str | None = "The user prefers green tea."
        self.dialectic_status: int | None = None  # 500 when the server has no LLM provider
        # Opt-in: the answers of the next chat requests, one each, in order (text, or an int: that
        # status); when it is empty, dialectic_status and dialectic_answer answer as before.
        self.dialectic_script: deque[str | int] = deque()
        self.dreams_status: int | None = None  # 400 when dreams are disabled
        # 500 for conclusion create/query without embeddings
        self.semantic_status: int | None = None
        # some servers reject the `id: {in: [...]}` conclusion filter
        self.id_filter_supported = True
        self.chat_requests: list[dict] = []
        # session id -> the deriver's pending work units the next queue-status reads return, one
        # each (the last one repeats); a session not named has no work at all, as before anything
        # was delivered
        self.queue_script: dict[str, list[int]] = {}
        self.queue_reads: list[str | None] = []  # the session each queue-status read named
        self.dreams: list[dict] = []
        self.deleted_sessions: list[str] = []  # session ids a DELETE removed, in order
        self._routes = [
            ("POST", r"^/v3/workspaces$", self._workspace),
            ("POST", _WS + r"/peers$", self._peer),
            ("POST", _WS + r"/sessions$", self._session),
            ("POST", _WS + r"/sessions/(?P<sid>[^/]+)/peers$", self._session_peers),
            ("DELETE", _WS + r"/sessions/(?P<sid>[^/]+)$", self._delete_session),
            ("GET", _WS + r"/sessions/(?P<sid>[^/]+)/peers/(?P<peer>[^/]+)/config$",
             self._peer_config),
            ("PUT", _WS + r"/sessions/(?P<sid>[^/]+)/peers/(?P<peer>[^/]+)/config$",
             self._set_peer_config),
            ("POST", _WS + r"/sessions/(?P<sid>[^/]+)/messages$", self._add_messages),
            ("POST", _WS + r"/sessions/(?P<sid>[^/]+)/messages/list$", self._list_messages),
            ("GET", _WS + r"/sessions/(?P<sid>[^/]+)/context$", self._context),
            ("POST", _WS + r"/scopes$", self._scope),
            ("POST", _WS + r"/scopes/(?P<scope>[^/]+)/sessions$", self._scope_sessions),
            ("GET", _WS + r"/scopes/(?P<scope>[^/]+)/status$", self._scope_status),
            ("GET", _WS + r"/queue/status$", self._queue_status),
            ("POST", _WS + r"/peers/(?P<peer>[^/]+)/chat$", self._chat),
            ("GET", _WS + r"/peers/(?P<peer>[^/]+)/context$", self._peer_context),
            ("POST", _WS + r"/peers/(?P<peer>[^/]+)/representation$",
             self._peer_representation),
            ("GET", _WS + r"/peers/(?P<peer>[^/]+)/card$", self._peer_card),
            ("PUT", _WS + r"/peers/(?P<peer>[^/]+)/card$", self._set_peer_card),
            ("POST", _WS + r"/conclusions$", self._create_conclusions),
            ("POST", _WS + r"/conclusions/list$", self._list_conclusions),
            ("POST", _WS + r"/conclusions/query$", self._query_conclusions),
            ("DELETE", _WS + r"/conclusions/(?P<cid>[^/]+)$", self._delete_conclusion),
            ("POST", _WS + r"/sessions/(?P<sid>[^/]+)/search$", self._search_session),
            ("POST", _WS + r"/search$", self._search_workspace),
            ("POST", _WS + r"/schedule_dream$", self._dream),
        ]

    # -- scripting ---------------------------------------------------------------------------------

    def fail(self, match: str = r"/messages$", **kw: Any) -> Fault:
        """Queue a fault for the next request whose path matches the regex `match` (default: add
        messages)."""
        fault = Fault(match=match, **kw)
        with self.lock:
            self.faults.append(fault)
        return fault

    def session_messages(self, session_id: str, workspace_id: str = "agent-zero") -> list[dict]:
        with self.lock:
            return [m for m in self.messages
                    if m["session_id"] == session_id and m["workspace_id"] == workspace_id]

    def await_request(self, match: str, count: int, timeout_s: float) -> int:
        """Block until `count` requests matched the regex `match` (or the timeout); returns how many
        did."""
        with self.arrived:
            self.arrived.wait_for(lambda: self._matching(match) >= count, timeout_s)
            return self._matching(match)

    def _matching(self, match: str) -> int:
        return sum(1 for _, path in self.requests if re.search(match, path))

    def count(self, fragment: str) -> int:
        """How many requests hit a path containing `fragment`."""
        with self.lock:
            return sum(1 for _, path in self.requests if fragment in path)

    # -- the API -----------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict, body: Any,
               headers: dict) -> tuple[int, dict, Any, Fault | None]:
        """Answer one request: (status, headers, json body, fault to apply after answering or
        None)."""
        with self.lock:
            self.requests.append((method, path))
            self.arrived.notify_all()
            fault = self._take_fault(path)
            if fault and not fault.after_store:
                if fault.kind != "status":
                    return 0, {}, None, fault
                return self._fault_response(fault) + (None,)
            public = path == "/health"  # the MCP service's health answers without auth
            if (not public and self.api_key is not None
                    and headers.get("authorization") != f"Bearer {self.api_key}"):
                return 401, {}, {"detail": "Invalid API key"}, None
            status, payload = self._route(method, path, query, body)
            if fault:
                return ((0, {}, None, fault) if fault.kind != "status"
                        else self._fault_response(fault) + (None,))
            return status, {}, payload, None

    def _take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if re.search(fault.match, path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    @staticmethod
    def _fault_response(fault: Fault) -> tuple[int, dict, Any]:
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        return fault.status, headers, {"detail": f"scripted {fault.status}"}

    def _route(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any]:
        for verb, pattern, handler in self._routes:
            match = re.match(pattern, path)
            if verb == method and match:
                return handler(body if isinstance(body, dict) else {}, query, **match.groupdict())
        return 404, {"detail": "Not found"}

    def _workspace(self, body: dict, query: dict) -> tuple[int, Any]:
        ws = body.get("id", "")
        if not _ID.match(ws):
            return 422, {"detail": "invalid workspace id"}
        created = ws not in self.workspaces
        self.workspaces.setdefault(ws, {"id": ws, "created_at": _now()})
        return 201 if created else 200, {"id": ws, "metadata": {}, "configuration": {},
                                         "created_at": self.workspaces[ws]["created_at"]}

    def _peer(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        if not _ID.match(body.get("id", "")):
            return 422, {"detail": "invalid peer id"}
        created = (ws, body["id"]) not in self.peers
        return 201 if created else 200, self.ensure_peer(ws, body["id"])

    def _session(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        sid = body.get("id", "")
        if not _ID.match(sid):
            return 422, {"detail": "invalid session id"}
        created = (ws, sid) not in self.sessions
        session = self._ensure_session(ws, sid)
        self._apply_peers(ws, sid, session, body.get("peers") or {})
        session["scopes"].update(body.get("scopes") or [])
        return 201 if created else 200, self._session_json(ws, sid)

    def _session_peers(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        self._apply_peers(ws, sid, self._ensure_session(ws, sid), body)
        return 200, self._session_json(ws, sid)

    def _delete_session(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        """Like Honcho (measured at ddbb90e): 202 and the session is gone from listings at once, its
        messages a moment later (the server deletes them in the background; here at once); 404 for a
        session it does not hold, deleted already included. Posting to the id again creates a new,
        empty session."""
        if self.sessions.pop((ws, sid), None) is None:
            return 404, {"detail": f"Session {sid} not found in workspace {ws}"}
        self.messages = [m for m in self.messages
                         if not (m["session_id"] == sid and m["workspace_id"] == ws)]
        # its conclusions go with it; those a dream derived from them (under no session) stay
        for cid in [cid for cid, c in self.conclusions.items()
                    if c["session_id"] == sid and c["workspace_id"] == ws]:
            del self.conclusions[cid]
            self.deleted_conclusions.add(cid)
        for members in (v for (w, _), v in self.scopes.items() if w == ws):
            members.discard(sid)
        self.deleted_sessions.append(sid)
        return 202, {"message": "Session deleted successfully"}

    def _peer_config(self, body: dict, query: dict, ws: str, sid: str,
                     peer: str) -> tuple[int, Any]:
        session = self.sessions.get((ws, sid))
        if session is None or peer not in session["peers"]:
            return 404, {"detail": "session peer not found"}
        config = session["peers"][peer]
        return 200, {"observe_me": config.get("observe_me"),
                     "observe_others": config.get("observe_others")}

    def _set_peer_config(self, body: dict, query: dict, ws: str, sid: str,
                         peer: str) -> tuple[int, Any]:
        """Like Honcho (contract_existing_sessions.py): the flags given replace the peer's; a peer
        of the workspace not in the session is added to it; 404 for a session or peer it does not
        hold."""
        session = self.sessions.get((ws, sid))
        if session is None or (ws, peer) not in self.peers:
            return 404, {"detail": "Session not found"}
        given = {k: body[k] for k in ("observe_me", "observe_others") if body.get(k) is not None}
        session["peers"][peer] = {**session["peers"].get(peer, {}), **given}
        return 204, None

    def _add_messages(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        batch = body.get("messages")
        if not isinstance(batch, list) or not 1 <= len(batch) <= MAX_MESSAGES:
            return 422, {"detail": "messages must hold 1 to 100 items"}
        for message in batch:
            content = message.get("content", "")
            if len(content) > MAX_CHARS or not _ID.match(message.get("peer_id", "")):
                return 422, {"detail": "invalid message"}
            if self.reject_marker and self.reject_marker in content:
                return 422, {"detail": "rejected by the test"}
        session = self._ensure_session(ws, sid)
        stored = []
        for message in batch:
            self.ensure_peer(ws, message["peer_id"])
            session["peers"].setdefault(message["peer_id"], {})
            record = {"id": f"msg{len(self.messages) + 1}",
                      "content": message["content"].replace("\x00", ""),
                      "peer_id": message["peer_id"], "session_id": sid, "workspace_id": ws,
                      "metadata": message.get("metadata") or {},
                      "created_at": message.get("created_at") or _now(),
                      "token_count": len(message["content"]) // 4}
            self.messages.append(record)
            stored.append(record)
        return 201, stored

    def _list_messages(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        filters = body.get("filters") or {}
        found = [m for m in self.session_messages(sid, ws) if _matches(m, filters)]
        if query.get("reverse") == "true":  # like Honcho: newest first
            found.reverse()
        page, size = int(query.get("page", 1)), int(query.get("size", 50))
        items = found[(page - 1) * size: page * size]
        return 200, {"items": items, "total": len(found), "page": page, "size": size,
                     "pages": -(-len(found) // size)}

    def _context(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        self.context_queries.append(dict(query))
        scope, target = query.get("scope"), query.get("peer_target")
        if scope and self.scoped_context_status:
            return self.scoped_context_status, {
                "detail": "scoped context needs a workspace-level key"}
        observer = f"scope:{scope}" if scope else query.get("peer_perspective", "")
        budget = int(query.get("tokens", 100_000)) * 4
        messages, used = [], 0
        for message in reversed(self.session_messages(sid, ws)):
            used += len(message["content"])
            if used > budget:
                break
            messages.insert(0, message)
        summary = self.summaries.get(sid)
        return 200, {"id": sid, "messages": messages,
                     "summary": {"content": summary, "message_id": "m", "summary_type": "short",
                                 "created_at": _now(), "token_count": len(summary) // 4}
                     if summary else None,
                     "peer_representation": self.representations.get((observer, target)),
                     # a card has no per-session provenance: Honcho leaves it out of a
                     # session-limited context
                     "peer_card": None if query.get("limit_to_session") == "true"
                     else self.cards.get((observer, target))}

    def _peer_context(self, body: dict, query: dict, ws: str, peer: str) -> tuple[int, Any]:
        """What `peer` knows about the target across sessions: representation and card (404 for a
        peer not seen yet, as the real server answers)."""
        target = query.get("target", peer)
        missing = self._missing(ws, [peer, target], None)
        if missing:
            return 404, {"detail": missing}
        return 200, {"peer_id": peer, "target_id": target,
                     "representation": self.representations.get((peer, target)),
                     "peer_card": self.cards.get((peer, target))}

    def _peer_representation(self, body: dict, query: dict, ws: str,
                             peer: str) -> tuple[int, Any]:
        scope, target = body.get("scope"), body.get("target", peer)
        if scope and self.scoped_context_status:
            return self.scoped_context_status, {
                "detail": "scoped representation needs a workspace-level key"}
        if scope and (ws, scope) not in self.scopes:
            return 404, {"detail": "scope not found"}
        observer = f"scope:{scope}" if scope else peer
        return 200, {"representation": self.representations.get((observer, target)) or ""}

    def _peer_card(self, body: dict, query: dict, ws: str, peer: str) -> tuple[int, Any]:
        return 200, {"peer_card": self.cards.get((peer, query.get("target", peer)))}

    def _set_peer_card(self, body: dict, query: dict, ws: str, peer: str) -> tuple[int, Any]:
        """Like Honcho: the card replaces the observer's card of the target whole; the observer is
        created if new, the target need not exist but is never a scope; NUL bytes are stripped; the
        card is answered."""
        card, target = body.get("peer_card"), query.get("target", peer)
        if not isinstance(card, list) or not all(isinstance(fact, str) for fact in card):
            return 422, {"detail": "peer_card must be a list of strings"}
        if target.startswith("scope."):
            return 422, {"detail": "no peer card is ever formed about a scope"}
        self.ensure_peer(ws, peer)
        self.cards[(peer, target)] = [fact.replace("\x00", "") for fact in card]
        return 200, {"peer_card": self.cards[(peer, target)]}

    def _scope(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        scope = body.get("id", "")
        if not _ID.match(scope) or len(scope) > 506 or scope.startswith("scope."):
            return 422, {"detail": "invalid scope id"}
        created = (ws, scope) not in self.scopes
        self.scopes.setdefault((ws, scope), set())
        return 201 if created else 200, {"id": scope, "metadata": {}, "created_at": _now()}

    def _scope_sessions(self, body: dict, query: dict, ws: str, scope: str) -> tuple[int, Any]:
        if (ws, scope) not in self.scopes:
            return 404, {"detail": "scope not found"}
        ids = body.get("session_ids") or []
        if any((ws, sid) not in self.sessions for sid in ids):
            return 404, {"detail": "session not found"}
        # like Honcho: a session that already has messages gets a backfill job
        for sid in ids:
            if sid not in self.scopes[(ws, scope)] and self.session_messages(sid, ws):
                self.backfills[(ws, scope)][sid] = {
                    "state": "completed", "updated_at": _now(),
                    "docs_copied": len(self.session_messages(sid, ws))}
        self.scopes[(ws, scope)].update(ids)
        return 200, None

    def _scope_status(self, body: dict, query: dict, ws: str, scope: str) -> tuple[int, Any]:
        if (ws, scope) not in self.scopes:
            return 404, {"detail": "scope not found"}
        return 200, {"backfill_status": dict(self.backfills[(ws, scope)])}

    def _queue_status(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        """The deriver's queue, as the real server counts it: work units total, done, running,
        waiting."""
        session = query.get("session_id")
        self.queue_reads.append(session)
        script = self.queue_script.get(session or "", [])
        pending = script.pop(0) if len(script) > 1 else (script[0] if script else 0)
        total = pending + (1 if script else 0)  # a drained queue still counts the work it did
        return 200, {"total_work_units": total, "completed_work_units": total - pending,
                     "in_progress_work_units": 0, "pending_work_units": pending}

    def _chat(self, body: dict, query: dict, ws: str, peer: str) -> tuple[int, Any]:
        self.chat_requests.append({"peer": peer, **body})
        # like Honcho: the asking peer is get-or-created, the others must exist
        self.ensure_peer(ws, peer)
        missing = self._missing(ws, [body.get("target")], body.get("session_id"))
        if missing:
            return 404, {"detail": f"{missing} not found"}
        if self.dialectic_script:
            scripted = self.dialectic_script.popleft()
            if isinstance(scripted, int):
                return scripted, {"detail": "scripted dialectic failure"}
            return 200, {"content": scripted}
        if self.dialectic_status:
            return self.dialectic_status, {"detail": "dialectic unavailable"}
        return 200, {"content": self.dialectic_answer}

    def _conclusion_json(self, c: dict) -> dict:
        # A test may store a derived conclusion's level; like Honcho at ddbb90e, no source_ids.
        return {"level": c.get("level", "explicit"),
                **{k: c[k] for k in ("id", "content", "observer_id", "observed_id", "session_id",
                                     "created_at")}}

    def _create_conclusions(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        if self.semantic_status:
            return self.semantic_status, {"detail": "no embedding provider"}
        for item in body.get("conclusions") or []:
            missing = self._missing(ws, [item.get("observer_id"), item.get("observed_id")],
                                    item.get("session_id"))
            if missing:
                return 404, {"detail": f"{missing} not found"}
        made = []
        for item in body.get("conclusions") or []:
            serial = len(self.conclusions) + 1
            while (f"c{serial:04d}" in self.conclusions
                   or f"c{serial:04d}" in self.deleted_conclusions):
                serial += 1
            cid = f"c{serial:04d}"
            self.conclusions[cid] = {"id": cid, "content": item["content"],
                                     "observer_id": item["observer_id"],
                                     "observed_id": item["observed_id"],
                                     "session_id": item.get("session_id"),
                                     "created_at": _now(), "workspace_id": ws}
            made.append(self._conclusion_json(self.conclusions[cid]))
        return 201, made

    def _matching_conclusions(self, ws: str, filters: dict) -> list[dict]:
        return [self._conclusion_json(c) for c in self.conclusions.values()
                if c["workspace_id"] == ws and _conclusion_matches(c, filters)]

    def _list_conclusions(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        filters = (body or {}).get("filters") or {}
        if "id" in filters and not self.id_filter_supported:
            return 422, {"detail": "unsupported filter"}
        try:
            found = self._matching_conclusions(ws, filters)  # in creation order
        except _FilterRefused as exc:
            return 422, {"detail": str(exc)}
        # like Honcho: newest first, unless `reverse` asks for oldest first
        if query.get("reverse") != "true":
            found.reverse()
        page, size = int(query.get("page", 1)), int(query.get("size", 50))
        return 200, {"items": found[(page - 1) * size: page * size], "total": len(found),
                     "page": page, "size": size, "pages": -(-len(found) // size)}

    def _query_conclusions(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        if self.semantic_status:
            return self.semantic_status, {"detail": "no embedding provider"}
        words = set(body.get("query", "").lower().split())
        found = [c for c in self._matching_conclusions(ws, body.get("filters") or {})
                 if words & set(c["content"].lower().split())]
        return 200, found[: int(body.get("top_k", 10))]

    def _delete_conclusion(self, body: dict, query: dict, ws: str, cid: str) -> tuple[int, Any]:
        if self.conclusions.pop(cid, None) is None:  # like Honcho: no observer check on delete
            return 404, {"detail": "conclusion not found"}
        self.deleted_conclusions.add(cid)
        return 200, None

    def _search(self, messages: list[dict], body: dict) -> list[dict]:
        # Honcho's search is a nearest-neighbour one over message embeddings: it answers the closest
        # messages up to the limit even when none shares a word with the query (the contract
        # scenarios session_search_*). Here closeness is the number of shared words; ties keep
        # message order.
        words = set(body.get("query", "").lower().split())
        ranked = sorted(messages, key=lambda m: -len(words & set(m["content"].lower().split())))
        return ranked[: int(body.get("limit", 10))]

    def _search_session(self, body: dict, query: dict, ws: str, sid: str) -> tuple[int, Any]:
        return 200, self._search(self.session_messages(sid, ws), body)

    def _search_workspace(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        messages = [m for m in self.messages if m["workspace_id"] == ws]
        if body.get("scope"):
            members = self.scopes.get((ws, body["scope"]), set())
            messages = [m for m in messages if m["session_id"] in members]
        return 200, self._search(messages, body)

    def _dream(self, body: dict, query: dict, ws: str) -> tuple[int, Any]:
        if self.dreams_status:
            return self.dreams_status, {"detail": "dreams are disabled"}
        self.dreams.append(dict(body))
        return 200, None

    # -- state helpers -----------------------------------------------------------------------------

    def _missing(self, ws: str, peer_ids: list, session_id: str | None) -> str | None:
        """What a read-only call names that the server has not seen (Honcho answers 404 for it)."""
        for peer_id in peer_ids:
            if peer_id and (ws, peer_id) not in self.peers:
                return f"peer {peer_id}"
        if session_id and (ws, session_id) not in self.sessions:
            return f"session {session_id}"
        return None

    def ensure_peer(self, ws: str, peer_id: str) -> dict:
        """Get or create a peer, as the server does on a peer's first message: tests call it to set
        up peers Honcho already knows (after a first delivery)."""
        with self.lock:
            self.workspaces.setdefault(ws, {"id": ws, "created_at": _now()})
            return self.peers.setdefault((ws, peer_id), {
                "id": peer_id, "workspace_id": ws, "created_at": _now(), "metadata": {},
                "configuration": {}})

    def _ensure_session(self, ws: str, sid: str) -> dict:
        self.workspaces.setdefault(ws, {"id": ws, "created_at": _now()})
        return self.sessions.setdefault((ws, sid), {"created_at": _now(), "peers": {},
                                                    "scopes": set(),
                                                    "peers_set_before_messages": {}})

    def _apply_peers(self, ws: str, sid: str, session: dict, peers: dict) -> None:
        has_messages = bool(self.session_messages(sid, ws))
        for peer_id, config in peers.items():
            self.ensure_peer(ws, peer_id)
            if peer_id in session["peers"]:
                # as the real server: a peer already in the session keeps its configuration
                continue
            session["peers"][peer_id] = dict(config or {})
            if not has_messages:
                session["peers_set_before_messages"][peer_id] = dict(config or {})

    def _session_json(self, ws: str, sid: str) -> dict:
        return {"id": sid, "is_active": True, "workspace_id": ws, "metadata": {},
                "configuration": {}, "created_at": self.sessions[(ws, sid)]["created_at"]}

    # -- transports --------------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        """An httpx transport that answers from this fake, raising httpx errors for resets and
        timeouts."""
        def answer(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content) if request.content else None
            status, headers, payload, fault = self.handle(request.method, request.url.path,
                                                          dict(request.url.params), body,
                                                          dict(request.headers))
            if fault is not None:
                raise _transport_error(fault, request)
            if payload is None:
                return httpx.Response(status, headers=headers)
            return httpx.Response(status, headers=headers, json=payload)
        return httpx.MockTransport(answer)


def _transport_error(fault: Fault, request: httpx.Request) -> Exception:
    if fault.kind == "timeout":
        return (httpx.ReadTimeout if fault.after_store else httpx.ConnectTimeout)(
            "scripted timeout", request=request)
    if fault.kind == "connect":
        return httpx.ConnectError("scripted connection refused", request=request)
    return httpx.RemoteProtocolError("scripted connection reset", request=request)


def _matches(message: dict, filters: dict) -> bool:
    """The subset of Honcho's filter language the plugin uses: AND, OR, metadata, field equality
    and `created_at` up to a time (`lte`)."""
    for key, wanted in filters.items():
        if key == "created_at" and isinstance(wanted, dict):
            if _at(message["created_at"]) > _at(wanted["lte"]):
                return False
            continue
        if key == "AND" and not all(_matches(message, f) for f in wanted):
            return False
        if key == "OR" and not any(_matches(message, f) for f in wanted):
            return False
        if key == "metadata" and any(message["metadata"].get(k) != v for k, v in wanted.items()):
            return False
        if key not in ("AND", "OR", "metadata") and message.get(key) != wanted:
            return False
    return True


class _FilterRefused(Exception):
    """A conclusion filter Honcho answers 422 for."""


def _conclusion_matches(c: dict, filters: dict) -> bool:
    """The subset of Honcho's conclusion filters the plugin uses: OR, equality of the pair, session
    and level, `id` in a list, and `source_ids` containing a LIST of ids (a derived conclusion's
    premises; Honcho refuses a bare string with 422 and never returns `source_ids`)."""
    for key, wanted in filters.items():
        if key == "OR":
            if not any(_conclusion_matches(c, f) for f in wanted):
                return False
        elif key == "id":
            if isinstance(wanted, dict) and c["id"] not in wanted.get("in", []):
                return False
        elif key == "source_ids":
            cited = wanted.get("contains") if isinstance(wanted, dict) else None
            if not isinstance(cited, list):
                raise _FilterRefused("a JSONB column takes an object, optionally under 'contains'")
            if not set(cited) <= set(c.get("source_ids") or ()):
                return False
        elif key in ("observer_id", "observed_id", "session_id") and c[key] != wanted:
            return False
        elif key == "level" and c.get("level", "explicit") != wanted:
            return False
    return True


def _at(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _now() -> str:
    return datetime.now(UTC).isoformat()
