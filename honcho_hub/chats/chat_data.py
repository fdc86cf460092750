"""What a chat's own data says of it: who writes in it (the sender a chat integration or the
external API left there) and the user's "Don't remember this chat". Read alike off a live chat by
the bridge and off a saved chat.json by the backfill; the keys are Agent Zero v1.7's and ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .rules import REMEMBER_KEY, Remember, Sender, remember_state

# Set on a chat by the plugin's `communicate` start extension from the request that sent its first
# message (persisted with the chat): "api" for Agent Zero's external API, "ui" for any other.
CHAT_ORIGIN = "honcho_chat_origin"


def sender_of(data: Mapping[str, Any], chat_id: str) -> Sender | None:
    """Who writes in a chat that Agent Zero v1.7's bundled chat integrations or its external API
    started, from what they keep on the chat (its context data); None for a web-UI chat.

    The integrations set their keys after the chat exists (so `agent_init` does not see them) and
    before its first message. Telegram keeps a chat per (bot, user, chat): a group's chat id is not
    the user's. WhatsApp keeps one chat per JID, and `wa_sender_number` is only its first sender's:
    a group is its JID, whoever writes. The external API names no sender: the chat stands for its
    caller. A chat saved before `honcho_chat_origin` existed has none: the owner's, as before."""
    if data.get("telegram_user_id") is not None:
        user, chat = str(data["telegram_user_id"]), str(data.get("telegram_chat_id", ""))
        group = bool(chat) and chat != user
        return Sender("telegram", chat if group else user, group)
    if data.get("wa_chat_id"):
        group = bool(data.get("wa_is_group"))
        number = str(data.get("wa_sender_number") or "")
        return Sender("whatsapp", str(data["wa_chat_id"]) if group or not number else number,
                      group)
    if data.get("email_sender"):
        return Sender("email", _address(str(data["email_sender"])))
    if data.get(CHAT_ORIGIN) == "api":
        return Sender("api", chat_id)
    return None


def chat_remember(data: Any) -> Remember:
    """The chat's "Don't remember this chat" (rules.Remember) as its data holds it under
    REMEMBER_KEY; remembered when it has no data."""
    return remember_state(data.get(REMEMBER_KEY) if isinstance(data, Mapping) else None)


def _address(sender: str) -> str:
    """The address of an e-mail `From` (`Bob <bob@example.org>` or `bob@example.org`), lower
    case."""
    start = sender.rfind("<")
    end = sender.find(">", start)
    return (sender[start + 1:end] if 0 <= start < end else sender).strip().lower()
