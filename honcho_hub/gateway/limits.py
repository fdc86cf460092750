"""What Honcho accepts, and an Agent Zero chat's session id made to fit it. A leaf with no imports of
ours: settings validation, capture's splitting and the session names of capture, recall, the tool and
status use it without loading the SDK boundary (or httpx, which may be missing)."""

from __future__ import annotations

import hashlib
import re

ID_MAX = 512  # characters of a workspace, peer or session id
ID_RE = re.compile(rf"^[A-Za-z0-9_-]{{1,{ID_MAX}}}$")
MAX_CONTENT_CHARS = 25_000  # one message's content
MAX_MESSAGES_PER_CALL = 100  # messages added by one request

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
