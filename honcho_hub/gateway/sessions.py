"""The Honcho session of an Agent Zero chat: one chat, one session, named so that it fits Honcho's ids.

Capture stores it on every event; recall, the memory tool and status ask for the same chat's session."""

from __future__ import annotations

import hashlib
import re

from .limits import ID_MAX

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 16


def session_id_for(chat_id: str) -> str:
    """Honcho session of an Agent Zero chat: `chat-<id>` within Honcho's id alphabet and length.

    An id that had to be changed to fit (characters replaced, or cut at the length limit) gets a digest
    of the original, so two different chats never share a session; ids that fit are kept as they are."""
    raw = str(chat_id)
    session = "chat-" + _UNSAFE_ID.sub("_", raw)
    if session == "chat-" + raw and len(session) <= ID_MAX:
        return session
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    return session[:ID_MAX - _DIGEST_CHARS - 1] + "-" + digest
