"""The memory inspector: what Honcho holds about the user, and what the user may do about it.

It shows the card, the conclusions, the newest local writes and the base pack, every text made safe
first; it forgets a conclusion, replaces the card, undoes a recent forget, remembers for a while and
pins. See docs/architecture.md.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..errors import HonchoRequestError, OutboxError
from ..gateway import deadline, queries
from ..gateway.gateway import HonchoGateway
from ..recall.receipts import RECEIPT_ID
from ..safety.redact import redact
from ..safety.untrusted import UNTRUSTED, neutralize
from ..settings.config import Settings
from ..storage import chats as chat_rows
from ..storage import expiries, memory_log
from ..storage.db import with_existing
from ..storage.memory_log import KeptWrite, MemoryWrite, WriteKind
from ..tool.actions import MAX_FACT_CHARS, MAX_FACTS, MAX_QUERY, ActionContext, error_line, run_verb

PAGE_SIZE = 50  # conclusions a page (and at most this many answer a search)
MAX_PAGE = 1_000
UNDO_WINDOW_S = 600.0
RECENT_WRITES = 20
MAX_TEXT_CHARS = 1_000  # a conclusion or write as shown, cut after redaction
MAX_BLOCK_CHARS = 20_000  # the base pack's block as shown
# the most recently captured chat -> session mappings read to name a conclusion's chats
CHAT_MAPPINGS = 1_000
CHATS_SHOWN = 3
HIDDEN = "[hidden: this text could not be made safe to show]"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# The forgotten ids whose undo runs in this process: two undos of one forget could both find it not
# undone yet. A set under a short lock, never a lock held across the request to Honcho.
_undoing: set[str] = set()
_undoing_lock = threading.Lock()


class BasePacks(Protocol):
    """What the inspector reads of recall (the Recaller)."""

    def base_preview(self, settings: Settings, session_id: str, scope_id: str | None,
                     template: str) -> str | None: ...

    def warm(self, settings: Settings, scope_id: str | None = None) -> bool: ...

    def held_block(self, settings: Settings, receipt_id: str) -> str | None: ...


@dataclass
class Inspector:
    """The chat the inspector looks from: the memory tool's context for it (settings with its
    peers, its session and scope, the host's secrets and masker, the gateway and the local record),
    recall's base packs with the block template, and a wall clock for the undo window."""

    actions: ActionContext
    recall: BasePacks
    template: str
    clock: Callable[[], float] = time.time

    def within_deadline(self) -> AbstractContextManager:
        """One action's deadline, for all its requests to Honcho: two SDK timeouts (forget and
        edit_card run the memory tool's verbs, under the same deadline)."""
        return deadline.within(self.actions.settings.operation_deadline_s, self.actions.monotonic)

    @property
    def gateway(self) -> HonchoGateway:
        if self.actions.gateway is None:
            raise ValueError("the inspector needs the memory tool's gateway")
        return self.actions.gateway


def view(ins: Inspector, page: Any = 1) -> dict[str, Any]:
    """Everything the inspector shows, with page `page` of the conclusions. A part Honcho or the
    outbox could not give says so (`error`: a sanitized code); the other parts are still shown."""
    s = ins.actions.settings
    with ins.within_deadline():  # the card and the conclusions' page together
        card, listed = _card(ins), conclusions(ins, page)
    return {"ok": True, "label": UNTRUSTED,
            "peers": {"observer": s.agent_peer_id, "observed": s.user_peer_id},
            "card": card, "conclusions": listed, "writes": _writes(ins),
            "base_pack": base_pack(ins), "undo_window_s": UNDO_WINDOW_S}


def conclusions(ins: Inspector, page: Any = 1) -> dict[str, Any]:
    """One page of the agent's conclusions about the user, newest first (Honcho's listing order)."""
    number = _page(page)
    if number is None:
        return {"error": f"page must be a whole number from 1 to {MAX_PAGE}"}
    s, gw = ins.actions.settings, ins.gateway
    try:
        with ins.within_deadline():
            listing = queries.list_conclusions(gw, s.agent_peer_id, s.user_peer_id, number,
                                               PAGE_SIZE)
    except HonchoRequestError as exc:
        return {"error": exc.code}
    chats = _chats(ins)
    return {"items": _with_ends(ins, [_conclusion(ins, c.id, c.content, c.session_id, c.created_at,
                                                  chats, c.level) for c in listing.items]),
            "page": number, "pages": listing.pages, "total": listing.total}


def search(ins: Inspector, query: Any) -> dict[str, Any]:
    """The agent's conclusions about the user nearest to `query` (masked and redacted before it is
    sent), at most PAGE_SIZE; Honcho's semantic query through the tool's call."""
    if not isinstance(query, str) or not query.strip():
        return {"ok": False, "message": "Type what to search for."}
    if len(query) > MAX_QUERY:
        return {"ok": False,
                "message": f"The search is {len(query):,} characters; the limit is {MAX_QUERY:,}."}
    a, s = ins.actions, ins.actions.settings
    try:
        sent = redact(a.mask(query.strip()), a.secrets)
        with ins.within_deadline():
            found = queries.query_conclusions(ins.gateway, s.agent_peer_id, s.user_peer_id, sent,
                                              PAGE_SIZE)
    except HonchoRequestError as exc:
        return {"ok": False, "error": exc.code, "message": error_line("search", exc)}
    except Exception:  # RedactionError, or the host's masker failing: nothing is sent
        return {"ok": False,
                "message": "The search could not be made safe to send; nothing was sent."}
    chats = _chats(ins)
    return {"ok": True, "items": _with_ends(ins, [_conclusion(ins, f.id, f.content, f.where or None,
                                                              None, chats) for f in found])}


def forget(ins: Inspector, conclusion_id: Any, confirmed: Any) -> dict[str, Any]:
    """Forget one of the agent's conclusions about the user, only when `confirmed` is true (the UI's
    confirm step); the tool's forget checks it is one and keeps its text for an undo."""
    return _confirmed_verb(ins, confirmed, "forget", {"id": conclusion_id, "confirm": True},
                           "Not forgotten: forgetting")


def edit_card(ins: Inspector, facts: Any) -> dict[str, Any]:
    """Replace the agent's card of the user with `facts` (a list of texts: the whole new card)
    through the tool's profile: 1 to MAX_FACTS facts of at most MAX_FACT_CHARS, each masked and
    redacted, the card it replaced kept in the local record."""
    # The tool reads the card when `facts` is empty text: never here.
    if not isinstance(facts, list):
        return {"ok": False, "message": "`facts` must be a list of texts: the whole new card."}
    result = run_verb("profile", {"facts": facts}, ins.actions)
    return {"ok": result.ok, "message": result.text}


def undo(ins: Inspector, conclusion_id: Any) -> dict[str, Any]:
    """Create again the conclusion whose forget was kept within UNDO_WINDOW_S, from the text kept
    (docs/architecture.md, Operations, says what it cannot restore)."""
    if not isinstance(conclusion_id, str) or not _ID.match(conclusion_id):
        return {"ok": False, "message": "`id` must be a forgotten conclusion's id."}
    with _undoing_lock:
        if conclusion_id in _undoing:
            return {"ok": False, "error": "undo_running",
                    "message": f"Conclusion {conclusion_id} is being restored."}
        _undoing.add(conclusion_id)
    try:
        with ins.within_deadline():
            return _undo(ins, conclusion_id)
    finally:
        with _undoing_lock:
            _undoing.discard(conclusion_id)


def _undo(ins: Inspector, conclusion_id: str) -> dict[str, Any]:
    a, s = ins.actions, ins.actions.settings
    try:
        kept: list[KeptWrite] = with_existing(s, lambda db: memory_log.records(
            db, s.destination(), s.agent_peer_id, s.user_peer_id, memory_log.MAX_RECORDS,
            since=ins.clock() - UNDO_WINDOW_S), [])
    except OutboxError as exc:
        return {"ok": False, "error": exc.code,
                "message": f"The local record could not be read ({exc.code})."}
    forgot = next((k for k in kept
                   if k.write.kind == WriteKind.FORGET and k.write.conclusion_id == conclusion_id),
                  None)
    if forgot is None:
        return {"ok": False, "error": "not_in_window",
                "message": f"Conclusion {conclusion_id} was not forgotten within the last "
                           f"{UNDO_WINDOW_S / 60:.0f} minutes; nothing was created."}
    if any(_restores(k) == conclusion_id for k in kept if k.seq > forgot.seq):
        return {"ok": False, "error": "already_undone",
                "message": f"Conclusion {conclusion_id} was restored already."}
    text = _sendable(ins, forgot.write.content)
    if text is None:
        return {"ok": False, "error": "no_text",
                "message": "Its text was not kept (it could not be made safe),"
                           " so it cannot be created again."}
    try:
        made = queries.create_conclusion(ins.gateway, s.agent_peer_id, s.user_peer_id, text, None)
    except HonchoRequestError as exc:
        return {"ok": False, "error": exc.code, "message": error_line("undo", exc)}
    record = json.dumps({"text": text, "restores": conclusion_id}, ensure_ascii=False)
    note = _record(ins, MemoryWrite(made.id, WriteKind.RESTORE, record, s.destination(),
                                    s.agent_peer_id, s.user_peer_id, None, a.scope_id))
    return {"ok": True, "id": made.id,
            "message": f"Restored conclusion {conclusion_id} as {made.id}:"
                       " its kept text, under a new id." + note}


# -- memories that expire ----------------------------------------------------------------------


def remember(ins: Inspector, text: Any, expires_in: Any = None) -> dict[str, Any]:
    """Remember `text` as a conclusion through the tool's remember (its bounds and redaction), for
    the lifetime `expires_in` ("90m", "12h", "7d") when one is given."""
    args = {"content": text, "expires_in": expires_in or None}
    result = run_verb("remember", args, ins.actions)
    return {"ok": result.ok, "message": result.text}


def pin(ins: Inspector, conclusion_id: Any) -> dict[str, Any]:
    """Remove a conclusion's lifetime: it stays in Honcho until forgotten."""
    if not isinstance(conclusion_id, str) or not _ID.match(conclusion_id):
        return {"ok": False, "message": "`id` must be a conclusion's id."}
    s = ins.actions.settings
    try:
        outcome = with_existing(s, lambda db: expiries.pin(db, s.destination(), conclusion_id),
                                "not_expiring")
    except OutboxError as exc:
        return {"ok": False, "error": exc.code,
                "message": f"The local record could not be changed ({exc.code})."}
    if outcome == "pinned":
        return {"ok": True, "message": f"Conclusion {conclusion_id} is pinned: it no longer"
                                       " expires."}
    return {"ok": False, "error": outcome,
            "message": {"deleting": f"Conclusion {conclusion_id} is being deleted now: its"
                                    " lifetime ended.",
                        "not_expiring": f"Conclusion {conclusion_id} has no lifetime to"
                                        " remove."}[outcome]}


def _with_ends(ins: Inspector, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conclusions shown, each with when its lifetime ends and the seconds left (None for
    one without a lifetime, and for all when the local record cannot be read)."""
    s, now = ins.actions.settings, ins.clock()
    try:
        ends: dict[str, float] = with_existing(
            s, lambda db: expiries.ends(db, s.destination(), [i["id"] for i in items]), {})
    except OutboxError:
        ends = {}
    for item in items:
        end = ends.get(item["id"])
        item["expires_at"] = _iso(end) if end is not None else None
        item["expires_in_s"] = max(0.0, end - now) if end is not None else None
    return items


# -- correct, with what evidence there is ----------------------------------------------------------

LEVELS = ("explicit", "deductive", "inductive", "contradiction")
CORRECT_ACTIONS = ("correct", "correct_fact", "rebuild_card", "evidence", "messages", "level")
EVIDENCE_SHOWN = 20  # conclusions resting on one, at most
MESSAGES_SHOWN = 8  # the chat's messages before a conclusion was made, at most
PREMISES_FROM_MESSAGES = ("Drawn from the chat's messages; Honcho does not say which (it keeps no"
                          " message ids for a conclusion). The chat's messages before it was made"
                          " can be shown.")
PREMISES_WRITTEN = ("Written by the memory tool or this inspector (remember, correct or undo), not"
                    " drawn from the chat's messages: the local record of memory writes keeps it.")
PREMISES_UNAVAILABLE = ("This Honcho server does not say which conclusions this one rests on (its"
                        " answers carry no source_ids), so its premises cannot be shown; what"
                        " rests on it is listed.")


def correct(ins: Inspector, conclusion_id: Any, content: Any, confirmed: Any) -> dict[str, Any]:
    """Replace a wrong conclusion by `content` in one step, only when `confirmed` is true: the
    tool's correct (the right one created first, the wrong one deleted second, its forget
    undoable)."""
    return _corrected(ins, confirmed, {"id": str(conclusion_id or ""), "content": content})


def correct_fact(ins: Inspector, fact: Any, content: Any, confirmed: Any) -> dict[str, Any]:
    """Replace a fact of the agent's card of the user (`fact`: as the inspector shows it) by
    `content`, only when `confirmed` is true."""
    return _corrected(ins, confirmed, {"fact": fact if isinstance(fact, str) else "",
                                       "content": content})


def _confirmed_verb(ins: Inspector, confirmed: Any, verb: str, args: dict[str, Any],
                    refused: str) -> dict[str, Any]:
    """The tool's `verb` by the user's hand, only when `confirmed` is true (sent after the UI's
    confirm step); `refused` begins the answer otherwise ("Not forgotten: forgetting")."""
    if confirmed is not True:
        return {"ok": False, "error": "not_confirmed",
                "message": f"{refused} needs `confirmed: true`, sent after the confirm step."}
    result = run_verb(verb, args, ins.actions)
    return {"ok": result.ok, "message": result.text}


def _corrected(ins: Inspector, confirmed: Any, args: dict[str, Any]) -> dict[str, Any]:
    return _confirmed_verb(ins, confirmed, "correct", {**args, "confirm": True},
                           "Not corrected: correcting")


def rebuild_card(ins: Inspector, confirmed: Any) -> dict[str, Any]:
    """Ask Honcho to rebuild the agent's card of the user from its conclusions alone, only when
    `confirmed` is true; the card it had is kept in the local record."""
    return _confirmed_verb(ins, confirmed, "profile", {"rebuild": True},
                           "Not rebuilt: rebuilding")


def at_level(ins: Inspector, level: Any, page: Any = 1) -> dict[str, Any]:
    """One page of the agent's conclusions about the user at `level` (one of LEVELS), newest
    first: contradictions, where the server has them."""
    number = _page(page)
    if level not in LEVELS or number is None:
        return {"error": f"level must be one of {', '.join(LEVELS)}, and page a whole number"
                         f" from 1 to {MAX_PAGE}"}
    s = ins.actions.settings
    try:
        with ins.within_deadline():
            listing = queries.conclusions_at_level(ins.gateway, s.agent_peer_id, s.user_peer_id,
                                                   level, number, PAGE_SIZE)
    except HonchoRequestError as exc:
        return {"error": exc.code}
    chats = _chats(ins)
    return {"items": _with_ends(ins, [_conclusion(ins, c.id, c.content, c.session_id,
                                                  c.created_at, chats, c.level)
                                      for c in listing.items]),
            "page": number, "pages": listing.pages, "total": listing.total, "level": level}


def evidence(ins: Inspector, conclusion_id: Any) -> dict[str, Any]:
    """A conclusion with its level, session and chats; its premises, or what the server cannot
    say of them; and the conclusions resting on it (at most EVIDENCE_SHOWN)."""
    found = _found(ins, conclusion_id)
    if "ok" in found:
        return found
    c, s = found["conclusion"], ins.actions.settings
    try:
        with ins.within_deadline():
            resting, more = queries.citing_conclusions(ins.gateway, [c.id], EVIDENCE_SHOWN)
        rested: dict[str, Any] = {
            "items": [{"id": r.id, "text": _shown(ins, r.content, MAX_TEXT_CHARS),
                       "level": r.level} for r in resting
                      if (r.observer, r.observed) == (s.agent_peer_id, s.user_peer_id)],
            "more": more}
    except HonchoRequestError as exc:
        rested = {"error": exc.code}
    premises = ({"state": "written", "message": PREMISES_WRITTEN} if _written_here(ins, c.id)
                else {"state": "from_messages", "message": PREMISES_FROM_MESSAGES}
                if c.level == "explicit"
                else {"state": "unavailable", "message": PREMISES_UNAVAILABLE})
    return {"ok": True, "premises": premises, "rested_on_by": rested,
            "conclusion": _conclusion(ins, c.id, c.content, c.session_id, c.created_at,
                                      _chats(ins), c.level)}


def messages(ins: Inspector, conclusion_id: Any) -> dict[str, Any]:
    """The chat's messages made before the conclusion was (at most MESSAGES_SHOWN, oldest first):
    what it was likely drawn from, since Honcho names no message of a conclusion."""
    found = _found(ins, conclusion_id)
    if "ok" in found:
        return found
    c = found["conclusion"]
    if not c.session_id or not isinstance(c.created_at, datetime):
        return {"ok": True, "session": None, "items": [],
                "message": "Honcho names no chat for this conclusion (a derived one lives under"
                           " the dream's session or none), so there are no messages to show."}
    try:
        with ins.within_deadline():
            said = queries.messages_before(ins.gateway, c.session_id, c.created_at,
                                           MESSAGES_SHOWN)
    except HonchoRequestError as exc:
        return {"ok": False, "error": exc.code, "message": error_line("messages", exc)}
    items = [{"peer": m.peer_id, "text": _shown(ins, m.content, MAX_TEXT_CHARS),
              "at": m.created_at.isoformat() if isinstance(m.created_at, datetime) else None}
             for m in reversed(said)]
    return {"ok": True, "session": c.session_id, "items": items,
            "message": f"The last {len(items)} messages of the chat before it was made."}


def _written_here(ins: Inspector, conclusion_id: str) -> bool:
    """Whether the local record says the memory tool or this inspector created this conclusion
    (False when the record cannot be read)."""
    s = ins.actions.settings
    try:
        kept: list[KeptWrite] = with_existing(s, lambda db: memory_log.records(
            db, s.destination(), s.agent_peer_id, s.user_peer_id, memory_log.MAX_RECORDS), [])
    except OutboxError:
        return False
    return any(k.write.conclusion_id == conclusion_id
               and k.write.kind in (WriteKind.REMEMBER, WriteKind.RESTORE) for k in kept)


def _found(ins: Inspector, conclusion_id: Any) -> dict[str, Any]:
    """{"conclusion": the agent's conclusion about the user with this id}, or an answer saying why
    there is none (it holds "ok")."""
    if not isinstance(conclusion_id, str) or not _ID.match(conclusion_id):
        return {"ok": False, "message": "`id` must be a conclusion's id."}
    s = ins.actions.settings
    try:
        with ins.within_deadline():
            found = queries.conclusion_by_id(ins.gateway, s.agent_peer_id, s.user_peer_id,
                                             conclusion_id)
    except HonchoRequestError as exc:
        return {"ok": False, "error": exc.code, "message": error_line("evidence", exc)}
    if found is None:
        return {"ok": False, "message": f"Conclusion {conclusion_id} is not one of the agent's"
                                        " conclusions about the user."}
    return {"conclusion": found}


# -- the parts of the view -------------------------------------------------------------------------


def _card(ins: Inspector) -> dict[str, Any]:
    s = ins.actions.settings
    try:
        card = queries.read_card(ins.gateway, s.agent_peer_id, s.user_peer_id)
    except HonchoRequestError as exc:
        return {"error": exc.code}
    return {"facts": [_shown(ins, fact, MAX_FACT_CHARS) for fact in card[:MAX_FACTS]],
            "total": len(card)}


def _writes(ins: Inspector) -> dict[str, Any]:
    """The newest writes kept locally, each an undo offer while its forget is in the window and not
    undone."""
    s, now = ins.actions.settings, ins.clock()
    try:
        kept: list[KeptWrite] = with_existing(s, lambda db: memory_log.records(
            db, s.destination(), s.agent_peer_id, s.user_peer_id, RECENT_WRITES), [])
    except OutboxError as exc:
        return {"error": exc.code}
    # A restore is newer than its forget: both are in the list.
    restored = {_restores(k) for k in kept}
    items = []
    for k in kept:
        w = k.write
        undoable = (w.kind == WriteKind.FORGET and w.content is not None
                    and w.conclusion_id not in restored and now - k.made_at <= UNDO_WINDOW_S)
        items.append({"kind": w.kind.value, "id": w.conclusion_id, "at": _iso(k.made_at),
                      "text": _write_text(ins, k), "restores": _restores(k),
                      "undo_until": _iso(k.made_at + UNDO_WINDOW_S) if undoable else None})
    return {"items": items}


def base_pack(ins: Inspector) -> dict[str, Any]:
    """The chat's base pack as its block; loading starts in the background when none is loaded
    yet. Asks Honcho nothing itself: the open inspector asks for it again until it is loaded."""
    a = ins.actions
    if not a.settings.recall_enabled:
        return {"state": "off", "text": ""}
    block = ins.recall.base_preview(a.settings, a.session_id or "", a.scope_id, ins.template)
    if block is None:
        ins.recall.warm(a.settings, a.scope_id)
        return {"state": "loading", "text": ""}
    if not block:
        return {"state": "empty", "text": ""}
    return _block_shown(ins, block)


def receipt(ins: Inspector, receipt_id: Any) -> dict[str, Any]:
    """The pack a turn got, by its receipt's id, while recall holds it: `ready` (its block, masked
    and redacted), `empty` (the turn got nothing) or `expired` (no longer cached)."""
    if not isinstance(receipt_id, str) or not RECEIPT_ID.fullmatch(receipt_id):
        return {"ok": False, "error": "receipt: give the receipt's id (16 hex characters)"}
    block = ins.recall.held_block(ins.actions.settings, receipt_id)
    if block is None:
        return {"ok": True, "state": "expired", "text": ""}
    return {"ok": True, **_block_shown(ins, block)} if block else {"ok": True, "state": "empty",
                                                                    "text": ""}


def _block_shown(ins: Inspector, block: str) -> dict[str, str]:
    """A recall block as the inspector shows it: `ready` with its text, or `hidden`."""
    # The block is made inert already; the host's own secrets are masked here.
    shown = _masked(ins, block)
    if shown is None:
        return {"state": "hidden", "text": HIDDEN}
    cut = len(shown) > MAX_BLOCK_CHARS
    return {"state": "ready",
            "text": shown[:MAX_BLOCK_CHARS] + ("\n… (cut for display)" if cut else "")}


def _conclusion(ins: Inspector, cid: str, content: str, session_id: str | None,
                created_at: Any, chats: dict[str, list[str]],
                level: str | None = None) -> dict[str, Any]:
    known = chats.get(session_id or "", [])
    return {"id": cid, "text": _shown(ins, content, MAX_TEXT_CHARS), "session": session_id,
            "level": level,
            "chats": known[:CHATS_SHOWN], "more_chats": max(0, len(known) - CHATS_SHOWN),
            "at": created_at.isoformat() if isinstance(created_at, datetime) else None}


def _chats(ins: Inspector) -> dict[str, list[str]]:
    """Session id -> the chats this install captured into it, from the outbox's local mappings
    (most recently captured first); {} when they cannot be read: naming chats is a courtesy, not a
    need."""
    try:
        mappings: list[dict] = with_existing(
            ins.actions.settings, lambda db: chat_rows.known_sessions(db, CHAT_MAPPINGS), [])
    except OutboxError:
        return {}
    found: dict[str, list[str]] = {}
    for m in mappings:
        found.setdefault(m["session_id"], []).append(m["chat_id"])
    return found


def _write_text(ins: Inspector, kept: KeptWrite) -> str:
    w = kept.write
    if w.content is None:
        return "(no text kept: it could not be made safe)"
    if w.kind == WriteKind.PROFILE:
        card = _json(w.content)
        facts, before = card.get("card") or [], card.get("replaced") or []
        if card.get("rebuild"):
            return _shown(ins, f"Card rebuild asked (it had {len(before)} facts): "
                          + " · ".join(map(str, before)), MAX_TEXT_CHARS)
        return _shown(ins, f"{len(facts)} facts (replaced {len(before)}): "
                      + " · ".join(map(str, facts)), MAX_TEXT_CHARS)
    if w.kind == WriteKind.RESTORE:
        return _shown(ins, str(_json(w.content).get("text") or ""), MAX_TEXT_CHARS)
    return _shown(ins, w.content, MAX_TEXT_CHARS)


def _restores(kept: KeptWrite) -> str | None:
    """The forgotten conclusion a restore record names; None for any other record."""
    if kept.write.kind != WriteKind.RESTORE or kept.write.content is None:
        return None
    restores = _json(kept.write.content).get("restores")
    return restores if isinstance(restores, str) else None


# -- making text safe ------------------------------------------------------------------------------


def _shown(ins: Inspector, text: Any, limit: int) -> str:
    """Recalled text as the inspector shows it: masked and redacted with the host's secrets, made
    inert, on one line, then cut to `limit` (a credential cut in half would no longer be
    recognised)."""
    safe = _masked(ins, str(text))
    flat = " ".join(neutralize(safe).split()) if safe is not None else ""
    if not flat:
        return HIDDEN if str(text).strip() else ""
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _masked(ins: Inspector, text: str) -> str | None:
    """`text` with the host's secret values masked and credentials redacted; None when that
    failed."""
    try:
        return redact(ins.actions.mask(text), ins.actions.secrets)
    except Exception:  # RedactionError, or the host's masker failing: show nothing unsafe
        return None


def _sendable(ins: Inspector, kept_text: str | None) -> str | None:
    """The kept text of a forget as it may be sent again (redacted once more: the secrets may have
    grown)."""
    return _masked(ins, kept_text) if kept_text else None


def _record(ins: Inspector, write: MemoryWrite) -> str:
    """Keep `write` in the local record; '' when kept, else a note (the write itself is done)."""
    if ins.actions.record is None:
        return ""
    try:
        ins.actions.record(write)
    except OutboxError as exc:
        return (f" (Its local record could not be kept ({exc.code}),"
                " so it could be restored a second time.)")
    return ""


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _page(page: Any) -> int | None:
    try:
        number = int(str(page).strip())
    except ValueError:
        return None
    return number if 1 <= number <= MAX_PAGE else None


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="seconds")
