"""The sidebar's API side: status, the bounded operator actions and the card, for the chat the UI shows."""

from __future__ import annotations

import time
from typing import Any

from usr.plugins.honcho.honcho_hub.gateway.limits import session_for
from usr.plugins.honcho.honcho_hub.gateway.scopes import resolve_scope
from usr.plugins.honcho.honcho_hub.ops import verbs as operations
from usr.plugins.honcho.honcho_hub.ops.status import build_status
from usr.plugins.honcho.honcho_hub.settings import log_level
from usr.plugins.honcho.honcho_hub.tool.verbs import card_view

from .worker import global_settings, hub, plugin_enabled

ACTIONS = ("check", "wake", "drain", "retry_dead", "clear_cache")


def status_document(body: Any) -> dict:
    """Status for the sidebar; with a chat id it includes that chat's session (its peers' configuration on
    the server) and scope progress. `light: true` (the collapsed line's poll) reads local state only: no
    request to Honcho."""
    settings = global_settings()
    log_level.follow(settings)
    session, scope = _chat(body)
    light = isinstance(body, dict) and body.get("light") is True
    parts = hub().status_parts(settings, session, scope, backfill=session is not None and not light)
    return {"ok": True, "status": build_status(settings, parts, time.time())}


def card_document(body: Any) -> dict:
    """The agent's card of the user for the open panel: one request to Honcho (identity is global, so the
    body names nothing)."""
    settings = global_settings()
    log_level.follow(settings)
    return card_view(hub().tool_gateway(settings), settings)


def run_operation(body: Any) -> dict:
    """One of ACTIONS; a structured error for anything else."""
    action = body.get("action") if isinstance(body, dict) else None
    if action not in ACTIONS:
        return {"ok": False, "error": f"unknown action; use one of: {', '.join(ACTIONS)}"}
    hub()  # the operator verbs reach the worker through it
    settings = global_settings()
    log_level.follow(settings)
    result = {
        "check": lambda: operations.check(settings),
        "wake": operations.wake,
        "drain": lambda: operations.drain(settings, operations.DRAIN_S, enabled=plugin_enabled),
        "retry_dead": lambda: operations.retry_dead(settings, operations.MAX_REQUEUE),
        "clear_cache": lambda: operations.clear_cache(settings),
    }[action]()
    return {"ok": "error" not in result, "action": action, "result": result}


def _chat(body: Any) -> tuple[str | None, str | None]:
    context_id = body.get("context") if isinstance(body, dict) else None
    if not isinstance(context_id, str) or not context_id:
        return None, None
    settings = global_settings()
    try:
        from agent import AgentContext
        from helpers.projects import get_context_project_name

        context = AgentContext.get(context_id)
        project = get_context_project_name(context) if context is not None else None
    except Exception:  # an unknown chat or an older host: status without the chat part
        return session_for(settings.session_strategy, context_id, None), None
    return session_for(settings.session_strategy, context_id, project), resolve_scope(settings, project)
