"""The `honcho_memory` verbs: recall, search, ask, remember, forget, status, dream, profile and
forget_chat. One entry point, `run_action`, shared by the Agent Zero tool, the API and the command
line; every failure comes back as one line the agent can act on, never as an exception. What goes in
and out is bounded, masked and redacted: docs/architecture.md ("Memory tool") says how.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..chats import forget
from ..chats.rules import Remember
from ..errors import (
    AuthError,
    BadInput,
    ForgetRefused,
    HonchoRequestError,
    OutboxError,
    RedactionError,
    SdkMissingError,
    TransientError,
    UnreachableError,
)
from ..gateway import deadline, queries
from ..gateway.gateway import HonchoGateway
from ..gateway.scopes import MAX_SCOPE_ID, RESERVED_PREFIX
from ..names import MAX_DIALECTIC_QUERY
from ..safety.redact import redact
from ..safety.untrusted import inert_line, untrusted
from ..settings.config import Settings
from ..settings.spec import REASONING_LEVELS
from ..storage import expiries
from ..storage.db import with_existing
from ..storage.memory_log import CARD_ID, MemoryWrite, WriteKind

ACTIONS = ("recall", "search", "ask", "remember", "forget", "status", "dream", "profile",
           "forget_chat", "correct")
# The longest the tool waits for the chat's sends on the wire; forgetting again finishes.
FORGET_CHAT_WAIT_S = 30.0
SEARCH_TARGETS = ("conclusions", "session", "workspace")
MAX_QUERY, MAX_ASK_QUERY, MAX_CONTENT = 2_000, MAX_DIALECTIC_QUERY, 8_000
MAX_LIMIT, DEFAULT_LIMIT, MAX_ITEM_CHARS, MAX_OUTPUT = 20, 5, 600, 4_000
# A card's bounds are Honcho's own: its dreamer keeps at most 40 entries of at most 200 characters,
# so a longer card written here would be cut or dropped by the next dream. A whole card fits the
# profile output.
MAX_FACTS, MAX_FACT_CHARS = 40, 200
MAX_CARD_OUTPUT = 9_000
SIDEBAR_FACTS = 12  # the sidebar shows a short list and the card's size
REFUSED_IN_CONTEXT_MODE = ("honcho_memory: memory is injected automatically in this chat; the tool"
                           " is off under recall_mode context.")
# In a chat the user asked us not to remember (chats/rules.Remember): under NO_CAPTURE nothing of
# the chat goes into memory, so the verbs that write into it are refused (remember, profile with
# `facts`, dream: a consolidation is Honcho rewriting memory, asked for from this chat); reads go
# on, and so do forget and forget_chat, which only take memory out. `ask` goes on naming no session
# (a question naming the chat's would make Honcho create it): about the user across memory, as in a
# chat with no session; in a confined chat, which may read only its own session, it is refused.
# Under OFF the chat is outside
# memory: only the verbs about the chat itself run (status; forget_chat, which removes what it
# left before).
OFF_ALLOWED = ("status", "forget_chat")
# Verbs that take a `scope`; in a confined chat (chats/rules.confined_chat) none does.
SCOPED_ACTIONS = ("recall", "ask", "search")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_SCOPE = re.compile(rf"^[A-Za-z0-9_-]{{1,{MAX_SCOPE_ID}}}$")
log = logging.getLogger(__name__)


@dataclass
class ActionContext:
    """Where the action runs: settings, the current chat's session, the host's secrets and
    masker."""

    settings: Settings
    session_id: str | None = None
    secrets: Mapping[str, str] = field(default_factory=dict)
    mask: Callable[[str], str] = lambda text: text
    gateway: HonchoGateway | None = None
    recall: Callable[[str, str | None], str] | None = None  # (query, scope) -> rendered block
    status: Callable[[], str] | None = None
    supports_scopes: Callable[[], bool] = lambda: True
    scope_id: str | None = None  # the chat's scope, kept with the tool's writes
    # Keeps the tool's writes locally; raises OutboxError.
    record: Callable[[MemoryWrite], None] | None = None
    chat_id: str | None = None  # the Agent Zero chat the tool runs in: what forget_chat forgets
    remember: Remember = Remember.YES  # that chat's "Don't remember this chat"
    # That chat reads only its own peer's memory and its own session (chats/rules.confined_chat).
    confined: bool = False
    # (chat id, its new generation) after forget_chat moved it: the process's chat sessions name the
    # new session at once
    forgotten: Callable[[str, int], None] | None = None
    monotonic: Callable[[], float] = time.monotonic  # the clock of the verb's deadline

    def honcho(self) -> HonchoGateway:
        """The gateway of the verb's requests. Every host gives one; a context without it (a test's)
        serves only the verbs that need no request, and a verb that needs one fails loudly, as a
        bug."""
        if self.gateway is None:
            raise RuntimeError("this ActionContext has no gateway for a verb that sends requests")
        return self.gateway


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    text: str


def run_action(action: Any, args: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    """Run one verb; never raises."""
    # The agent was not offered the tool: a call anyway sends nothing.
    if not ctx.settings.offers_tool:
        log.debug("honcho_memory: refused under recall_mode context")
        return ActionResult(False, REFUSED_IN_CONTEXT_MODE)
    refusal = refusal_in_chat(action, args, ctx.remember, ctx.confined)
    if refusal is not None:
        log.debug("honcho_memory: refused in a chat not remembered (%s)", ctx.remember.value)
        return ActionResult(False, refusal)
    refusal = refusal_beyond_chat(action, args) if ctx.confined else None
    if refusal is not None:
        log.debug("honcho_memory: refused beyond a confined chat")
        return ActionResult(False, refusal)
    return run_verb(action, args, ctx)


def refusal_beyond_chat(action: Any, args: Mapping[str, Any]) -> str | None:
    """In a confined chat, the one line refusing a verb that would read beyond the chat's own peer
    and session (a workspace search, any `scope`), or None when it may run. Nothing is sent for a
    refused verb."""
    if action == "search" and str(args.get("target") or "").strip().lower() == "workspace":
        return ("honcho_memory: this chat is not the owner's, so memory here is only this chat's"
                " and its sender's; a workspace search was refused and nothing was read.")
    if action in SCOPED_ACTIONS and args.get("scope") not in (None, ""):
        return (f"honcho_memory: this chat is not the owner's, so memory here is only this chat's"
                f" and its sender's; {action} with a scope was refused and nothing was read.")
    return None


def refusal_in_chat(action: Any, args: Mapping[str, Any], remember: Remember,
                    confined: bool = False) -> str | None:
    """The one line refusing `action` in a chat that is not remembered (see OFF_ALLOWED and the
    comment above it; `confined`: chats/rules.confined_chat), or None when it may run. Nothing is
    sent for a refused verb."""
    if remember is Remember.YES or action not in ACTIONS:
        return None  # an unknown verb gets run_verb's own error
    if remember is Remember.OFF and action not in OFF_ALLOWED:
        return (f"honcho_memory: this chat is not remembered and memory is not recalled in it"
                f" (the user's choice); {action} was refused and nothing was read or sent.")
    writes = action in ("remember", "dream", "correct") or (
        action == "profile" and (args.get("facts") not in (None, "") or _rebuild(args)))
    if writes:
        return (f"honcho_memory: this chat is not remembered (the user's choice), so nothing of"
                f" it goes into memory; {action} was refused and nothing was sent.")
    if action == "ask" and confined:
        return ("honcho_memory: this chat is not remembered (the user's choice) and not the"
                " owner's, so the dialectic may be asked only about its own session, which is not"
                " created here; ask was refused and nothing was sent.")
    return None


def run_verb(action: Any, args: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
    """Run one verb whatever recall_mode offers the agent: for the user's own hand (the memory
    inspector's forget and card edit use the tool's bounds, redaction and local record); never
    raises."""
    name = "unknown"  # until it is known to be one of ACTIONS: the agent's text is never logged
    try:
        name = _choice(action, ACTIONS, "action")
        # One deadline for every request of the verb.
        with deadline.within(deadline_s(name, ctx.settings), ctx.monotonic):
            text = _HANDLERS[name](args, ctx)
        result = ActionResult(
            not isinstance(text, Unfinished),
            _bounded(text, MAX_CARD_OUTPUT if name == "profile" else MAX_OUTPUT))
        outcome = "done"
    except BadInput as exc:
        result, outcome = ActionResult(False, f"honcho_memory: {exc}"), "bad input"
    except HonchoRequestError as exc:
        result, outcome = ActionResult(False, error_line(name, exc)), exc.code
    except RedactionError:
        result = ActionResult(
            False, "honcho_memory: the text could not be made safe to send; nothing was sent.")
        outcome = "redaction failed"
    # The verb and a code: never an argument or an answer.
    log.debug("honcho_memory %s: %s", name, outcome)
    return result


def deadline_s(action: str, settings: Settings) -> float:
    """The one deadline of a verb's requests to Honcho: ask's is ask_timeout_s, status's
    check_timeout_s (as the sidebar's), forget_chat's its wait for sends on the wire plus the usual
    for each of its three steps in Honcho; every other verb's two SDK timeouts (recall's
    turn-bound wait is shorter still)."""
    if action == "ask":
        return settings.ask_timeout_s
    if action == "status":
        return settings.check_timeout_s
    if action == "forget_chat":
        # the wait, then the record, the delete and the search for what survives, one each
        return FORGET_CHAT_WAIT_S + 3 * settings.operation_deadline_s
    if action == "correct":
        return 2 * settings.operation_deadline_s  # the check and the create; the delete
    return settings.operation_deadline_s


def _recall(args: Mapping[str, Any], ctx: ActionContext) -> str:
    query = _text(args, "query", ctx, MAX_QUERY)
    block = ctx.recall(query, _scope(args, ctx)) if ctx.recall else ""
    return block or ("Honcho returned nothing relevant for this query (memory may still be"
                     " processing).")


def _search(args: Mapping[str, Any], ctx: ActionContext) -> str:
    target = _choice(args.get("target", "conclusions"), SEARCH_TARGETS, "target")
    if target != "workspace" and args.get("scope") not in (None, ""):
        # Honcho's conclusion query and session search take no scope: an explicit one is refused,
        # never silently dropped (the answer would look scoped and be global).
        raise BadInput(f"a {target} search cannot be limited to a scope; omit `scope`, or use"
                       " target \"workspace\" to search a scope's chats.")
    query, limit, s = _text(args, "query", ctx, MAX_QUERY), _limit(args), ctx.settings
    if target == "conclusions":
        found = queries.query_conclusions(ctx.honcho(), s.agent_peer_id, s.user_peer_id, query,
                                          limit)
    elif target == "session":
        if not ctx.session_id:
            raise BadInput("there is no current chat session to search; use target"
                           " \"workspace\".")
        found = queries.search_session(ctx.honcho(), ctx.session_id, query, limit)
    else:
        found = queries.search_workspace(ctx.honcho(), query, limit, _scope(args, ctx))
    if not found:
        return f"No {target} matched the query."
    return untrusted("\n".join(
        f"- [{f.id}]{' ' + f.where + ':' if f.where else ''} {_item(f.content)}" for f in found))


def _ask(args: Mapping[str, Any], ctx: ActionContext) -> str:
    query, s = _text(args, "query", ctx, MAX_ASK_QUERY), ctx.settings
    _own_session(ctx, "ask")
    level = args.get("reasoning_level")
    level = _choice(level, REASONING_LEVELS, "reasoning_level") if level not in (None, "") else None
    # A chat not remembered names no session: Honcho would create the chat's (refusal_in_chat).
    session = ctx.session_id if ctx.remember is Remember.YES else None
    answer = queries.ask(ctx.honcho(), s.agent_peer_id, s.user_peer_id, query,
                         session_id=session, scope=_scope(args, ctx),
                         reasoning_level=level, timeout_s=s.ask_timeout_s)
    return (untrusted(_item(answer, MAX_OUTPUT - 200)) if answer
            else "Honcho has no answer to that yet.")


def _remember(args: Mapping[str, Any], ctx: ActionContext) -> str:
    content, s = _text(args, "content", ctx, MAX_CONTENT), ctx.settings
    lifetime = _lifetime(args, ctx)
    made = queries.create_conclusion(ctx.honcho(), s.agent_peer_id, s.user_peer_id, content,
                                     ctx.session_id)
    note = _kept(ctx, made.id, WriteKind.REMEMBER, content, lifetime)
    if lifetime is None:
        return f"Remembered as conclusion {made.id}." + note
    if note:  # its lifetime was not kept: Honcho has the conclusion for good
        return (f"Remembered as conclusion {made.id}, but it will not expire: forget it when it"
                " should go." + note)
    return (f"Remembered as conclusion {made.id}. It expires in {expiries.lifetime_text(lifetime)}"
            f" (at {_utc(time.time() + lifetime)}) unless it is pinned in the memory inspector.")


def _lifetime(args: Mapping[str, Any], ctx: ActionContext) -> float | None:
    """`expires_in` in seconds, or None when absent; checked before anything is sent (Honcho keeps
    no metadata on a conclusion: the lifetime lives only in the local record)."""
    if args.get("expires_in") in (None, ""):
        return None
    seconds = expiries.lifetime_s(args["expires_in"])
    if ctx.record is None:
        raise BadInput("`expires_in` needs the local record, which this call has not; omit it.")
    return seconds


def _utc(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _forget(args: Mapping[str, Any], ctx: ActionContext) -> str:
    conclusion_id, s = str(args.get("id") or "").strip(), ctx.settings
    if not _ID.match(conclusion_id):
        raise BadInput("`id` must be a conclusion id (letters, digits, _ or -), as shown by"
                       " search.")
    if not _confirmed(args):
        return (f"Not deleted. Ask the user to confirm forgetting conclusion {conclusion_id}; only"
                " after they agree, call forget again with \"confirm\": true.")
    found = queries.find_conclusion(ctx.honcho(), s.agent_peer_id, s.user_peer_id, conclusion_id)
    if found is None:
        return (f"Conclusion {conclusion_id} is not one of the agent's conclusions about the user;"
                " nothing deleted.")
    queries.delete_conclusion(ctx.honcho(), s.agent_peer_id, s.user_peer_id, conclusion_id)
    return (f"Forgot conclusion {conclusion_id}."
            + _kept(ctx, conclusion_id, WriteKind.FORGET, _safe(found.content, ctx)))


def _confirmed(args: Mapping[str, Any]) -> bool:
    return str(args.get("confirm", "")).strip().lower() in ("true", "1", "yes")


def _forget_chat(args: Mapping[str, Any], ctx: ActionContext) -> str:
    """This chat's queued messages and its Honcho session deleted, its later messages in a new
    session (chats/forget.py); only with "confirm": true, after the user agreed."""
    if not ctx.chat_id:
        raise BadInput("forget_chat works inside a chat; this call has none.")
    if args.get("leftovers") not in (None, ""):
        return _forget_leftovers(args, ctx, ctx.chat_id)
    if not _confirmed(args):
        return ("Not forgotten. Ask the user to confirm forgetting this whole chat (its queued"
                " messages and its Honcho session are deleted for good); only after they agree,"
                " call forget_chat again with \"confirm\": true.")
    try:
        report = forget.forget_chat(ctx.settings, ctx.chat_id, wait_s=FORGET_CHAT_WAIT_S,
                                    gateway=ctx.gateway)
    except ForgetRefused as exc:
        raise BadInput(str(exc)) from exc
    # Moved, even if Honcho's deletion is still to be finished.
    if ctx.forgotten is not None and "generation" in report:
        ctx.forgotten(report["chat_id"], report["generation"])
    text = forget.report_text(report, _item)
    if forget.offer_lines(report) and "error" not in report["leftovers"]:
        text += ("\nThey were not removed. Tell the user what they are and ask; only after they"
                 " agree, call forget_chat with \"leftovers\": \"remove\" and \"confirm\": true.")
    return text


def _forget_leftovers(args: Mapping[str, Any], ctx: ActionContext, chat_id: str) -> str:
    """What the forget of this chat offered (derived conclusions, card facts) removed, only with
    "confirm": true."""
    _choice(args.get("leftovers"), ("remove",), "leftovers")
    if not _confirmed(args):
        return ("Not removed. Ask the user to confirm removing what this chat left in Honcho (the"
                " conclusions derived from it and the card facts matching it); only after they"
                " agree, call forget_chat with \"leftovers\": \"remove\" and \"confirm\": true.")
    return forget.leftovers_text(forget.forget_leftovers(ctx.settings, chat_id,
                                                         gateway=ctx.gateway))


def _profile(args: Mapping[str, Any], ctx: ActionContext) -> str:
    """No `facts`: the agent's card of the user. With `facts`: that card replaced by them, whole.
    With `rebuild: true`: Honcho asked to rebuild it from its conclusions."""
    s = ctx.settings
    if _rebuild(args):
        return _rebuild_card(ctx)
    if args.get("facts") in (None, ""):
        return _card_text(queries.read_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id))
    facts = _facts(args, ctx)  # every fact checked and made safe before any request
    before = queries.read_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id)  # kept for an undo
    queries.set_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id, facts)
    record = json.dumps({"card": facts, "replaced": [_safe(fact, ctx) for fact in before]},
                        ensure_ascii=False)
    return (f"Replaced the agent's card of the user: {_count(len(facts), 'fact')}"
            f" (it had {len(before)})."
            + _kept(ctx, CARD_ID, WriteKind.PROFILE, record))


def _card_text(card: list[str]) -> str:
    if not card:
        return "The agent has no card of the user yet."
    lines = [f"The agent's card of the user ({_count(len(card), 'fact')}):"]
    lines += [f"- {_item(fact, MAX_FACT_CHARS)}" for fact in card[:MAX_FACTS]]
    if len(card) > MAX_FACTS or any(len(" ".join(fact.split())) > MAX_FACT_CHARS for fact in card):
        # Said so that a replacement written from this view knows it would drop what is not shown.
        lines.append(f"(The card holds {_count(len(card), 'fact')}; the first"
                     f" {min(len(card), MAX_FACTS)} are shown, each cut to {MAX_FACT_CHARS}"
                     " characters.)")
    return untrusted("\n".join(lines))


def card_view(gw: HonchoGateway, settings: Settings, limit: int = SIDEBAR_FACTS,
              monotonic: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The agent's card of the user for the sidebar, in one request: `facts` (the first `limit`,
    each on one line, made inert and redacted, then cut to MAX_FACT_CHARS) and `total`; or `error`,
    a sanitized code (`timed_out` past two SDK timeouts). Never raises on Honcho trouble."""
    try:
        with deadline.within(settings.operation_deadline_s, monotonic):
            card = queries.read_card(gw, settings.agent_peer_id, settings.user_peer_id)
    except HonchoRequestError as exc:
        return {"ok": False, "error": exc.code}
    shown = (_item(fact, MAX_FACT_CHARS) for fact in card[:limit])
    return {"ok": True, "facts": [fact for fact in shown if fact], "total": len(card)}


def _facts(args: Mapping[str, Any], ctx: ActionContext) -> list[str]:
    """`facts` as a list of texts or one fact per line (blank lines skipped): each on one line,
    masked and redacted; 1 to MAX_FACTS of at most MAX_FACT_CHARS characters."""
    raw = args.get("facts")
    if isinstance(raw, str):
        items: list[Any] = [line for line in raw.splitlines() if line.strip()]
    elif isinstance(raw, list):
        items = raw
    else:
        raise BadInput("`facts` must be a list of texts or one fact per line; omit it to read the"
                       " card.")
    if not 1 <= len(items) <= MAX_FACTS:
        raise BadInput(f"`facts` holds {len(items)} facts; give 1 to {MAX_FACTS} (the whole new"
                       " card), or omit `facts` to read the card.")
    made = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, str) or not item.strip():
            raise BadInput(f"`facts` item {number} must be non-empty text.")
        made.append(_safe_input(" ".join(item.split()), f"`facts` item {number}", ctx,
                                MAX_FACT_CHARS))
    return made


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _kept(ctx: ActionContext, conclusion_id: str, kind: WriteKind, content: str | None,
          lifetime_s: float | None = None) -> str:
    """Keep the write (and a remember's lifetime) in the local record; '' when kept (or nowhere to
    keep it), else a note for the answer. The write itself is done whatever happens here."""
    if ctx.record is None:
        return ""
    s = ctx.settings
    try:
        ctx.record(MemoryWrite(conclusion_id, kind, content, s.destination(), s.agent_peer_id,
                               s.user_peer_id, ctx.session_id, ctx.scope_id, lifetime_s))
    except OutboxError as exc:
        log.warning("honcho_memory %s: the local record of %s was not kept (%s)", kind.value,
                    conclusion_id, exc.code)
        return f" (Its local record could not be kept ({exc.code}); the change itself is done.)"
    return ""


def _safe(text: str, ctx: ActionContext) -> str | None:
    """A conclusion's text as it may be kept (Honcho's derivation may have written it): masked and
    redacted, or None when it cannot be made safe."""
    try:
        return redact(ctx.mask(str(text)), ctx.secrets)
    except Exception:  # RedactionError, or the host's masker failing
        return None  # no text rather than unsafe text


# -- correct: a wrong conclusion or card fact replaced by the right one ----------------------------


class Unfinished(str):
    """A verb's answer when it was not done, or only partly: the tool answers it as a failure."""


def _correct(args: Mapping[str, Any], ctx: ActionContext) -> str:
    """`id` (a conclusion) or `fact` (a card fact, as shown) replaced by `content`, only with
    "confirm": true."""
    conclusion_id, fact = str(args.get("id") or "").strip(), args.get("fact")
    if not conclusion_id and not (isinstance(fact, str) and fact.strip()):
        raise BadInput("give `id` (a wrong conclusion, as shown by search) or `fact` (a wrong"
                       " fact of the card, as profile shows it), and `content`: the right one.")
    if conclusion_id and not _ID.match(conclusion_id):
        raise BadInput("`id` must be a conclusion id (letters, digits, _ or -), as shown by"
                       " search.")
    limit = MAX_FACT_CHARS if not conclusion_id else MAX_CONTENT
    content = " ".join(_text(args, "content", ctx, limit).split())
    if not _confirmed(args):
        what = f"conclusion {conclusion_id}" if conclusion_id else "that fact of the card"
        return (f"Not corrected. Ask the user to confirm replacing {what} by the new text; only"
                " after they agree, call correct again with \"confirm\": true.")
    if conclusion_id:
        return _correct_conclusion(ctx, conclusion_id, content)
    return _correct_fact(ctx, str(fact), content)


def _correct_conclusion(ctx: ActionContext, wrong_id: str, content: str) -> str:
    """The right conclusion created first, the wrong one deleted second: a failure between the two
    leaves both in memory (said plainly), never neither."""
    s, gw = ctx.settings, ctx.honcho()
    found = queries.find_conclusion(gw, s.agent_peer_id, s.user_peer_id, wrong_id)
    if found is None:
        return Unfinished(f"Conclusion {wrong_id} is not one of the agent's conclusions about the"
                        " user; nothing changed.")
    try:
        made = queries.create_conclusion(gw, s.agent_peer_id, s.user_peer_id, content,
                                         ctx.session_id)
    except HonchoRequestError as exc:
        return Unfinished(error_line("correct", exc) + f" Conclusion {wrong_id} was not deleted.")
    note = _kept(ctx, made.id, WriteKind.REMEMBER, content) + _carried_end(ctx, wrong_id, made.id)
    try:
        queries.delete_conclusion(gw, s.agent_peer_id, s.user_peer_id, wrong_id)
    except HonchoRequestError as exc:
        return Unfinished(f"Half done: the right one was created as {made.id}, but conclusion"
                        f" {wrong_id} could not be deleted ({exc.code}), so both are in memory"
                        f" now. Forget {wrong_id} to finish." + note)
    note += _kept(ctx, wrong_id, WriteKind.FORGET, _safe(found.content, ctx))
    return (f"Corrected conclusion {wrong_id}: the right one is {made.id}; the wrong one was"
            " forgotten (undo restores it)." + note)


def _carried_end(ctx: ActionContext, wrong_id: str, right_id: str) -> str:
    """The wrong conclusion's lifetime given to the right one (a correction keeps a memory that
    expires expiring); a note for the answer when there was one, or it could not be carried."""
    if ctx.record is None:
        return ""  # no local record here: no lifetime either
    s = ctx.settings
    try:
        carried = with_existing(s, lambda db: expiries.carry(db, s.destination(), wrong_id,
                                                             right_id), False)
    except OutboxError as exc:
        return (f" The local record could not be read ({exc.code}): if the wrong one was to"
                f" expire, {right_id} will not; forget it when it should go.")
    return " It expires when the wrong one would have (pin it to keep it)." if carried else ""


def _correct_fact(ctx: ActionContext, wrong: str, content: str) -> str:
    """The card's facts that read `wrong` (as Honcho holds them, or as profile and the inspector
    show them) replaced by `content` in place: one request writes the whole card."""
    s, gw = ctx.settings, ctx.honcho()
    card = queries.read_card(gw, s.agent_peer_id, s.user_peer_id)
    wanted = " ".join(wrong.split())
    at = {i for i, fact in enumerate(card) if wanted in _fact_readings(fact, ctx)}
    if not at:
        return Unfinished("No fact of the card reads like that; nothing changed. Read the card"
                        " (profile) and give one of its facts as shown.")
    fixed = [content if i in at else fact for i, fact in enumerate(card)]
    queries.set_card(gw, s.agent_peer_id, s.user_peer_id, fixed)
    record = json.dumps({"card": [_safe(fact, ctx) for fact in fixed],
                         "replaced": [_safe(fact, ctx) for fact in card]}, ensure_ascii=False)
    return ("Corrected a fact of the agent's card of the user."
            + _kept(ctx, CARD_ID, WriteKind.PROFILE, record))


def _fact_readings(fact: str, ctx: ActionContext) -> set[str]:
    """A card fact as Honcho holds it, as profile shows it, and as the inspector shows it."""
    safe = _safe(fact, ctx)
    return {" ".join(fact.split()), _item(fact, MAX_FACT_CHARS),
            *((_item(safe, MAX_FACT_CHARS),) if safe is not None else ())}


def _rebuild(args: Mapping[str, Any]) -> bool:
    return str(args.get("rebuild", "")).strip().lower() in ("true", "1", "yes")


def _rebuild_card(ctx: ActionContext) -> str:
    """Honcho asked to rebuild the card from its conclusions (a card_refresh dream); the card it
    had is kept in the local record."""
    s = ctx.settings
    before = queries.read_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id)
    queries.refresh_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id)
    record = json.dumps({"card": [], "replaced": [_safe(fact, ctx) for fact in before],
                         "rebuild": True}, ensure_ascii=False)
    return ("Honcho rebuilds the card in the background from its conclusions alone (a"
            f" card_refresh dream); it had {_count(len(before), 'fact')}."
            + _kept(ctx, CARD_ID, WriteKind.PROFILE, record))


def _status(args: Mapping[str, Any], ctx: ActionContext) -> str:
    return ctx.status() if ctx.status else "Status is not available here."


def _dream(args: Mapping[str, Any], ctx: ActionContext) -> str:
    s = ctx.settings
    _own_session(ctx, "dream")
    queries.schedule_dream(ctx.honcho(), s.agent_peer_id, s.user_peer_id, ctx.session_id)
    return "Consolidation (a dream) was requested; Honcho runs it in the background."


def _own_session(ctx: ActionContext, action: str) -> None:
    """In a confined chat, raise BadInput unless the verb names the chat's session: Honcho answers a
    question, or runs a dream, that names none from every session the agent is in."""
    if ctx.confined and not ctx.session_id:
        raise BadInput(f"{action} needs this chat's session here, and there is none.")


_HANDLERS = {"recall": _recall, "search": _search, "ask": _ask, "remember": _remember,
             "forget": _forget, "status": _status, "dream": _dream, "profile": _profile,
             "forget_chat": _forget_chat, "correct": _correct}


def _text(args: Mapping[str, Any], name: str, ctx: ActionContext, limit: int) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"`{name}` is required and must be non-empty text.")
    return _safe_input(value, f"`{name}`", ctx, limit)


def _safe_input(value: str, label: str, ctx: ActionContext, limit: int) -> str:
    """A text argument as it may be sent: at most `limit` characters, stripped, masked and redacted
    (raises RedactionError, so the action sends nothing)."""
    if len(value) > limit:
        raise BadInput(f"{label} is {len(value):,} characters; the limit is {limit:,}. Shorten it.")
    # Agent Zero unmasked aliases: mask again first.
    return redact(ctx.mask(value.strip()), ctx.secrets)


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> str:
    text = str(value or "").strip().lower()
    if text not in allowed:
        raise BadInput(f"`{name}` must be one of: {', '.join(allowed)}.")
    return text


def _limit(args: Mapping[str, Any]) -> int:
    raw = args.get("limit", DEFAULT_LIMIT)
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise BadInput(f"`limit` must be a whole number from 1 to {MAX_LIMIT}.") from None
    if not 1 <= value <= MAX_LIMIT:
        raise BadInput(f"`limit` must be a whole number from 1 to {MAX_LIMIT}.")
    return value


def _scope(args: Mapping[str, Any], ctx: ActionContext) -> str | None:
    """Omitted: the global view. Given: that scope, or a clear error (never a silent widening)."""
    raw = args.get("scope")
    if raw in (None, ""):
        return None
    scope = str(raw).strip()
    if not _SCOPE.match(scope) or scope.startswith(RESERVED_PREFIX):
        raise BadInput("`scope` must be a scope id (letters, digits, _ or -), such as the one"
                       " status shows.")
    if not ctx.supports_scopes():
        raise BadInput("this Honcho SDK has no scopes (honcho-ai 2.4 or newer needed); omit"
                       " `scope`.")
    return scope


def _item(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    """Recalled text on one line, inert, redacted and cut to `limit` (safety/untrusted.py)."""
    return inert_line(text, limit)


def _bounded(text: str, limit: int = MAX_OUTPUT) -> str:
    return text if len(text) <= limit else text[:limit - 40] + "\n… (output cut to the size limit)"


# -- wording: one-line error explanations --------------------------------------------------------


def error_line(action: str, exc: HonchoRequestError) -> str:
    """What went wrong, in one line the agent can act on; never server text, never a trace."""
    code = exc.code
    if isinstance(exc, AuthError):
        return (f"honcho_memory {action}: Honcho refused the API key ({code}). Ask the user to set"
                " a valid HONCHO_API_KEY under Settings → Secrets.")
    if isinstance(exc, SdkMissingError):
        return (f"honcho_memory {action}: the honcho-ai SDK is not installed; reinstall the plugin"
                " to fix it.")
    if code == deadline.TIMED_OUT:
        return (f"honcho_memory {action}: timed out: Honcho answered too slowly, so the request was"
                " ended; try again later. A change asked for may or may not have been applied.")
    if isinstance(exc, UnreachableError):
        return (f"honcho_memory {action}: Honcho did not answer ({code}); try again later. The"
                " request may or may not have been applied.")
    if isinstance(exc, TransientError) and code == "http_429":
        return (f"honcho_memory {action}: Honcho is rate-limiting requests ({code}); try again in a"
                " minute.")
    if code.startswith("http_5"):
        if action in ("ask", "search", "remember"):
            return (f"honcho_memory {action}: Honcho could not do this ({code}). This needs an LLM"
                    " or embedding provider on the Honcho server; automatic recall still works"
                    " without it.")
        return f"honcho_memory {action}: Honcho had a server error ({code}); try again later."
    if action == "dream" and code in ("http_400", "http_404"):
        return (f"honcho_memory dream: this Honcho server does not run dreams ({code}); they may be"
                " disabled.")
    if code == "http_404":
        return f"honcho_memory {action}: Honcho does not have that ({code})."
    return f"honcho_memory {action}: Honcho rejected the request ({code}); check the arguments."
