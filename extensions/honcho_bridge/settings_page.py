"""The settings page's API side: what the form shows, and a refusal of values it would ignore.

Both run inside Agent Zero's `_get_config` and `_save_config` through extensions, since its settings
API returns a saved `config.json` as it is and answers ok to every save.
"""

from __future__ import annotations

from typing import Any

from usr.plugins.honcho.honcho_hub.settings.files import save_problems

from .host import PLUGIN_NAME, call_argument

MAX_SHOWN_PROBLEMS = 8


def form_values(request: dict) -> dict[str, Any]:
    """Every setting's saved value for the scope the form shows: the project's own settings over
    the global ones (the page shows those read-only in project scope)."""
    from helpers import plugins

    project = request.get("project_name") or None
    return plugins.get_plugin_config(PLUGIN_NAME, None, project,
                                     request.get("agent_profile") or None) or {}


def save_refusal(request: dict) -> str | None:
    """The error the settings dialog shows when the values cannot be saved; None to let the save
    run."""
    from helpers import plugins

    saved_global = plugins.get_plugin_config(PLUGIN_NAME) or {}
    problems = save_problems(request.get("settings"), bool(request.get("project_name")),
                             saved_global)
    if not problems:
        return None
    shown = problems[:MAX_SHOWN_PROBLEMS] + (["…"] if len(problems) > MAX_SHOWN_PROBLEMS else [])
    return "Not saved: " + "; ".join(shown)


def is_ours(data: Any) -> dict | None:
    """The request of an extensible `Plugins._get_config` / `_save_config` call (self, input) when
    it is for this plugin."""
    request = call_argument(data, 1, "input")
    return (request if isinstance(request, dict) and request.get("plugin_name") == PLUGIN_NAME
            else None)
