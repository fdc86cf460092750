"""Agent Zero v1.7's saved files as the backfill reads them: chat folders and their chat.json,
the scheduler's tasks.json, settings.json and where a project keeps plugin settings (what a
chat's data says of it is chats/chat_data.py's, which the bridge reads off live chats too).
In cli/, at the edge: only the adapters know Agent Zero's formats, so no floor below depends on
them (inside Agent Zero, the bridge reads its live objects instead).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..chats.chat_data import chat_remember, sender_of
from ..chats.rules import ChatFacts, HumanFacts
from ..errors import BackfillError
from ..settings.files import read_regular_file

CHAT_FILE = "chat.json"
MAX_CHAT_FILE_BYTES = 128 * 1024 * 1024  # a larger file is skipped (counted), not read into memory
MAX_TASKS_FILE_BYTES = 16 * 1024 * 1024  # also Agent Zero's settings.json
DEFAULT_PROFILE = "agent0"  # Agent Zero's agent_profile when its settings name none
MAX_HISTORY_DEPTH = 64  # bulks nest when Agent Zero merges them; deeper is not a file it wrote
CHAT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# The message AgentContext.nudge() sends agent 0 as if typed: v1.7's prompts/fw.msg_nudge.md as
# Agent.read_prompt returns it (code fences removed). A profile that overrides the prompt is not
# known here.
NUDGE_TEXT = '{\n  "system_message": "Nudged - continue",\n}\n'


# -- the files beside the chats folder -------------------------------------------------------------


def saved_chats(chats_dir: str, only: Sequence[str] = (), limit: int | None = None) -> list[str]:
    """The chat folders of `chats_dir` holding a chat.json, least recently saved first; `only`
    names the chat ids to take (each must exist); `limit` keeps the most recently saved. Raises
    BackfillError."""
    if not os.path.isdir(chats_dir):
        raise BackfillError("the chats folder is not a folder")
    for chat_id in only:
        if not CHAT_ID_RE.match(chat_id):
            raise BackfillError("a chat id is 1 to 128 letters, digits, '-' and '_'")
        if not os.path.isfile(os.path.join(chats_dir, chat_id, CHAT_FILE)):
            raise BackfillError(f"no saved chat with id {chat_id}")
    try:
        names = list(dict.fromkeys(only)) or sorted(os.listdir(chats_dir))
    except OSError as exc:
        raise BackfillError(f"the chats folder cannot be read ({type(exc).__name__})") from exc
    found = []
    for name in names:
        try:
            found.append((os.stat(os.path.join(chats_dir, name, CHAT_FILE)).st_mtime, name))
        except OSError:
            continue  # not a chat folder
    found.sort()
    chosen = found[-limit:] if limit else found
    return [os.path.join(chats_dir, name) for _, name in chosen]


def scheduled_chat_ids(chats_dir: str) -> frozenset[str]:
    """Ids of the chats scheduled tasks own, from Agent Zero's `usr/scheduler/tasks.json` beside the
    chats folder (none when there is no such file). Raises BackfillError when it is there but
    unusable: scheduler chats could not be told apart."""
    path = os.path.join(os.path.dirname(os.path.abspath(chats_dir)), "scheduler", "tasks.json")
    if not os.path.exists(path):
        return frozenset()
    try:
        raw = read_regular_file(path, MAX_TASKS_FILE_BYTES)
        tasks = json.loads(raw.decode("utf-8")).get("tasks", [])
        # A task's context id defaults to its uuid (helpers/task_scheduler.py).
        owners = (task.get("context_id") or task.get("uuid")
                  for task in tasks if isinstance(task, dict))
        return frozenset(owner for owner in owners if isinstance(owner, str) and owner)
    except (OSError, ValueError, AttributeError) as exc:
        raise BackfillError(f"the scheduler's tasks.json cannot be read ({type(exc).__name__}):"
                            " scheduler chats cannot be told apart",
                            "scheduler_unreadable") from exc


def agent_profile(chats_dir: str) -> str:
    """The agent profile agent 0 of every chat runs under: Agent Zero v1.7 keeps no profile per chat
    (a saved chat is loaded with initialize_agent's config), only its `agent_profile` setting in
    `usr/settings.json` beside the chats folder (`agent0` when unset or `default`,
    helpers/settings.py). Raises BackfillError when the file is there but unusable: the chats' human
    could be named wrongly."""
    path = os.path.join(os.path.dirname(os.path.abspath(chats_dir)), "settings.json")
    if not os.path.exists(path):
        return DEFAULT_PROFILE
    try:
        raw = read_regular_file(path, MAX_TASKS_FILE_BYTES)
        profile = json.loads(raw.decode("utf-8")).get("agent_profile")
    except (OSError, ValueError, AttributeError) as exc:
        raise BackfillError(f"Agent Zero's settings.json cannot be read ({type(exc).__name__}):"
                            " the chats' agent profile, and so their human, is unknown",
                            "settings_unreadable") from exc
    if isinstance(profile, str) and profile and profile != "default":
        return profile
    return DEFAULT_PROFILE


def project_config_path(chats_dir: str, project: str) -> str | None:
    """Where Agent Zero keeps a project's settings of this plugin:
    `usr/projects/<name>/.a0proj/plugins/honcho/config.json`, beside the chats folder; None for a
    name that is not one plain folder name."""
    if not _plain_name(project):
        return None
    projects = os.path.join(os.path.dirname(os.path.abspath(chats_dir)), "projects")
    return os.path.join(projects, project, ".a0proj", "plugins", "honcho", "config.json")


def _plain_name(name: str) -> bool:
    """A name that is one folder inside its parent (a project name never leads elsewhere)."""
    return name not in (".", "..") and "\x00" not in name and os.path.basename(name) == name and (
        os.altsep is None or os.altsep not in name)


# -- a saved chat ----------------------------------------------------------------------------------


def read_chat(folder: str) -> dict[str, Any]:
    """A saved chat as Agent Zero wrote it; raises FileRefused (not a regular file, too large, or
    reached through a link out of the chats folder, `folder`'s parent), ValueError (not JSON, not a
    chat) or OSError."""
    chats_dir = os.path.dirname(os.path.abspath(folder))
    raw = read_regular_file(os.path.join(folder, CHAT_FILE), MAX_CHAT_FILE_BYTES, within=chats_dir)
    chat = json.loads(raw.decode("utf-8"))
    if not isinstance(chat, dict) or not isinstance(chat.get("agents", []), list):
        raise ValueError("not a chat")
    return chat


def chat_id_of(chat: Mapping[str, Any], folder: str) -> str:
    """The context id live capture used: the file's `id` (the folder's name when the file has
    none)."""
    chat_id = chat.get("id")
    if isinstance(chat_id, str) and CHAT_ID_RE.match(chat_id):
        return chat_id
    return os.path.basename(folder)


def project_of(chat: Mapping[str, Any]) -> str | None:
    """The chat's Agent Zero project: helpers/projects.py keeps it in the context data as
    `project`."""
    data = chat.get("data")
    project = data.get("project") if isinstance(data, dict) else None
    return project if isinstance(project, str) and project else None


def chat_facts(chat: Mapping[str, Any], chat_id: str, scheduled: frozenset[str],
               profile: str) -> ChatFacts:
    """Background chats are never saved by v1.7, but a file may still say so; a `task` context is a
    scheduled task's as well. `profile`: agent 0's agent profile (see agent_profile). A chat the
    user asked us not to remember says so in its data: a backfill skips it too."""
    kind = str(chat.get("type", "user")).lower()
    data = chat.get("data")
    return ChatFacts(background=kind == "background",
                     scheduler_run=kind == "task" or chat_id in scheduled,
                     human=HumanFacts(profile=profile, sender=sender_of(data, chat_id)
                                      if isinstance(data, dict) else None),
                     remember=chat_remember(data))


def log_times(chat: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """(item id, item type) -> the first such item's time, for log items with an id and a plausible
    time."""
    logs = chat.get("log", {}).get("logs", []) if isinstance(chat.get("log"), dict) else []
    times: dict[tuple[str, str], float] = {}
    for item in logs if isinstance(logs, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            continue
        at = item.get("timestamp")
        if (isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at)
                and at > 0):
            times.setdefault((item["id"], str(item.get("type"))), float(at))
    return times


def logged_at(times: Mapping[tuple[str, str], float], message_id: Any, ai: bool) -> float | None:
    """When the log says a history message happened: Agent Zero gives a typed message's `user` item
    the message's id, and an answer's `response` (else `agent`) item the id of the AI message that
    called it."""
    if not isinstance(message_id, str):
        return None
    if ai:
        return times.get((message_id, "response"), times.get((message_id, "agent")))
    return times.get((message_id, "user"))


def history_messages(history: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """The messages of one agent's saved history (a History, Bulk or Topic record), oldest first."""
    if depth > MAX_HISTORY_DEPTH or not isinstance(history, dict):
        return
    if history.get("_cls") == "Message" or ("ai" in history and "content" in history):
        yield history
        return
    parts = (["bulks", "topics", "current"] if history.get("_cls") == "History"
             else ["records"] if history.get("_cls") == "Bulk" else ["messages"])
    for name in parts:
        value = history.get(name)
        for record in value if isinstance(value, list) else [value]:
            yield from history_messages(record, depth + 1)


def agent_histories(chat: Mapping[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    """(agent number, its messages) for each saved agent; raises ValueError for a history that is
    not JSON."""
    found = []
    for agent in chat.get("agents", []):
        if not isinstance(agent, dict):
            continue
        number = agent.get("number")
        raw = agent.get("history") or "{}"
        history = json.loads(raw) if isinstance(raw, str) else raw
        found.append((number if isinstance(number, int) and not isinstance(number, bool) else -1,
                      list(history_messages(history))))
    return found


# -- a history message's content -------------------------------------------------------------------


@dataclass(frozen=True)
class Typed:
    """What a person typed, as a user-side history message holds it."""

    text: Any  # a str unless the file was damaged
    intervention: bool  # typed while an agent ran (prompts/fw.intervention.md)
    nudge: bool  # the framework's nudge, sent to agent 0 as if typed


def typed(content: Any) -> Typed | str:
    """A user-side message's content (helpers/history.py content of prompts/fw.user_message.md or
    fw.intervention.md, empty parts removed by Agent.hist_add_user_message), or what it is instead:
    `framework_message` (a summary, raw message or framework prompt), `tool_result` or `empty`."""
    if not isinstance(content, dict):
        return "framework_message"
    if "user_message" not in content and "user_intervention" not in content:
        if "tool_name" in content or "tool_result" in content:
            return "tool_result"
        return "empty" if set(content) <= {"system_message", "attachments"} else "framework_message"
    intervention = "user_intervention" in content
    text = content["user_intervention" if intervention else "user_message"]
    return Typed(text, intervention, nudge=not intervention and text == NUDGE_TEXT)


def tool_request(content: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(tool name, tool arguments) of an AI message as the model wrote it: (None, None) when no tool
    request can be read from it, (name, None) for one Agent Zero refuses to run
    (Agent.validate_tool_request: the arguments must be a non-empty object). Agent Zero reads the
    JSON object between the first `{` and the last `}` (helpers/extract_tools.py); the tool name may
    carry a `:method`."""
    if not isinstance(content, str) or "{" not in content:
        return None, None
    try:
        request = json.loads(content[content.find("{"):content.rfind("}") + 1])
    except ValueError:
        return None, None
    if not isinstance(request, dict) or not isinstance(request.get("tool_name"), str):
        return None, None
    args = request.get("tool_args")
    name = request["tool_name"].split(":", 1)[0]
    return name, args if isinstance(args, dict) and args else None


def response_text(args: Mapping[str, Any]) -> Any:
    """The answer a `response` tool request gives: its `text`, else its `message`
    (tools/response.py)."""
    return args["text"] if "text" in args else args.get("message")


def warned_after(nxt: Mapping[str, Any] | None) -> bool:
    """Whether the message after an AI message is Agent Zero's warning instead of its tool's run (a
    repeated answer is not run again)."""
    return (nxt is not None and isinstance(nxt.get("content"), dict)
            and "system_warning" in nxt["content"])
