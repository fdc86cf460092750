"""Settings, secrets and chat facts as Agent Zero v1.x provides them.

It knows nothing of the Hub: the settings it builds are cached per project and per chat view.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from usr.plugins.honcho.honcho_hub.bounded import BoundedMap
from usr.plugins.honcho.honcho_hub.chats import chat_data
from usr.plugins.honcho.honcho_hub.chats.rules import (
    ChatFacts,
    HumanFacts,
    Remember,
    Sender,
    chat_kind,
    chat_view,
    confined_chat,
    human_peer,
)
from usr.plugins.honcho.honcho_hub.errors import ConfigFileError
from usr.plugins.honcho.honcho_hub.recall.pack import without_blocks
from usr.plugins.honcho.honcho_hub.settings.config import Settings
from usr.plugins.honcho.honcho_hub.settings.effective import effective_settings, read_layers
from usr.plugins.honcho.honcho_hub.settings.files import SettingsCache
from usr.plugins.honcho.honcho_hub.settings.upgrade import upgrade_config

PLUGIN_NAME = "honcho"
PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What our `get_plugin_config` hook merges (Agent Zero's own lookup result is replaced by it).
DEFAULT_CONFIG = os.path.join(PLUGIN_DIR, "default_config.yaml")
GLOBAL_CONFIG = os.path.join(PLUGIN_DIR, "config.json")
SECRETS_FILE = "usr/secrets.env"
NEW_CHAT_S = 30.0  # a chat whose agent 0 starts within this of its creation was just opened
API_MESSAGE_PATH = "/api/api_message"  # Agent Zero's external API (api/api_message.py)
# How an agent names the chat it works for. v1.7 and v2.x: a subordinate's data holds its superior
# agent (`Agent.DATA_NAME_SUPERIOR`, not saved with the chat). v2.x runs the subordinate in a child
# chat whose output data names its parent chat (saved with it), and runs a `parallel` tool call in a
# throwaway chat whose data names the calling chat.
SUPERIOR_KEY = "_superior"
PARENT_CHAT_KEYS = (("output_data", "parent_context_id"), ("data", "_parallel_parent_context_id"))
MAX_CHAT_DEPTH = 32  # superiors and parent chats walked at most (subordinates nest a few deep)
TOOL_NAME = "honcho_memory"
RECALL_EXTRAS_KEY = "honcho_memory"  # where recall puts its block in a turn's extras

# The capture and recall hooks run on Agent Zero's event loop, and building settings means parsing
# YAML and JSON (Agent Zero's get_plugin_config re-reads them on every call): built once per
# project, then reused until one of the files or a HONCHO_* variable changes. A hit costs a few
# `stat` calls.
_settings_cache = SettingsCache()
log = logging.getLogger("honcho_hub.adapters")


_last_built: dict[tuple, Settings] = {}  # per view: what to use while a file is caught mid-save
# (project, human facts) -> (the project's settings, the chat's): the chat's are made again only
# when the project's were rebuilt (a file or variable changed), never on a call that finds them.
MAX_CHAT_VIEWS = 1024  # projects × agent profiles × senders in use
_chat_views: BoundedMap[tuple, tuple[Settings, Settings]] = BoundedMap(MAX_CHAT_VIEWS)
# chat id -> its kind (rules.chat_kind), for status's count of the chats this process has seen
MAX_SEEN_CHATS = 10_000
_seen_lock = threading.Lock()
_seen_chats: BoundedMap[str, str] = BoundedMap(MAX_SEEN_CHATS)


def settings_for(agent: Any) -> Settings:
    """Effective settings for this agent's chat: the global settings with its project's over them,
    as the chat's human sees them (rules.chat_view: its peer, a session of its own when a shared one
    is another human's)."""
    return chat_settings(project_name(agent), human_facts(agent))


def chat_settings(project: str | None, facts: HumanFacts) -> Settings:
    """The settings of a chat in `project` whose human facts are `facts` (rules.chat_view);
    cached."""
    base = project_settings(project)
    key = (project, facts)
    known = _chat_views.get(key)
    if known is not None and known[0] is base:
        return known[1]
    view = chat_view(base, facts, project, project_settings(None) if project else base)
    _chat_views.put(key, (base, view))
    return view


def chat_human(agent: Any, settings: Settings | None = None) -> str | None:
    """The peer id of the chat's human; None when no one is named and `unmapped_chats` is
    no-capture (nothing of the chat is captured or recalled). `settings`: the chat's, when the
    caller has them."""
    return human_peer(human_facts(agent), settings or settings_for(agent))


def is_confined(agent: Any) -> bool:
    """Whether the agent's chat is confined to its own peer's memory and its own session
    (rules.confined_chat): a chat from outside the web UI that is not the owner's."""
    return confined_chat(human_facts(agent), project_settings(project_name(agent)))


def human_facts(agent: Any) -> HumanFacts:
    """What names the chat's human in Agent Zero v1.7: the root chat's agent 0's profile
    (`agent.config.profile`) and the root chat's sender (`chat_sender`). Not this agent's profile: a
    subordinate runs under the profile its superior asked for (in v2.x in a child chat of its own),
    and a message typed while it runs is still the chat's human's."""
    context = chat_context(agent)
    first = getattr(context, "agent0", None) or root_agent(agent)
    profile = getattr(getattr(first, "config", None), "profile", "")
    return HumanFacts(profile=profile if isinstance(profile, str) else "",
                      sender=chat_sender(context))


def chat_sender(context: Any) -> Sender | None:
    """Who writes in this chat, when a chat integration or the external API started it; None for
    a web-UI chat. Read off what Agent Zero keeps on the chat, as backfill reads its saved copy
    (chat_data.sender_of)."""
    data = getattr(context, "data", None)
    return (chat_data.sender_of(data, str(getattr(context, "id", ""))) if isinstance(data, dict)
            else None)


def note_chat_origin(context: Any, path: str) -> None:
    """Tag a chat with the request that sent its first message (first wins): "api" for Agent
    Zero's external API, "ui" for any other (the web UI's message, queue and plugin requests)."""
    data = getattr(context, "data", None)
    if isinstance(data, dict) and chat_data.CHAT_ORIGIN not in data:
        data[chat_data.CHAT_ORIGIN] = "api" if path.rstrip("/") == API_MESSAGE_PATH else "ui"


def call_argument(data: Any, position: int | None, name: str, default: Any = None) -> Any:
    """An argument of the call an `@extensible` extension sees (Agent Zero passes it as
    `data["args"]` and `data["kwargs"]`): by `name`, else at `position` (a method's `self` is 0;
    None: an argument only ever passed by name), else `default`."""
    if not isinstance(data, dict):
        return default
    kwargs = data.get("kwargs") or {}
    if name in kwargs:
        return kwargs[name]
    args = tuple(data.get("args") or ())
    return args[position] if position is not None and len(args) > position else default


def global_settings() -> Settings:
    """Delivery settings are global: no agent, no project."""
    return project_settings(None)


def project_settings(project: str | None) -> Settings:
    """Effective settings for a project's chats (None: global), the same files our
    `get_plugin_config` hook merges for Agent Zero, built once until one of them, the secrets or a
    HONCHO_* variable changes."""
    key, files = (("chat", project) if project else ("global",)), _config_files(project)
    try:
        settings = _last_built[key] = _settings_cache.get(key, files, lambda: _build(*files[:-1]))
        return settings
    except ConfigFileError:
        # caught while Agent Zero was writing a config file (an empty JSON file)
        if key in _last_built:
            return _last_built[key]  # the file changed, so the next call builds again
        raise


def forget_project(project: str) -> int:
    """Drop the settings built for a project Agent Zero deleted, and its chats' views; how many
    entries went."""
    # Keys are listed first: the event loop may add a chat view meanwhile.
    views = [key for key in list(_chat_views) if key[0] == project]
    dropped = sum(_chat_views.pop(key, None) is not None for key in views)
    dropped += _last_built.pop(("chat", project), None) is not None
    return dropped + _settings_cache.drop(("chat", project))


def plugin_on_for(agent: Any) -> bool:
    """Whether the plugin is on for this agent's chat: Agent Zero's toggle can switch it off for a
    project or an agent profile (then it runs none of our extensions for the chat)."""
    from helpers import plugins

    return PLUGIN_NAME in plugins.get_enabled_plugins(agent)


def upgrade_1x_configs() -> list[str]:
    """Rewrite the config files the Hub's `honcho` 1.x left (the global one, then each project's)
    under our names, once (settings/upgrade.py); a line for each file upgraded. Reads, writes and
    waits on each file's lock: never on Agent Zero's event loop."""
    from helpers import projects

    pattern = projects.get_project_meta("*", "plugins", PLUGIN_NAME, "config.json")
    parent = os.path.dirname(os.path.dirname(projects.get_project_meta("*")))  # the projects
    files = [(GLOBAL_CONFIG, "config.json", False)]
    files += [(path, f"project {os.path.relpath(path, parent).split(os.sep)[0]}", True)
              for path in sorted(glob.glob(pattern))]
    done = []
    for path, label, is_project in files:
        try:
            upgrade = upgrade_config(path, is_project=is_project)
        except ConfigFileError as exc:
            log.warning("honcho: %s not upgraded from 1.x: %s", label, exc)
            continue
        if upgrade is not None:
            done.append(f"{label} {upgrade.text()}")
    return done


def _config_files(project: str | None) -> tuple[str, ...]:
    from helpers import files, projects

    project_file = ((projects.get_project_meta(project, "plugins", PLUGIN_NAME, "config.json"),)
                    if project else ())
    return (DEFAULT_CONFIG, GLOBAL_CONFIG, *project_file, files.get_abs_path(SECRETS_FILE))


def _build(default_file: str, global_file: str, project_file: str | None = None) -> Settings:
    from helpers.secrets import get_default_secrets_manager

    # Identity and the key are global: a project's secrets.env must not switch the workspace or key.
    # (Project secrets are still masked and redacted: see host_secrets and mask.)
    manager = get_default_secrets_manager()  # the global secrets file, never a project's
    return effective_settings(read_layers(default_file, global_file, project_file, strict=True),
                              secrets=_load(manager), environ=os.environ,
                              load_secrets=lambda: _load(manager))


def root_agent(agent: Any) -> Any:
    """The agent at the top of the chat this agent works for: up its superiors (`_superior`) and
    from a v2.x child or worker chat to the chat it was made for, to an agent with neither. Bounded
    and safe against cycles (the agent reached last is taken). In v1.7 it is the chat's agent 0; in
    v2.x a subordinate's child chat and a worker's chat lead to the chat the human opened. In memory
    only: safe on the event loop."""
    current, seen = agent, {id(agent)}
    for _ in range(MAX_CHAT_DEPTH):
        above = _above(current)
        if above is None or id(above) in seen:
            break
        seen.add(id(above))
        current = above
    return current


def _above(agent: Any) -> Any:
    """The agent this one works for: its superior, else agent 0 of the chat its own chat was made
    for; None at the top."""
    data = getattr(agent, "data", None)
    superior = data.get(SUPERIOR_KEY) if isinstance(data, dict) else None
    if superior is not None:
        return superior
    context = getattr(agent, "context", None)
    parent_id = _parent_chat_id(context)
    if parent_id is None:
        return None
    from agent import AgentContext

    parent = AgentContext.get(parent_id)
    return getattr(parent, "agent0", None) if parent is not None and parent is not context else None


def _parent_chat_id(context: Any) -> str | None:
    for field, key in PARENT_CHAT_KEYS:
        values = getattr(context, field, None)
        parent_id = values.get(key) if isinstance(values, dict) else None
        if isinstance(parent_id, str) and parent_id:
            return parent_id
    return None


def chat_context(agent: Any) -> Any:
    """The Agent Zero chat (context) whose memory this agent reads and writes: the root agent's."""
    return root_agent(agent).context


def chat_id(agent: Any) -> str:
    """The id of the chat whose memory this agent reads and writes (its Honcho session's)."""
    return str(chat_context(agent).id)


def works_for_another_agent(agent: Any) -> bool:
    """Whether an agent above it gives this agent its tasks: a subordinate (in the chat or a child
    chat), a parallel worker. Its user messages are delegations, its answers not the chat's."""
    return getattr(agent, "number", None) != 0 or root_agent(agent) is not agent


def tool_allowed(agent: Any, tool_name: str = TOOL_NAME) -> bool:
    """Whether Agent Zero's tool policy lets this agent see and call the tool: v2.9's
    `helpers.tool_policy.resolve_tool(agent, name).allowed` (an admin hides or blocks a tool per
    project and agent profile); True on a host without one (v1.x) or of a shape not known here
    (Agent Zero then enforces its policy itself). It reads the policy's files: off the event
    loop."""
    try:
        from helpers import tool_policy
    except ImportError:
        return True
    resolve = getattr(tool_policy, "resolve_tool", None)
    return resolve is None or bool(getattr(resolve(agent, tool_name), "allowed", True))


def host_secrets(agent: Any) -> dict[str, str]:
    """The secrets Agent Zero knows for this chat (global and project), by name."""
    return _load(_secrets_manager(agent))


def project_secrets(project: str | None) -> dict[str, str]:
    """The secrets Agent Zero knows for a project (global and the project's own), by name."""
    from helpers.secrets import get_default_secrets_manager, get_project_secrets_manager

    return _load(get_project_secrets_manager(project, merge_with_global=True) if project
                 else get_default_secrets_manager())


def log_item(agent: Any, kind: str, heading: str, kvps: dict[str, str | int], item_id: str) -> bool:
    """Add an item to the chat's log (Agent Zero's `context.log`: memory only; saved with the chat,
    shown in its page), one that leaves the progress line alone. Whether there was a log."""
    log = getattr(getattr(agent, "context", None), "log", None)  # the chat that shows its turn
    if log is None or not callable(getattr(log, "log", None)):
        return False
    log.log(type=kind, heading=heading, kvps=kvps, id=item_id, update_progress="none")
    return True


def forget_recalled(chat_id: str) -> int:
    """A chat forgotten while Agent Zero holds it: the recall blocks its agents last saw leave the
    context window Agent Zero keeps in each agent's data (saved in the chat's file) and the turn's
    extras, and the chat is saved again (a save that fails is logged: the forget is done by then).
    Off the event loop (a file write). Blocks removed."""
    try:
        from agent import Agent, AgentContext
        from helpers import persist_chat
    except ImportError:  # a host without them keeps no context window to clean
        return 0
    context = AgentContext.get(chat_id)
    if context is None:
        return 0
    removed, agent = 0, getattr(context, "agent0", None)
    while agent is not None:
        window = agent.data.get(Agent.DATA_NAME_CTX_WINDOW)
        if isinstance(window, dict) and isinstance(window.get("text"), str):
            window["text"], count = without_blocks(window["text"])
            removed += count
        extras = getattr(getattr(agent, "loop_data", None), "extras_persistent", None)
        if isinstance(extras, dict) and extras.pop(RECALL_EXTRAS_KEY, None) is not None:
            removed += 1
        agent = agent.data.get(Agent.DATA_NAME_SUBORDINATE)
    try:
        persist_chat.save_tmp_chat(context)
    except Exception as exc:  # best-effort: the forget is done; Agent Zero saves the chat again
        log.warning("honcho: the forgotten chat's file was not saved again (%s)",
                    type(exc).__name__)
    return removed


def mask(agent: Any, text: str) -> str:
    """Agent Zero's own masker first: known secret values become `§§secret(NAME)` aliases."""
    manager = _secrets_manager(agent)
    return manager.mask_values(text) if manager is not None else text


def chat_facts(agent: Any, *, count_seen: bool = True) -> ChatFacts:
    """Whether the chat is a background (MCP/A2A) chat or one run by a scheduled task, and whose it
    is. Counted among the chats seen (`chats_seen`) unless `count_seen` is False (status's own
    look at a chat)."""
    context = chat_context(agent)
    kind = getattr(context, "type", None)
    facts = ChatFacts(background=str(getattr(kind, "value", kind)).lower() == "background",
                      scheduler_run=_scheduler_owns(context.id), human=human_facts(agent),
                      remember=remember_of(agent))
    if count_seen:
        with _seen_lock:
            _seen_chats.put(str(context.id), chat_kind(facts))
    return facts


def chats_seen() -> dict[str, int]:
    """How many chats of each kind this process's capture and recall have seen (the newest
    MAX_SEEN_CHATS)."""
    with _seen_lock:
        return dict(Counter(_seen_chats.values()))


def remember_of(agent: Any) -> Remember:
    """The "Don't remember this chat" of the chat the agent works for (its root chat: a subordinate
    answers to the chat the human opened, in v2.x from a child chat of its own)."""
    return chat_remember(chat_context(agent))


def chat_remember(context: Any) -> Remember:
    """A chat's "Don't remember this chat" (rules.Remember), read from its data: memory only,
    safe on the event loop."""
    return chat_data.chat_remember(getattr(context, "data", None))


def is_new_user_chat(agent: Any, now: datetime | None = None) -> bool:
    """Whether this agent 0 starts a chat a person just opened: not a chat loaded from disk at
    startup (Agent Zero gives it its saved creation time), not a reset (its log is emptied but the
    creation time stays), not a background or scheduler chat, not an agent working for another (a
    subordinate, a v2.x child chat's or worker's agent 0: its chat's facts are its root chat's)."""
    context = agent.context
    created = getattr(context, "created_at", None)
    if (works_for_another_agent(agent) or not isinstance(created, datetime)
            or created.tzinfo is None):
        return False  # a chat saved without a creation time is loaded with a naive 1970 one
    facts = chat_facts(agent)
    age_s = ((now or datetime.now(UTC)) - created).total_seconds()
    return not facts.background and not facts.scheduler_run and 0 <= age_s <= NEW_CHAT_S


def opens_chat(agent: Any) -> bool:
    """Whether nothing of the chat is logged yet: Agent Zero v2.x adds its placeholder turn then
    (a typed message, the greeting and every answer are logged)."""
    logs = getattr(getattr(getattr(agent, "context", None), "log", None), "logs", None)
    return logs is not None and not logs


def holds_tool_request(text: str) -> bool:
    """Whether Agent Zero reads a tool request from a reply, or a misformatted one: v2.x's
    `extract_tool_request` and `is_misformatted_tool_request`; where they are missing (v1.7),
    any JSON object in the text, which v1.7's `process_tools` takes as a request."""
    from helpers import extract_tools

    extract = getattr(extract_tools, "extract_tool_request", None)
    if extract is None:
        return extract_tools.json_parse_dirty(text) is not None
    misformatted = getattr(extract_tools, "is_misformatted_tool_request", None)
    return extract(text) is not None or bool(misformatted is not None and misformatted(text))


def project_name(agent: Any) -> str | None:
    """The chat's Agent Zero project, read now: a project is attached after the agent exists."""
    from helpers.projects import get_context_project_name

    return get_context_project_name(chat_context(agent)) or None


def _scheduler_owns(context_id: str) -> bool:
    from helpers.task_scheduler import TaskScheduler

    return bool(TaskScheduler.get().get_tasks_by_context_id(context_id))


def _secrets_manager(agent: Any):
    from helpers.secrets import get_secrets_manager

    return get_secrets_manager(chat_context(agent) if agent is not None else None)


def _load(manager: Any) -> dict[str, str]:
    return dict(manager.load_secrets() or {}) if manager is not None else {}
