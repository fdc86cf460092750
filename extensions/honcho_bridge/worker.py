"""Keeps the process's delivery worker running, with global settings and Agent Zero's enabled state."""

from __future__ import annotations

from usr.plugins.honcho.honcho_hub import runtime
from usr.plugins.honcho.honcho_hub.settings.config import Settings

from . import host
from .host import PLUGIN_NAME


def ensure_worker():
    """Idempotent and cheap: called by agent_init, job_loop and the capture adapters."""
    return runtime.ensure_worker(global_settings, plugin_enabled)


def global_settings() -> Settings:
    """Delivery settings are global: no agent, no project (cached: see host.settings_for)."""
    return host.global_settings()


def plugin_enabled() -> bool:
    """Toggling the plugin calls no hook, so the worker asks before each step."""
    from helpers import plugins

    return PLUGIN_NAME in plugins.get_enabled_plugins(None)
