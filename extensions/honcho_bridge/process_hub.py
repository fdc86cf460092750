"""The process's Hub as Agent Zero sees it: global settings, enabled state, project secrets.

The other bridge modules ask this one for the Hub; it configures it from `host` on every ask.
"""

from __future__ import annotations

from usr.plugins.honcho.honcho_hub import hub as hub_module
from usr.plugins.honcho.honcho_hub.hub import Hub
from usr.plugins.honcho.honcho_hub.settings.config import Settings

from . import host
from .host import PLUGIN_NAME


def hub() -> Hub:
    """The Hub, told where Agent Zero keeps the global settings (cheap: every adapter asks for
    it)."""
    return hub_module.current().reconfigure(settings=global_settings, enabled=plugin_enabled,
                                            replay_secrets=host.project_secrets)


def ensure_worker():
    """Idempotent and cheap: called by agent_init, job_loop and the capture adapters."""
    return hub().ensure_worker()


def global_settings() -> Settings:
    """Delivery settings are global: no agent, no project (cached: see host.settings_for)."""
    return host.global_settings()


def plugin_enabled() -> bool:
    """Toggling the plugin calls no hook, so the worker asks before each step."""
    from helpers import plugins

    return PLUGIN_NAME in plugins.get_enabled_plugins(None)
