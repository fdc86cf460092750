"""The sidebar's API side, for the chat the UI shows.

Status, the bounded operator actions, the card, the memory inspector, and the offers to forget a
chat deleted in Agent Zero.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from usr.plugins.honcho.honcho_hub import hub as hub_module
from usr.plugins.honcho.honcho_hub.chats import forget
from usr.plugins.honcho.honcho_hub.chats.rules import chat_kind
from usr.plugins.honcho.honcho_hub.errors import ForgetRefused
from usr.plugins.honcho.honcho_hub.gateway.scopes import resolve_scope
from usr.plugins.honcho.honcho_hub.ops import inspector, memory_file, observation
from usr.plugins.honcho.honcho_hub.ops import operator as operations
from usr.plugins.honcho.honcho_hub.ops import purge as purge_files
from usr.plugins.honcho.honcho_hub.ops.running_code import read_running_code
from usr.plugins.honcho.honcho_hub.ops.status import build_status
from usr.plugins.honcho.honcho_hub.settings import log_level
from usr.plugins.honcho.honcho_hub.settings.config import Settings
from usr.plugins.honcho.honcho_hub.settings.upgrade import last_upgrade
from usr.plugins.honcho.honcho_hub.storage import memory_log
from usr.plugins.honcho.honcho_hub.tool.actions import ActionContext, card_view

from . import host
from .api_actions import checked_action
from .chat_sessions import CHAT_READ_WAIT_S, chat_session, session_of
from .process_hub import global_settings, hub, keep_record, plugin_enabled
from .recall import template
from .remember import remember_state_counts
from .tool import action_context

ACTIONS = ("check", "wake", "drain", "retry_dead", "clear_cache", "observation_check",
           "observation_apply")
INSPECTOR_ACTIONS = ("view", "search", "forget", "undo", "edit_card", "export", "import",
                     "receipt", "remember", "pin", "base_pack", *inspector.CORRECT_ACTIONS)
FORGET_ACTIONS = ("offers", "forget_chat", "dismiss", "forget_leftovers")
PURGE_ACTIONS = ("survey", "purge", "resume")
# The purge's wait for the plugin's threads, in all, as uninstall's (hooks.UNINSTALL_WAIT_S).
PURGE_WAIT_S = 5.0
# What the page says once purged; the sidebar shows it as text.
PURGED_TEXT = ("Purged: the outbox, the capture journal and the marker are gone. Memory in Honcho"
               " is kept. Nothing is captured or sent in this Agent Zero now: uninstall the plugin,"
               " or resume memory (a restart of Agent Zero resumes it too).")
# Actions that would open (and so create) the outbox again: refused while purged.
PURGED_REFUSES = ("wake", "drain", "retry_dead")
PURGED_ERROR = "memory is purged in this Agent Zero; resume it first (Purge panel)"
# the sidebar's request waits at most this for sends on the wire; forgetting again finishes
FORGET_WAIT_S = 30.0


def status_document(body: Any) -> dict:
    """Status for the sidebar; with a chat id it includes that chat's session (its peers'
    configuration on the server) and scope progress. `light: true` (the collapsed line's poll) reads
    local state only: no request to Honcho."""
    settings, session, scope = _chat(body)
    log_level.follow(settings)
    light = isinstance(body, dict) and body.get("light") is True
    parts = hub().status_parts(settings, session, scope,
                               backfill=session is not None and not light)
    parts.chats_seen = host.chats_seen()
    agent = _chat_agent(body) if isinstance(body, dict) else None
    if agent is not None:
        facts = host.chat_facts(agent, count_seen=False)  # seen by capture and recall only
        parts.chat_kind = chat_kind(facts)
        parts.chat_sender = facts.human.sender.key if facts.human.sender is not None else None
    parts.not_remembered = remember_state_counts()
    parts.upgrade = last_upgrade(host.PLUGIN_DIR)
    parts.code = read_running_code()  # Agent Zero runs the code on disk, or needs a restart
    return {"ok": True, "status": build_status(settings, parts, time.time())}


def card_document(body: Any) -> dict:
    """The agent's card of the human of the chat the UI shows (`context`), else of `user_peer_id`:
    one request to Honcho."""
    settings = _chat(body)[0]
    log_level.follow(settings)
    return card_view(hub().tool_gateway(settings), settings)


def run_operation(body: Any) -> dict:
    """One of ACTIONS; a structured error for anything else. `observation_check` and
    `observation_apply` (`confirmed: true` from the panel's confirm step) take the page's `offset`
    (ops/observation.py)."""
    body, refused = checked_action(body, ACTIONS)
    if refused:
        return refused
    action = body["action"]
    if action == "observation_apply" and body.get("confirmed") is not True:
        return {"ok": False, "action": action,
                "error": "this changes what Honcho derives in existing sessions; confirm first"}
    the_hub = hub()  # the operator verbs act on its worker, capture journal and recaller
    if action in PURGED_REFUSES and the_hub.purged():
        return {"ok": False, "action": action, "error": PURGED_ERROR}
    settings = global_settings()
    log_level.follow(settings)
    result = {
        "check": lambda: operations.check(settings),
        "wake": lambda: operations.wake(settings, the_hub.worker(), the_hub.start_worker_now,
                                        plugin_enabled),
        "drain": lambda: operations.drain(settings, operations.DRAIN_S, worker=the_hub.worker(),
                                          flush_capture=the_hub.flush_capture,
                                          enabled=plugin_enabled),
        "retry_dead": lambda: operations.retry_dead(settings, the_hub.worker(),
                                                    operations.MAX_REQUEUE),
        "clear_cache": lambda: operations.clear_cache(settings, the_hub.recaller()),
        "observation_check": lambda: _observation(settings, body.get("offset"), apply=False),
        "observation_apply": lambda: _observation(settings, body.get("offset"), apply=True),
    }[action]()
    return {"ok": "error" not in result, "action": action, "result": result}


def _observation(settings: Settings, offset: Any, apply: bool) -> dict:
    """One page of the saved observation preset checked (or applied) on the sessions this install
    made, with its text for the panel."""
    start = offset if type(offset) is int and offset > 0 else 0
    gateway = hub().tool_gateway(settings)
    report = (observation.apply if apply else observation.check)(settings, gateway, start)
    return {**report, "text": observation.report_text(report)}


def inspector_document(body: Any) -> dict:
    """One of INSPECTOR_ACTIONS of the memory inspector, seen from the chat the UI shows (its human,
    session and scope), else from the global settings: `view` (`page`), `search` (`query`),
    `forget` (`id`, and `confirmed: true` from the UI's confirm step), `undo` (`id` of a forgotten
    conclusion), `edit_card` (`facts`: the whole new card), `export` (`format`: json or markdown;
    the file's text and name), `import` (`file`: an export's JSON text; `dry_run: true` sends
    nothing), `receipt` (`receipt`: a receipt's id; the pack its turn got while recall holds it),
    `remember` (`text`, and `expires_in` for a lifetime), `pin` (`id`: its lifetime removed), and
    the corrections: `correct` (`id`, `content`, `confirmed`), `correct_fact` (`fact`, `content`,
    `confirmed`), `rebuild_card` (`confirmed`), `evidence` and `messages` (`id`), `level`
    (`level`, `page`). A structured error for anything else."""
    body, refused = checked_action(body, INSPECTOR_ACTIONS)
    if refused:
        return refused
    action = body["action"]
    the_hub = hub()
    agent = _chat_agent(body)
    # A chat with no human (unmapped_chats: no-capture) or whose project or profile has the plugin
    # switched off has no memory of its own: the global view instead.
    actions = (action_context(agent) if agent is not None and host.plugin_on_for(agent)
               and host.chat_human(agent) is not None else _global_actions())
    log_level.follow(actions.settings)
    ins = inspector.Inspector(actions, the_hub.recaller(), template())
    return {
        "view": lambda: inspector.view(ins, body.get("page", 1)),
        "search": lambda: inspector.search(ins, body.get("query")),
        "forget": lambda: inspector.forget(ins, body.get("id"), body.get("confirmed")),
        "undo": lambda: inspector.undo(ins, body.get("id")),
        "edit_card": lambda: inspector.edit_card(ins, body.get("facts")),
        "export": lambda: memory_file.download(actions, body.get("format"), time.time()),
        "import": lambda: _imported(actions, body.get("file"), body.get("dry_run") is True),
        "receipt": lambda: inspector.receipt(ins, body.get("receipt")),
        "remember": lambda: inspector.remember(ins, body.get("text"), body.get("expires_in")),
        "pin": lambda: inspector.pin(ins, body.get("id")),
        "base_pack": lambda: {"ok": True, "base_pack": inspector.base_pack(ins)},
        **_corrections(ins, body),
    }[action]()


def _corrections(ins: inspector.Inspector, body: dict) -> dict:
    """The inspector's corrections and the evidence it shows, by action."""
    confirmed = body.get("confirmed")
    return {
        "correct": lambda: inspector.correct(ins, body.get("id"), body.get("content"), confirmed),
        "correct_fact": lambda: inspector.correct_fact(ins, body.get("fact"), body.get("content"),
                                                       confirmed),
        "rebuild_card": lambda: inspector.rebuild_card(ins, confirmed),
        "evidence": lambda: inspector.evidence(ins, body.get("id")),
        "messages": lambda: inspector.messages(ins, body.get("id")),
        "level": lambda: inspector.at_level(ins, body.get("level"), body.get("page", 1)),
    }


def _imported(actions: ActionContext, text: Any, dry_run: bool) -> dict:
    """An import of the file's text; the next turn's pack shows what it created."""
    report = memory_file.upload(actions, text, dry_run)
    if report.get("created") or report.get("card_added"):
        hub().recaller().memory_changed(actions.settings)
    return report


def _chat_agent(body: dict) -> Any:
    """Agent 0 of the chat the UI shows; None without one (or on a host that cannot say)."""
    context_id = body.get("context")
    if not isinstance(context_id, str) or not context_id:
        return None
    try:
        from agent import AgentContext

        context = AgentContext.get(context_id)
    except Exception:  # an older host: the inspector looks from the global settings
        return None
    return getattr(context, "agent0", None) if context is not None else None


def _global_actions() -> ActionContext:
    """The memory tool's context outside any chat: global settings and secrets, no session or
    scope."""
    settings = global_settings()
    the_hub = hub()
    gateway = the_hub.tool_gateway(settings)

    def record(write: memory_log.MemoryWrite) -> None:
        the_hub.recaller().memory_changed(settings)  # the next turn's pack shows the change
        keep_record(the_hub, settings, write)

    return ActionContext(settings=settings, secrets=host.host_secrets(None),
                         mask=lambda text: host.mask(None, text), gateway=gateway,
                         supports_scopes=gateway.supports_scopes, record=record)


def _chat(body: Any) -> tuple[Settings, str | None, str | None]:
    """The settings, session and scope of the chat the UI shows (`context`): its human's, as its
    turns use them; the global settings and no session without a chat (or for a chat with no
    human)."""
    settings = global_settings()
    context_id = body.get("context") if isinstance(body, dict) else None
    if not isinstance(context_id, str) or not context_id:
        return settings, None, None
    agent = _chat_agent(body)
    if agent is None:  # an unknown chat or an older host: status without the chat part
        session = session_of(context_id, settings, None, CHAT_READ_WAIT_S)
        return settings, session, None
    if not host.plugin_on_for(agent):
        return settings, None, None  # switched off for its project or profile: no memory of its own
    chat_settings = host.settings_for(agent)
    # unmapped_chats no-capture: no memory of its own
    if host.chat_human(agent, chat_settings) is None:
        return settings, None, None
    project = host.project_name(agent)
    session = chat_session(agent, chat_settings, project, CHAT_READ_WAIT_S)
    return chat_settings, session, resolve_scope(chat_settings, project)


# -- forgetting a chat -----------------------------------------------------------------------------

def offer_forget_after_chat_delete(data: Any) -> bool:
    """After `AgentContext.remove`: when the user's chat-delete action removed the chat (Agent
    Zero's `api/chat_remove.py` handler is on the stack), offer to forget it in Honcho; whether an
    offer was made. Nothing is deleted here. `remove` also runs when API chats expire, for scheduler
    and MCP/A2A chats and others: those make no offer. In-memory only (no disk, no network): this
    runs on the event loop."""
    if not isinstance(data, dict) or data.get("exception") is not None:
        return False
    chat_id = host.call_argument(data, 0, "id")
    if not isinstance(chat_id, str) or not chat_id or not _called_by_chat_delete():
        return False
    removed = getattr(data.get("result"), "agent0", None)
    if removed is not None and host.chat_id(removed) != chat_id:
        return False  # a v2.x child chat: what it remembers is its root chat's
    forget.OFFERS.offer(chat_id, time.time())
    return True


def _called_by_chat_delete() -> bool:
    """Whether a frame on this thread's stack runs `RemoveChat.process` of Agent Zero's
    `api/chat_remove.py`: v1.7 has no extension point on the handler itself, so `remove`'s caller is
    told from the stack."""
    frame = sys._getframe(1)
    suffix = os.sep + os.path.join("api", "chat_remove.py")
    while frame is not None:
        code = frame.f_code
        if code.co_name == "process" and code.co_filename.endswith(suffix) \
                and type(frame.f_locals.get("self")).__name__ == "RemoveChat":
            return True
        frame = frame.f_back
    return False


def forget_document(body: Any) -> dict:
    """One of FORGET_ACTIONS: `offers` (chats deleted in Agent Zero that may be forgotten, newest
    first), `forget_chat` (`chat`, and `confirmed: true` from the UI's confirm step: the chat's
    queued messages and its Honcho session deleted, see chats/forget.py; the answer lists what
    dreams derived from it and matching card facts), `forget_leftovers` (`chat`, `confirmed: true`:
    those removed), `dismiss` (`chat`: drop its offer). A structured error for anything else."""
    body, refused = checked_action(body, FORGET_ACTIONS)
    if refused:
        return refused
    action = body["action"]
    if action == "offers":
        return {"ok": True, "offers": forget.OFFERS.pending()}
    try:
        chat_id = forget.checked_chat_id(body.get("chat"))
    except ForgetRefused as exc:
        return {"ok": False, "error": str(exc)}
    if action == "dismiss":
        return {"ok": True, "dismissed": forget.OFFERS.withdraw(chat_id)}
    if body.get("confirmed") is not True:
        return {"ok": False,
                "error": "forgetting deletes from Honcho for good; confirm first"}
    if hub().purged():
        return {"ok": False, "error": PURGED_ERROR}
    settings = global_settings()
    log_level.follow(settings)
    if action == "forget_leftovers":
        removed = forget.forget_leftovers(settings, chat_id)
        return {"ok": "error" not in removed and not removed["not_removed"], "result": removed,
                "text": forget.leftovers_text(removed)}
    report = forget.forget_chat(settings, chat_id, wait_s=FORGET_WAIT_S)
    if "generation" in report:
        # its next turn names the new session
        hub().chats().forgotten(settings, chat_id, report["generation"])
        host.forget_recalled(chat_id)  # the chat's saved file keeps no recalled text
    # The sidebar lists what the forget left; the toast only counts it.
    return {"ok": report.get("state") == forget.DONE, "result": report,
            "text": forget.report_text(report, itemized=False)}


# -- purging before an uninstall -------------------------------------------------------------------

def purge_document(body: Any) -> dict:
    """One of PURGE_ACTIONS: `survey` (what a purge would remove: counts only, and whether this
    process is purged), `purge` (`confirmed: true` from the page's confirm step, `force: true` to
    remove messages not yet sent too; hub.purge), `resume` (hub.resume). Never a path or queued
    text: the page shows counts. A structured error for anything else."""
    body, refused = checked_action(body, PURGE_ACTIONS)
    if refused:
        return refused
    action = body["action"]
    the_hub = hub()  # configured: the purge halts and resumes this Hub
    settings = global_settings()
    log_level.follow(settings)
    if action == "survey":
        return {"ok": True, "purged": the_hub.purged(),
                "survey": purge_files.page_report(hub_module.purge_survey(settings))}
    if action == "resume":
        return {"ok": True, "started": hub_module.resume(), "purged": the_hub.purged()}
    if body.get("confirmed") is not True:
        return {"ok": False, "error": "a purge deletes the outbox and the capture journal for good;"
                                      " confirm first"}
    report = hub_module.purge(settings, force=body.get("force") is True, timeout_s=PURGE_WAIT_S)
    shown = purge_files.page_report(report)
    if report["state"] == purge_files.PURGED:
        return {"ok": True, "result": shown, "text": PURGED_TEXT}
    return {"ok": False, "result": shown,
            "text": f"Not purged: {report['reason']}. Nothing was removed; memory goes on."}
