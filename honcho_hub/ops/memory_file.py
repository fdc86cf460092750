"""The memory file: what Honcho and this install hold about the user, exported as JSON (for machines
and `import`) or Markdown (for people), and imported into another workspace or server, creating only
the conclusions and card facts it does not hold yet. docs/reference.md says what Honcho keeps of an
import and what it cannot.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ..errors import FileRefused, HonchoRequestError, MemoryFileError, OutboxError
from ..gateway import deadline, queries
from ..names import ID_RE
from ..safety.redact import redact
from ..settings.files import read_regular_file
from ..storage import chats as chat_rows
from ..storage import memory_log
from ..storage.db import Database, with_existing
from ..storage.memory_log import KeptWrite, WriteKind
from ..tool.actions import MAX_FACTS, ActionContext

FORMAT = "honcho-memory-hub/memory"
VERSION = 1
MAX_CONCLUSIONS = 5_000  # exported; imported; held in Honcho for an import to check against
MAX_TEXT_CHARS = 65_535  # one conclusion, Honcho's own bound
MAX_CARD_FACTS, MAX_FILE_FACT_CHARS = 1_000, 10_000  # a card as a file may hold it
MAX_FILE_BYTES = 16_000_000
LISTING_SIZE = 100  # conclusions a listing request
IMPORT_BATCH = 50  # conclusions a create request (Honcho takes 1 to 100)
IMPORT_SESSION = "memory-import"
RUN_DEADLINE_S = 240.0  # a whole export or import; each request also has its own
LEVELS = ("explicit", "deductive", "inductive", "contradiction")
FORMATS = {"json": ("application/json", "json"), "markdown": ("text/markdown", "md")}
# Characters that open Markdown anywhere in a line, and those that do only where a line starts.
_MD_ANYWHERE = re.compile(r"([\\`*_\[\]<>&|~$!#(){}])")
_MD_NUMBERED = re.compile(r"^(\d+)\.")


class MemoryFile(NamedTuple):
    """An export as import reads it: whose memory, its conclusions (text, None where the export
    could not make it safe) and the card."""

    observer: str
    observed: str
    conclusions: tuple[str | None, ...]  # newest first, as exported
    card: tuple[str, ...]


# -- export ----------------------------------------------------------------------------------------


def export_memory(ctx: ActionContext, now: float, limit: int = MAX_CONCLUSIONS,
                  run_deadline_s: float = RUN_DEADLINE_S) -> dict[str, Any]:
    """The document of an export: the agent's card of the user, its conclusions (at most `limit`,
    newest first) with level, session, chats and time, the local record of memory writes and the
    chat -> session map. Every text masked and redacted; a part that could not be read, or texts
    that could not be made safe (left out), are named in `problems` (`complete` is then false).
    Never a key, the outbox path or queued text."""
    s, problems = ctx.settings, list[dict[str, Any]]()
    with deadline.within(run_deadline_s, ctx.monotonic):
        card = _card(ctx, problems)
        listed, problem = _walk(ctx, limit)
    if problem:
        problems.append({"part": "conclusions", **problem})
    mappings = _local(ctx, "chat_sessions", problems, lambda db: chat_rows.known_sessions(
        db, chat_rows.MAX_CHAT_SESSIONS, s.destination()))
    writes = _local(ctx, "memory_writes", problems, lambda db: memory_log.records(
        db, s.destination(), s.agent_peer_id, s.user_peer_id, memory_log.MAX_RECORDS))
    chats: dict[str, list[str]] = {}
    for m in mappings:
        chats.setdefault(m["session_id"], []).append(m["chat_id"])
    conclusions = [_conclusion(ctx, c, chats) for c in listed]
    hidden = sum(1 for c in conclusions if c["text"] is None)
    if hidden:
        problems.append({"part": "conclusions", "error": "hidden", "count": hidden})
    return {"format": FORMAT, "version": VERSION, "exported_at": _iso(now),
            "workspace_id": s.workspace_id, "observer": s.agent_peer_id,
            "observed": s.user_peer_id, "complete": not problems, "problems": problems,
            "card": card,
            "conclusions": conclusions,
            "memory_writes": [_write(ctx, k) for k in writes],
            "chat_sessions": [{**m, "first_captured_at": _iso(m["first_captured_at"]),
                               "last_captured_at": _iso(m["last_captured_at"])}
                              for m in mappings]}


def as_json(document: dict[str, Any]) -> str:
    """The export as JSON text, the form `import` reads."""
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def as_markdown(document: dict[str, Any]) -> str:
    """The export for people. Every string from outside is on one line with what could open
    Markdown or HTML escaped, so it reads as text wherever the file is rendered."""
    d = document
    lines = ["# Honcho memory export", "",
             f"Exported {_md(d['exported_at'])} from workspace {_code(d['workspace_id'])}: what"
             f" {_code(d['observer'])} knows about {_code(d['observed'])}."]
    if not d["complete"]:
        lines.append("_This export is incomplete: "
                     + "; ".join(_md(_problem(p)) for p in d["problems"]) + "._")
    lines += _section(f"The agent's card of the user ({_count(len(d['card']), 'fact')})",
                      [[f"- {_md(fact)}"] for fact in d["card"]])
    lines += _section(f"Conclusions ({len(d['conclusions'])})",
                      [_conclusion_lines(c) for c in d["conclusions"]])
    lines += _section(f"Memory writes kept locally ({len(d['memory_writes'])})",
                      [_write_lines(w) for w in d["memory_writes"]])
    lines += _section(f"Chats and their Honcho sessions ({len(d['chat_sessions'])})",
                      [[f"- chat {_code(m['chat_id'])} → session {_code(m['session_id'])}"
                        f"{' · project ' + _code(m['project']) if m['project'] else ''}"
                        f" · captured {_md(m['first_captured_at'])} to"
                        f" {_md(m['last_captured_at'])}"] for m in d["chat_sessions"]])
    return "\n".join(lines) + "\n"


def export_text(document: dict[str, Any]) -> str:
    """One line on what an export holds, and what it misses."""
    d = document
    said = (f"Exported {_count(len(d['conclusions']), 'conclusion')},"
            f" {_count(len(d['card']), 'card fact')},"
            f" {_count(len(d['memory_writes']), 'memory write')} and"
            f" {_count(len(d['chat_sessions']), 'chat mapping')}.")
    if not d["complete"]:
        said += " Incomplete: " + "; ".join(_problem(p) for p in d["problems"]) + "."
    return said


def download(ctx: ActionContext, fmt: Any, now: float) -> dict[str, Any]:
    """An export as the inspector offers it for download: its text, file name and media type."""
    if fmt not in FORMATS:
        return {"ok": False, "message": "`format` must be json or markdown."}
    document = export_memory(ctx, now)
    media_type, extension = FORMATS[fmt]
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
    return {"ok": True, "complete": document["complete"], "media_type": media_type,
            "filename": f"honcho-memory-{document['workspace_id']}-{stamp}.{extension}",
            "content": as_markdown(document) if fmt == "markdown" else as_json(document),
            "message": export_text(document)}


# -- import ----------------------------------------------------------------------------------------


def read(path: str) -> MemoryFile:
    """The memory file at `path` (a regular file of at most MAX_FILE_BYTES), checked whole; raises
    MemoryFileError."""
    try:
        raw = read_regular_file(path, MAX_FILE_BYTES)
    except FileRefused as exc:
        raise MemoryFileError(f"the file is {exc}") from None
    except OSError as exc:
        raise MemoryFileError(f"the file cannot be read ({exc.strerror or 'error'})") from None
    return parse(raw)


def parse(raw: str | bytes) -> MemoryFile:
    """An export's JSON text, checked whole before anything is sent; raises MemoryFileError naming
    the problem and where, never quoting the file."""
    size = len(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
    if size > MAX_FILE_BYTES:
        raise MemoryFileError(f"the file is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        where = (f" (line {exc.lineno}, column {exc.colno})"
                 if isinstance(exc, json.JSONDecodeError) else "")
        raise MemoryFileError(f"the file is not JSON{where}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not _whole(doc.get("version")):
        raise MemoryFileError("the file is not a memory export of Honcho Memory Hub")
    if doc["version"] > VERSION:
        raise MemoryFileError(f"the file is version {doc['version']}; this Hub reads version"
                              f" {VERSION} (update the Hub)")
    for peer in ("observer", "observed"):
        if not isinstance(doc.get(peer), str) or not ID_RE.match(doc[peer]):
            raise MemoryFileError(f"{peer}: must be a peer id")
    conclusions = _items(doc, "conclusions", MAX_CONCLUSIONS, "conclusions")
    texts = tuple(_text(c, f"conclusions[{i}]") for i, c in enumerate(conclusions))
    card = _items(doc, "card", MAX_CARD_FACTS, "card facts")
    for i, fact in enumerate(card):
        if not isinstance(fact, str) or len(fact) > MAX_FILE_FACT_CHARS:
            raise MemoryFileError(f"card[{i}]: must be text of at most {MAX_FILE_FACT_CHARS:,}"
                                  " characters")
    return MemoryFile(doc["observer"], doc["observed"], texts, tuple(card))


def import_memory(ctx: ActionContext, file: MemoryFile, *, dry_run: bool = False,
                  session_id: str = IMPORT_SESSION, limit: int = MAX_CONCLUSIONS,
                  run_deadline_s: float = RUN_DEADLINE_S) -> dict[str, Any]:
    """Create in Honcho the file's conclusions and card facts it does not hold yet (compared by
    normalised text), as the agent's about the user of these settings, in `session_id` (made
    first: Honcho needs an existing session). A dry run reads and says what it would do. A request
    that fails stops the import; what was created stays, and a second run creates only the rest."""
    if not ID_RE.match(session_id):
        raise MemoryFileError("the session must be an id of letters, digits, _ or -")
    s = ctx.settings
    texts, skipped, duplicates = _sendable(ctx, file.conclusions)
    facts = _unique([f for f in (_safe(ctx, fact) for fact in file.card) if f])
    report: dict[str, Any] = {
        "ok": True, "state": "dry_run" if dry_run else "done", "session_id": session_id,
        "from": {"observer": file.observer, "observed": file.observed},
        "to": {"observer": s.agent_peer_id, "observed": s.user_peer_id},
        "in_file": len(file.conclusions), "skipped": skipped, "duplicates": duplicates,
        "already": 0, "to_create": 0, "created": 0, "card_to_add": 0, "card_added": 0,
        "card_state": "unchanged", "limit": limit, "error": None}
    with deadline.within(run_deadline_s, ctx.monotonic):
        try:
            held, problem = _walk(ctx, limit, all_or_none=True)
            with _call(ctx):
                card = queries.read_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id)
        except HonchoRequestError as exc:
            return _stop(report, exc.code)
        if problem:
            return _stop(report, problem["error"])
        known = {_normal(c.content) for c in held}
        missing = [t for t in texts if _normal(t) not in known]
        have = {_normal(fact) for fact in card}
        new_facts = [f for f in facts if _normal(f) not in have]
        report.update(already=len(texts) - len(missing), to_create=len(missing),
                      card_to_add=len(new_facts))
        if new_facts and len(card) + len(new_facts) > MAX_FACTS:
            report["card_state"] = "too_large"
        if dry_run:
            return report
        return _create(ctx, report, missing, card, new_facts)


def upload(ctx: ActionContext, text: Any, dry_run: bool) -> dict[str, Any]:
    """An import of a file's text as the inspector sends it: the report with its message."""
    if not isinstance(text, str):
        return {"ok": False, "error": MemoryFileError.code,
                "message": "Not imported: `file` must be the text of a JSON memory export."}
    try:
        report = import_memory(ctx, parse(text), dry_run=dry_run)
    except MemoryFileError as exc:
        return {"ok": False, "error": exc.code, "message": f"Not imported: {exc}."}
    return {**report, "message": report_text(report)}


def report_text(report: dict[str, Any]) -> str:
    """An import's report as lines: what it did (or would do), then what Honcho keeps of it."""
    r, state = report, report["state"]
    counts = (f"{r['already']} already in Honcho, {r['duplicates']} repeated in the file,"
              f" {r['skipped']} without a text that could be made safe")
    if state == "dry_run":
        head = (f"Dry run: would create {_count(r['to_create'], 'conclusion')} and add"
                f" {_count(0 if r['card_state'] == 'too_large' else r['card_to_add'], 'fact')}"
                f" to the card ({counts}); nothing was sent.")
    elif state == "done" and not r["created"] and not r["card_added"]:
        head = f"Imported: created nothing; Honcho held it all ({counts})."
    elif state == "done":
        head = (f"Imported: created {_count(r['created'], 'conclusion')} and added"
                f" {_count(r['card_added'], 'fact')} to the card ({counts}).")
    elif state == "stopped":
        head = (f"Stopped after creating {r['created']} of {r['to_create']} conclusions"
                f" ({r['error']}): run the import again to finish; it creates only what is still"
                " missing.")
    elif r["error"] == "too_many":
        head = (f"Nothing imported: Honcho holds more than {r['limit']:,} of these conclusions, too"
                " many to check the file against for duplicates.")
    else:
        head = f"Nothing imported ({r['error']}); nothing was created."
    lines = [head]
    if r["card_state"] == "too_large":
        lines.append(f"The card was left as it is: with the {r['card_to_add']} facts it lacks it"
                     f" would hold more than {MAX_FACTS}.")
    if r["from"] != r["to"]:
        lines.append(f"The file holds {r['from']['observer']}'s conclusions about"
                     f" {r['from']['observed']}; they are imported as {r['to']['observer']}'s"
                     f" about {r['to']['observed']}.")
    lines.append(f"Honcho creates each conclusion as explicit, with its own time and no metadata,"
                 f" in session {r['session_id']} (made first if missing: Honcho needs an existing"
                 " session). The file's levels, times, sessions and chats are not kept, nor its"
                 " local record of writes and chat map.")
    return "\n".join(lines)


# -- the parts -------------------------------------------------------------------------------------


def _call(ctx: ActionContext) -> AbstractContextManager:
    """One request's deadline (within the run's, if that ends first)."""
    return deadline.within(ctx.settings.operation_deadline_s, ctx.monotonic)


def _card(ctx: ActionContext, problems: list[dict[str, Any]]) -> list[str]:
    s = ctx.settings
    try:
        with _call(ctx):
            card = queries.read_card(ctx.honcho(), s.agent_peer_id, s.user_peer_id)
    except HonchoRequestError as exc:
        problems.append({"part": "card", "error": exc.code})
        return []
    shown = [f for f in (_safe(ctx, fact) for fact in card) if f is not None]
    if len(shown) < len(card):
        problems.append({"part": "card", "error": "hidden", "count": len(card) - len(shown)})
    return shown


def _walk(ctx: ActionContext, limit: int,
          all_or_none: bool = False) -> tuple[list[queries.Conclusion], dict[str, Any] | None]:
    """The agent's conclusions about the user, newest first, page by page up to `limit`; with the
    problem that stopped the walk (a code, or `too_many` with Honcho's total: found at the first
    page when `all_or_none`, which then reads no further)."""
    s, page, pages, total = ctx.settings, 1, 1, 0
    found: list[queries.Conclusion] = []
    while page <= pages and len(found) < limit:
        try:
            with _call(ctx):
                listing = queries.list_conclusions(ctx.honcho(), s.agent_peer_id,
                                                   s.user_peer_id, page, LISTING_SIZE)
        except HonchoRequestError as exc:
            return found, {"error": exc.code}
        found.extend(listing.items)
        pages, total, page = listing.pages, listing.total, page + 1
        if all_or_none and total > limit:
            break
    if total > limit:
        return found[:limit], {"error": "too_many", "total": total}
    return found[:limit], None


def _local(ctx: ActionContext, part: str, problems: list[dict[str, Any]],
           read: Callable[[Database], list]) -> list:
    """What the outbox file holds ([] without one); a file that cannot be read is a problem."""
    try:
        return with_existing(ctx.settings, read, [])
    except OutboxError as exc:
        problems.append({"part": part, "error": exc.code})
        return []


def _conclusion(ctx: ActionContext, c: queries.Conclusion,
                chats: dict[str, list[str]]) -> dict[str, Any]:
    return {"id": c.id, "text": _safe(ctx, c.content), "level": c.level,
            "session_id": c.session_id, "chats": chats.get(c.session_id or "", []),
            "created_at": c.created_at.isoformat() if isinstance(c.created_at, datetime)
            else None, "source_ids": list(c.source_ids)}


def _write(ctx: ActionContext, kept: KeptWrite) -> dict[str, Any]:
    w = kept.write
    entry: dict[str, Any] = {"kind": w.kind.value, "id": w.conclusion_id, "at": _iso(kept.made_at),
                             "session_id": w.session_id, "scope_id": w.scope_id, "text": None}
    kept_json = _json(w.content)
    if w.kind == WriteKind.PROFILE:
        entry["card"] = [_safe(ctx, f) for f in kept_json.get("card") or []]
        entry["replaced"] = [_safe(ctx, f) for f in kept_json.get("replaced") or []]
    elif w.kind == WriteKind.RESTORE:
        entry["text"] = _safe(ctx, kept_json.get("text")) if kept_json.get("text") else None
        restores = kept_json.get("restores")
        entry["restores"] = restores if isinstance(restores, str) else None
    elif w.content is not None:
        entry["text"] = _safe(ctx, w.content)
    return entry


def _sendable(ctx: ActionContext,
              texts: tuple[str | None, ...]) -> tuple[list[str], int, int]:
    """The texts to send, oldest first (Honcho lists newest first, by request), masked and
    redacted, each once; with how many had no safe text and how many repeated one."""
    made_safe = [_safe(ctx, t) if t is not None else None for t in reversed(texts)]
    present = [t for t in made_safe if t and t.strip()]
    unique = _unique(present)
    return unique, len(made_safe) - len(present), len(present) - len(unique)


def _create(ctx: ActionContext, report: dict[str, Any], missing: list[str], card: list[str],
            new_facts: list[str]) -> dict[str, Any]:
    s, gw = ctx.settings, ctx.honcho()
    for batch in _batches(missing, IMPORT_BATCH):
        try:
            with _call(ctx):
                made = queries.create_conclusions(gw, s.agent_peer_id, s.user_peer_id, batch,
                                                  report["session_id"])
        except HonchoRequestError as exc:
            return _stop(report, exc.code)
        report["created"] += len(made)
    if new_facts and report["card_state"] != "too_large":
        try:
            with _call(ctx):
                queries.set_card(gw, s.agent_peer_id, s.user_peer_id, card + new_facts)
        except HonchoRequestError as exc:
            return _stop(report, exc.code)
        report.update(card_added=len(new_facts), card_state="merged")
    return report


def _stop(report: dict[str, Any], code: str) -> dict[str, Any]:
    """The report of an import a failure ended: `stopped` once something was created."""
    report.update(ok=False, error=code, state="stopped" if report["created"] else "failed")
    return report


# -- text ------------------------------------------------------------------------------------------


def _safe(ctx: ActionContext, text: Any) -> str | None:
    """`text` with the host's secret values masked and credentials redacted; None when that
    failed."""
    try:
        return redact(ctx.mask(str(text)), ctx.secrets)
    except Exception:  # RedactionError, or the host's masker failing: nothing unsafe leaves
        return None


def _normal(text: str) -> str:
    """What two texts that say the same thing share: compatibility forms, case and runs of spaces
    folded."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _unique(texts: list[str]) -> list[str]:
    firsts: dict[str, str] = {}
    for text in texts:
        firsts.setdefault(_normal(text), text)
    return list(firsts.values())


def _md(text: Any) -> str:
    """Outside text as inert Markdown: on one line, every character that could open markup
    escaped (a list marker or a number's dot only where the text starts a line's item)."""
    escaped = _MD_ANYWHERE.sub(r"\\\1", " ".join(str(text).split()))
    numbered = _MD_NUMBERED.match(escaped)
    if numbered:
        return f"{numbered.group(1)}\\{escaped[numbered.end(1):]}"
    return "\\" + escaped if escaped[:1] in ("-", "+", "=") else escaped


def _code(text: Any) -> str:
    """An id in a code span when it is one; anything else as inert text."""
    return f"`{text}`" if isinstance(text, str) and ID_RE.match(text) else _md(text)


def _section(title: str, items: list[list[str]]) -> list[str]:
    return ["", f"## {title}", ""] + ([line for item in items for line in item] or ["_None._"])


def _conclusion_lines(c: dict[str, Any]) -> list[str]:
    where = f"session {_code(c['session_id'])}" if c["session_id"] else "no session"
    chats = "".join(f" · chat {_code(chat)}" for chat in c["chats"])
    return [f"- {_md(c['text']) if c['text'] is not None else '(text hidden: not made safe)'}",
            f"  - {_md(c['level'])} · {where}{chats} · {_md(c['created_at'] or 'no time')}"
            f" · {_code(c['id'])}"]


def _write_lines(w: dict[str, Any]) -> list[str]:
    lines = [f"- {_md(w['kind'])} {_code(w['id'])} · {_md(w['at'])}"]
    if "card" in w:
        lines.append(f"  - card of {_count(len(w['card']), 'fact')} (replaced"
                     f" {len(w['replaced'])}): " + " · ".join(_md(f) for f in w["card"] if f))
    elif w["text"] is not None:
        lines.append(f"  - {_md(w['text'])}")
    return lines


def _problem(p: dict[str, Any]) -> str:
    return (f"{p['part']} ({p['error']}"
            + (f": Honcho holds {p['total']:,}" if "total" in p else "")
            + (f": {p['count']:,} not made safe to show" if "count" in p else "") + ")")


# -- small helpers ---------------------------------------------------------------------------------


def _items(doc: dict[str, Any], key: str, bound: int, what: str) -> list:
    items = doc.get(key, [])
    if not isinstance(items, list):
        raise MemoryFileError(f"{key}: must be a list")
    if len(items) > bound:
        raise MemoryFileError(f"{key}: more than {bound:,} {what}")
    return items


def _text(item: Any, where: str) -> str | None:
    if not isinstance(item, dict) or "text" not in item:
        raise MemoryFileError(f"{where}.text: missing")
    text = item["text"]
    if text is not None and (not isinstance(text, str) or len(text) > MAX_TEXT_CHARS):
        raise MemoryFileError(f"{where}.text: must be text of at most {MAX_TEXT_CHARS:,}"
                              " characters")
    return text


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="seconds")
