"""Ids and names Honcho accepts: its id rule and size limits, and the session a chat names
(by session strategy, after forgets) made to fit them. On the bottom floor, importing nothing of
ours, so settings validation, capture's splitting and every floor that names a session use it
without loading the SDK boundary (or httpx, which may be missing)."""

from __future__ import annotations

import hashlib
import re

ID_MAX = 512  # characters of a workspace, peer or session id
ID_RE = re.compile(rf"^[A-Za-z0-9_-]{{1,{ID_MAX}}}$")
MAX_CONTENT_CHARS = 25_000  # one message's content
MAX_MESSAGES_PER_CALL = 100  # messages added by one request
MAX_DIALECTIC_QUERY = 10_000  # characters of one dialectic question

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 16


# The one session of the `global` strategy; no chat or project id can equal it.
GLOBAL_SESSION = "global"


def session_id_for(chat_id: str, generation: int = 0) -> str:
    """Honcho session of an Agent Zero chat: `chat-<id>` within Honcho's id alphabet and length;
    after the chat was forgotten `generation` times (chats/forget.py), `chat<generation>-<id>`.

    The generation goes before the id, not after it: chat ids may hold any character of Honcho's
    alphabet, so `chat-<id>-2` could be another chat's first session, while `chat<digits>-` never
    starts `chat-` and its digits end at the first `-`, so every (chat, generation) has its own
    session."""
    return fitted_id("chat-" if generation <= 0 else f"chat{int(generation)}-", chat_id)


def session_for(strategy: str, chat_id: str, project: str | None, generation: int = 0) -> str:
    """The Honcho session a chat's messages go to under `session_strategy`.

    Each family has its own prefix (`chat-`, `project-`, the fixed `global`), so a chat's session
    never equals a project's, whatever the names. A chat without a project stays in its own session
    under `per-project`; an unknown strategy is read as the default, per-chat. `generation` (how
    often the chat was forgotten) names only a chat's own session: a project's or the global one is
    shared."""
    if strategy == "global":
        return GLOBAL_SESSION
    if strategy == "per-project" and project:
        return fitted_id("project-", project)
    return session_id_for(chat_id, generation)


_GENERATION = re.compile(r"^chat(?:([1-9][0-9]*))?-")


def chat_generation_of(chat_id: str, session_id: str) -> int | None:
    """Which generation of `chat_id`'s own session `session_id` is, or None when it is not one of
    them (a project's, the global one, another chat's)."""
    found = _GENERATION.match(session_id)
    if found is None:
        return None
    generation = int(found.group(1) or 0)
    return generation if session_id_for(chat_id, generation) == session_id else None


def fitted_id(prefix: str, name: str) -> str:
    """`prefix` + `name` within Honcho's id alphabet and length: a session's or a peer's id.

    A name that had to be changed to fit (characters replaced, or cut at the length limit) gets a
    digest of the original, so two different names never share an id; names that fit are kept
    as they are."""
    raw = str(name)
    fitted = prefix + _UNSAFE_ID.sub("_", raw)
    if fitted == prefix + raw and len(fitted) <= ID_MAX:
        return fitted
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    return fitted[:ID_MAX - _DIGEST_CHARS - 1] + "-" + digest
