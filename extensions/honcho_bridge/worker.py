"""Keeps the process's delivery worker running, with global settings and Agent Zero's enabled state."""

from __future__ import annotations

import os

from usr.plugins.honcho.honcho_hub import runtime
from usr.plugins.honcho.honcho_hub.config import Settings, build_settings

from .host import PLUGIN_NAME


def ensure_worker():
    """Idempotent and cheap: called by agent_init, job_loop and the capture adapters."""
    return runtime.ensure_worker(global_settings, plugin_enabled)


def global_settings() -> Settings:
    """Delivery settings are global: no agent, no project."""
    from helpers import plugins
    from helpers.secrets import get_default_secrets_manager

    manager = get_default_secrets_manager()  # the global secrets file, never a project's
    config = plugins.get_plugin_config(PLUGIN_NAME) or {}
    return build_settings(config, manager.load_secrets(), os.environ, load_secrets=manager.load_secrets)


def plugin_enabled() -> bool:
    """Toggling the plugin calls no hook, so the worker asks before each step."""
    from helpers import plugins

    return PLUGIN_NAME in plugins.get_enabled_plugins(None)
