"""Settings, secrets and chat facts as Agent Zero v1.x provides them."""

from __future__ import annotations

import os
from typing import Any

from usr.plugins.honcho.honcho_hub.capture_rules import ChatFacts
from usr.plugins.honcho.honcho_hub.config import Settings, build_settings

PLUGIN_NAME = "honcho"


def settings_for(agent: Any) -> Settings:
    """Effective settings for this agent's chat (project settings merged by our config hook)."""
    from helpers import plugins
    from helpers.secrets import get_default_secrets_manager

    config = plugins.get_plugin_config(PLUGIN_NAME, agent=agent) or {}
    # Identity and the key are global: a project's secrets.env must not switch the workspace or key.
    # (Project secrets are still masked and redacted: see host_secrets and mask.)
    manager = get_default_secrets_manager()
    return build_settings(config, _load(manager), os.environ, load_secrets=lambda: _load(manager))


def host_secrets(agent: Any) -> dict[str, str]:
    """The secrets Agent Zero knows for this chat (global and project), by name."""
    return _load(_secrets_manager(agent))


def mask(agent: Any, text: str) -> str:
    """Agent Zero's own masker first: known secret values become `§§secret(NAME)` aliases."""
    manager = _secrets_manager(agent)
    return manager.mask_values(text) if manager is not None else text


def chat_facts(agent: Any) -> ChatFacts:
    """Whether the chat is a background (MCP/A2A) chat or one run by a scheduled task."""
    context = agent.context
    kind = getattr(context, "type", None)
    return ChatFacts(background=str(getattr(kind, "value", kind)).lower() == "background",
                     scheduler_run=_scheduler_owns(context.id))


def project_name(agent: Any) -> str | None:
    """The chat's Agent Zero project, read now: a project is attached after the agent exists."""
    from helpers.projects import get_context_project_name

    return get_context_project_name(agent.context) or None


def _scheduler_owns(context_id: str) -> bool:
    from helpers.task_scheduler import TaskScheduler

    return bool(TaskScheduler.get().get_tasks_by_context_id(context_id))


def _secrets_manager(agent: Any):
    from helpers.secrets import get_secrets_manager

    return get_secrets_manager(getattr(agent, "context", None))


def _load(manager: Any) -> dict[str, str]:
    return dict(manager.load_secrets() or {}) if manager is not None else {}
