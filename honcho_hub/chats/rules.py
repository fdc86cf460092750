"""Whose chat it is: the chat-level facts the adapters read off Agent Zero's objects, the peer of a
chat's human, the settings a chat is seen through, whether anything of a chat is captured, and
whether the user asked that a chat not be remembered ("Don't remember this chat").

Pure rules on plain facts, so they are tested without a host. The message-level rules (which message
is the human's, which answer is final) are capture's (capture/rules.py), built on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from ..names import fitted_id
from ..settings.config import Settings

UNMAPPED_CHAT = "unmapped_chat"  # the skip reason of a chat no one is named for, under no-capture
NOT_REMEMBERED = "chat_not_remembered"  # the skip reason of a chat the user asked us to leave out
NOT_RECALLED = "chat_not_recalled"  # recall's skip reason under Remember.OFF
# Where a host keeps the state in a chat's own data (Agent Zero saves every key not starting with
# `_` in the chat's file, so it outlives a restart); absent: remembered.
REMEMBER_KEY = "honcho_remember"


class Remember(str, Enum):
    """Whether a chat is remembered: the user's "Don't remember this chat", per chat."""

    YES = "remember"  # the default: captured and recalled
    NO_CAPTURE = "no-capture"  # nothing of the chat is captured; recall goes on
    OFF = "off"  # neither captured nor recalled: the chat is outside memory


def remember_state(value: Any) -> Remember:
    """The state a chat's data holds under REMEMBER_KEY. Absent (None) is remembered; any other
    value this version does not know is OFF: the user asked for less memory in some way, so it
    fails closed, never open."""
    if value is None:
        return Remember.YES
    try:
        return Remember(value)
    except ValueError:
        return Remember.OFF


@dataclass(frozen=True)
class Sender:
    """Who writes in a chat that came from outside the web UI: a chat integration's sender or
    group, or the external API's caller (who names no one: the chat stands for them)."""

    channel: str  # one of settings.spec.SENDER_CHANNELS
    # On that channel: a Telegram user id, a WhatsApp number, an e-mail address; a group's own id
    # (Telegram's chat id, WhatsApp's group JID); an API chat's id.
    id: str
    group: bool = False  # everyone in it reads the replies

    @property
    def key(self) -> str:
        """The sender as `sender_peers` names it, e.g. `telegram:12345`."""
        return f"{self.channel}:{self.id}"


@dataclass(frozen=True)
class HumanFacts:
    """What the host knows about whose chat it is.

    Agent Zero v1.7 has one login and its chats name no user, so the facts are the chat's project
    (its settings carry the project's `human_peer_id`), agent 0's profile and, for a chat a chat
    integration or the external API started, its sender. A host that tells which person is signed
    in would add that person (a `login` field) here, and `human_peer` would look at it first: one
    more fact, the same one rule and everything downstream unchanged.
    """

    profile: str = ""  # agent 0's Agent Zero agent profile ('' when the host names none)
    sender: Sender | None = None  # None: a web-UI chat, the owner's


@dataclass(frozen=True)
class ChatFacts:
    """What kind of chat a message belongs to."""

    background: bool  # MCP/A2A chats: nobody typed there
    scheduler_run: bool  # a scheduled task owns the chat
    human: HumanFacts = field(default_factory=HumanFacts)
    remember: Remember = Remember.YES  # the root chat's "Don't remember this chat"


def human_peer(facts: HumanFacts, settings: Settings) -> str | None:
    """The peer id of the chat's human, None for no one (nothing captured or recalled).

    A chat with a sender is someone else's unless said otherwise: its entry in `sender_peers`,
    else by `outside_chats` a peer of its own (`own-peer`), the owner's (`owner`: as before this
    rule) or no one (`no-capture`). A group is never a member's: under `owner` it still gets a
    peer of its own, since everyone in it reads what is recalled there. Any other chat is the
    owner's (`owner_peer`)."""
    if facts.sender is None:
        return owner_peer(facts, settings)
    mapped = settings.sender_peer_map.get(facts.sender.key)
    if mapped:
        return mapped
    if settings.outside_chats == "no-capture":
        return None
    if settings.outside_chats == "owner" and not facts.sender.group:
        return owner_peer(facts, settings)
    return sender_peer_id(facts.sender)


def confined_chat(facts: HumanFacts, settings: Settings) -> bool:
    """Whether the chat reads only its own peer's memory and its own session: a chat from outside
    the web UI (a chat integration's sender or group, an external API caller) whose human is not
    the owner's peer (`owner_peer`): an unmapped sender's or group's own peer, an API chat's, a
    sender `sender_peers` maps to someone else. The workspace, a scope and the agent's model of
    itself hold the owner's chats too, so none of them is read there. `settings`: the chat's
    project's, not its view."""
    return facts.sender is not None and human_peer(facts, settings) != owner_peer(facts, settings)


def offers_this_is_me(facts: HumanFacts, settings: Settings) -> bool:
    """Whether the owner may name the chat's sender as themselves ("This is me": its key mapped to
    the owner in `sender_peers`): a sender `sender_peers` does not map yet, and never a group —
    everyone in a group reads what is recalled there, so only a deliberate `sender_peers` entry
    maps one."""
    sender = facts.sender
    return (sender is not None and not sender.group
            and sender.key not in settings.sender_peer_map)


def chat_kind(chat: ChatFacts) -> str:
    """What kind of chat it is, for status: background, scheduler, web_ui, or its sender's
    channel (`<channel>_group` for a group)."""
    if chat.background:
        return "background"
    if chat.scheduler_run:
        return "scheduler"
    sender = chat.human.sender
    if sender is None:
        return "web_ui"
    return f"{sender.channel}_group" if sender.group else sender.channel


def sender_peer_id(sender: Sender) -> str:
    """The peer of its own an unmapped sender gets: stable, from its channel and id
    (`telegram-12345`; a digest when the id does not fit Honcho's id rule)."""
    return fitted_id(f"{sender.channel}-", sender.id)


def owner_peer(facts: HumanFacts, settings: Settings) -> str | None:
    """The peer of the owner's chat: the first of the project's `human_peer_id` (with `settings`
    the chat's project's: it is also their `user_peer_id`) and the profile's entry in
    `profile_peers`; a chat neither names is unmapped: `user_peer_id` under `unmapped_chats:
    default-peer`, None (no one: nothing captured or recalled) under `no-capture`.

    `no-capture` holds whatever else is configured: with no mapping anywhere every chat is unmapped,
    so nothing is captured. Failing closed is the point of the setting (a chat's human must never be
    guessed), and it keeps the rule about this chat's own facts: no other project's file is read.
    """
    if settings.human_peer_id:
        return settings.human_peer_id
    mapped = settings.profile_peer_map.get(facts.profile) if facts.profile else None
    if mapped:
        return mapped
    return settings.user_peer_id if settings.unmapped_chats == "default-peer" else None


def chat_view(settings: Settings, facts: HumanFacts, project: str | None,
              global_settings: Settings) -> Settings:
    """A chat's settings (`settings`: its project's) with its human as `user_peer_id`, so capture,
    recall, the tool, status and the dialectic all name the same peer. Under a strategy that shares
    a session (global, per-project), a chat whose human is not that session's gets `per-chat`: a
    session's recent messages and summary reach every pack read through it, so no session holds
    two humans. A confined chat (`confined_chat`) also gets no scope and no self-model. A chat no
    one is named for (`unmapped_chats: no-capture`) is returned as it is: its adapters skip it."""
    human = human_peer(facts, settings)
    if human is None:
        return settings
    if confined_chat(facts, settings):
        # A session of its own, no scope (a scoped dialectic searches every session of the scope)
        # and no self-model of the agent (derived from the owner's chats too).
        return replace(settings, user_peer_id=human, session_strategy="per-chat",
                       scope_strategy="off", include_agent_representation=False)
    owner = _shared_session_owner(settings, project, global_settings)
    strategy = "per-chat" if owner is not None and human != owner else settings.session_strategy
    if (human, strategy) == (settings.user_peer_id, settings.session_strategy):
        return settings
    return replace(settings, user_peer_id=human, session_strategy=strategy)


def _shared_session_owner(settings: Settings, project: str | None,
                          global_settings: Settings) -> str | None:
    """The human whose chats share the session the strategy gives a chat in `project`, None when the
    chat gets a session of its own: under `global` the human of a chat nothing names (the global
    settings'), under `per-project` the project's human (`user_peer_id` when it names none)."""
    if settings.session_strategy == "global":
        owner = global_settings
    elif settings.session_strategy == "per-project" and project:
        owner = settings
    else:
        return None
    return owner.human_peer_id or owner.user_peer_id


def skip_reason_for_chat(chat: ChatFacts, settings: Settings) -> str | None:
    """Why nothing of this chat is captured, or None."""
    if not settings.capture_enabled:
        return "capture_disabled"
    if chat.remember is not Remember.YES:
        return NOT_REMEMBERED
    if chat.background:
        return "background_chat"
    if chat.scheduler_run and not settings.capture_scheduler_chats:
        return "scheduler_chat"
    if human_peer(chat.human, settings) is None:
        return UNMAPPED_CHAT
    return None


def skip_reason_for_recall(chat: ChatFacts, settings: Settings) -> str | None:
    """Why no memory is recalled into this chat's turns, or None. A chat the user left out of
    capture only (NO_CAPTURE) still gets its pack: the chat reads memory, it adds nothing to it."""
    if chat.background:
        return "background_chat"
    if not settings.recall_enabled:
        return "disabled"
    if chat.remember is Remember.OFF:
        return NOT_RECALLED
    if human_peer(chat.human, settings) is None:
        return UNMAPPED_CHAT  # no-capture: nobody's memory belongs in a chat no one is named for
    return None


def asks_dialectic(chat: ChatFacts) -> bool:
    """Whether the dialectic may be asked about this chat (its turns' note, a new chat's prewarm):
    only in a remembered one. Its question names the chat's session, which Honcho creates when
    asked, and carries the typed text to Honcho's model: a chat the user asked us not to remember
    leaves neither (its recall still searches with the typed text, added to no session)."""
    return chat.remember is Remember.YES
