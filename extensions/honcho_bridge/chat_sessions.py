"""The Honcho session an Agent Zero chat names now, after its forgets.

As the process's chats' sessions (chats/sessions.py, held by `process_hub`'s Hub) know it; above
`host`, which knows nothing of the Hub.
"""

from __future__ import annotations

from typing import Any

from usr.plugins.honcho.honcho_hub.settings.config import Settings

from . import host
from .process_hub import hub

# Off the event loop and off a turn's recall (status, the tool, chat start): the longest a chat's
# generation (how often it was forgotten) is waited for; local SQLite, so a read takes milliseconds
# unless it is locked.
CHAT_READ_WAIT_S = 2.0


def chat_session(agent: Any, settings: Settings, project: str | None, wait_s: float = 0.0) -> str:
    """The Honcho session of the chat this agent works for (host.chat_id: a subordinate's child chat
    names its root chat's) in `project` under the settings' session strategy, after the chat's
    forgets (see session_of)."""
    return session_of(host.chat_id(agent), settings, project, wait_s)


def session_of(chat_id: str, settings: Settings, project: str | None, wait_s: float = 0.0) -> str:
    """The Honcho session chat `chat_id` names now: its current generation's once it was forgotten,
    as the process's chats' sessions know it (chats/sessions.py). On Agent Zero's event loop
    `wait_s` stays 0: memory only (a chat not read yet is read meanwhile). Other threads pass a
    bound: the chat's generation is read within it."""
    return hub().chats().session(settings, chat_id, project, wait_s)
