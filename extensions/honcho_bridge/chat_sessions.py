"""The Honcho session an Agent Zero chat names now, after its forgets, as the process's recall knows it.

Above `host` (which knows nothing of the Hub) and beside `process_hub`, whose Hub holds the recaller that
reads a chat's generation."""

from __future__ import annotations

from typing import Any

from usr.plugins.honcho.honcho_hub.names import session_for
from usr.plugins.honcho.honcho_hub.settings.config import Settings

from .process_hub import hub

# Off the event loop and off a turn's recall (status, the tool, chat start): the longest a chat's generation
# (how often it was forgotten) is waited for; local SQLite, so a read takes milliseconds unless it is locked.
CHAT_READ_WAIT_S = 2.0


def chat_session(agent: Any, settings: Settings, project: str | None, wait_s: float = 0.0) -> str:
    """The Honcho session of this agent's chat in `project` under the settings' session strategy, after the
    chat's forgets (see session_of)."""
    return session_of(str(agent.context.id), settings, project, wait_s)


def session_of(chat_id: str, settings: Settings, project: str | None, wait_s: float = 0.0) -> str:
    """The Honcho session chat `chat_id` names now: its current generation's once it was forgotten, as the
    process's recall knows it (Recaller.chat_session). On Agent Zero's event loop `wait_s` stays 0: memory
    only, and before recall is built (its first use imports the SDK) nothing is known yet: the chat's first
    session. Other threads pass a bound: recall is built, and the chat's generation read within it."""
    the_hub = hub()
    recaller = the_hub.ready_recaller() if wait_s <= 0 else _recaller(the_hub)
    if recaller is None:
        return session_for(settings.session_strategy, chat_id, project)
    return recaller.chat_session(settings, chat_id, project, wait_s)


def _recaller(the_hub: Any) -> Any:
    try:
        return the_hub.recaller()
    except ImportError:  # running degraded (no SDK): no recall, nothing known of forgets either
        return None
