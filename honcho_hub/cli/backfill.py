"""Backfill: saved Agent Zero chats into the outbox, keeping what live capture would have kept.

Each kept message takes capture's path and is dated by the chat's log; queued only while the outbox
keeps room for live capture; forgotten chats skipped. See docs/architecture.md, Command line.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..capture.rules import (
    UserMessageFacts,
    skip_reason_for_tool_result,
    skip_reason_for_user_message,
)
from ..capture.service import (
    CaptureRequest,
    Role,
    message_events,
    message_header,
    redacted_text,
)
from ..chats.rules import ChatFacts, chat_view, skip_reason_for_chat
from ..errors import ConfigFileError, FileRefused, OutboxBusy, OutboxError, RedactionError
from ..gateway.scopes import resolve_scope
from ..settings.config import Settings
from ..settings.effective import ConfigLayers, effective_settings
from ..settings.files import load_config_file
from ..storage import chats as chat_rows
from ..storage.outbox import EnqueueResult, NewEvent, Outbox
from .agent_zero_files import (
    DEFAULT_PROFILE,
    agent_histories,
    chat_facts,
    chat_id_of,
    log_times,
    logged_at,
    project_config_path,
    project_of,
    read_chat,
    response_text,
    tool_request,
    typed,
    warned_after,
)

# of max_queued_rows a backfill may fill: the rest stays free for live capture
LIVE_SHARE = 0.9
POLL_S = 2.0
WAIT_S = 300.0
MAX_WAIT_S = 86_400.0
# off the turn's path: a backfill may wait longer for the write lock than capture
OUTBOX_BUSY_S = 5.0
MAX_MESSAGES_PER_ENQUEUE = 200  # one transaction's worth
MAX_LISTED_CHATS = 100  # forgotten chats the report names; all are counted


@dataclass(frozen=True)
class SavedMessage:
    """One message of a saved chat that capture keeps: who, the host's id, the text, when (if
    known)."""

    role: Role
    source_id: str
    text: str
    at: float | None  # the log item's time; None: not in the saved log


@dataclass(frozen=True)
class Prepared:
    """A kept message's events, ready for the outbox."""

    saved: SavedMessage
    events: list[NewEvent]


@dataclass
class Tally:
    """What a backfill found and did; counts only (never content)."""

    chats: Counter = field(default_factory=Counter)  # found, imported, and skip reasons
    messages: Counter = field(default_factory=Counter)  # by role
    skipped: Counter = field(default_factory=Counter)  # messages, by reason
    times: Counter = field(default_factory=Counter)  # log | import
    # parts: queued, already_queued (planned in a dry run)
    events: Counter = field(default_factory=Counter)
    # ids of forgotten chats: skipped (at most MAX_LISTED_CHATS), included (named with
    # include_forgotten)
    forgotten: dict[str, list[str]] = field(
        default_factory=lambda: {"skipped": [], "included": []})

    def kept(self, prepared: Prepared) -> None:
        """Count a message queued (or, in a dry run, one that would be)."""
        self.messages[prepared.saved.role.value] += 1
        self.times["import" if prepared.saved.at is None else "log"] += 1


# -- what capture keeps of a saved chat -----------------------------------------------------------


def chat_messages(chat: Mapping[str, Any], facts: ChatFacts, settings: Settings,
                  skipped: Counter) -> list[SavedMessage]:
    """The messages of one saved chat capture keeps, in conversation order; every other message is
    counted in `skipped` by reason. Raises ValueError for a history that cannot be read."""
    times = log_times(chat)
    kept: list[tuple[int, SavedMessage]] = []
    seen: set[tuple[Role, str]] = set()
    for number, messages in agent_histories(chat):
        # Whether anything came before: the greeting Agent Zero adds comes first.
        asked = False
        for position, message in enumerate(messages):
            nxt = messages[position + 1] if position + 1 < len(messages) else None
            saved, reason = _classify(message, nxt, number, asked, facts, settings, times)
            asked = asked or not message.get("ai")
            if saved is not None and (saved.role, saved.source_id) in seen:
                saved, reason = None, "duplicate_in_chat"
            if saved is None:
                skipped[reason] += 1
                continue
            seen.add((saved.role, saved.source_id))
            kept.append((number, saved))
    return _in_conversation_order(kept)


def _classify(message: dict[str, Any], nxt: dict[str, Any] | None, number: int, asked: bool,
              facts: ChatFacts, settings: Settings,
              times: Mapping[tuple[str, str], float]) -> tuple[SavedMessage | None, str]:
    """The message as capture would keep it, or why not."""
    content, source_id, ai = message.get("content"), message.get("id"), bool(message.get("ai"))
    if ai:
        saved, reason = _final_answer(content, nxt, number, asked, facts, settings)
    else:
        saved, reason = _typed(content, number, facts, settings)
    at = logged_at(times, source_id, ai)
    if saved is None:
        return None, reason
    if not isinstance(source_id, str) or not source_id:
        # Nothing to derive a stable id from: importing twice would duplicate.
        return None, "no_message_id"
    return SavedMessage(saved[0], source_id, saved[1], at), ""


def _typed(content: Any, number: int, facts: ChatFacts,
           settings: Settings) -> tuple[tuple[Role, str] | None, str]:
    """A user-side history message: (USER, typed text) when a person typed it and capture keeps
    it."""
    found = typed(content)
    if isinstance(found, str):
        return None, found
    message = UserMessageFacts(agent_number=number, intervention=found.intervention,
                               is_nudge=found.nudge, chat=facts)
    reason = skip_reason_for_user_message(message, settings)
    if reason:
        return None, reason
    return ((Role.USER, found.text), "") if isinstance(found.text, str) else (None, "invalid")


def _final_answer(content: Any, nxt: dict[str, Any] | None, number: int, asked: bool,
                  facts: ChatFacts, settings: Settings) -> tuple[tuple[Role, str] | None, str]:
    """An AI history message: (AGENT, answer) when it is agent 0's final `response`."""
    tool_name, args = tool_request(content)
    if tool_name is None:
        return None, "unreadable_ai_message"
    reason = skip_reason_for_tool_result(number, tool_name, facts, settings)
    if reason:
        return None, reason
    if not asked:
        return None, "greeting"  # extensions/python/agent_init/_10_initial_message.py: no tool ran
    if args is None or warned_after(nxt):
        # Refused, or a repeated answer: Agent Zero warns instead of running the tool.
        return None, "not_executed"
    text = response_text(args)
    return ((Role.AGENT, text), "") if isinstance(text, str) else (None, "invalid")


def _in_conversation_order(kept: list[tuple[int, SavedMessage]]) -> list[SavedMessage]:
    """Agent 0's messages in its history's order, each subordinate's (the human's interventions)
    placed before the first of agent 0's messages logged later; without a time, at the end."""
    ordered = [saved for number, saved in kept if number == 0]
    for _, saved in ((n, s) for n, s in kept if n != 0):
        at = saved.at
        index = next((i for i, other in enumerate(ordered)
                      if at is not None and other.at is not None and other.at > at), len(ordered))
        ordered.insert(index, saved)
    return ordered


# -- settings by project ---------------------------------------------------------------------------


def project_settings(global_layer: Mapping[str, Any], environ: Mapping[str, str],
                     chats_dir: str) -> Callable[[str | None], Settings]:
    """Settings for a chat's project as live capture builds them: the global layer with the
    project's own plugin settings over it (Agent Zero keeps them in
    `usr/projects/<name>/.a0proj/plugins/honcho/config.json`, beside the chats folder). Raises
    ConfigFileError for a project file that is there but unusable: live capture would not capture
    that project's chats either."""
    built: dict[str | None, Settings] = {}

    def settings_for(project: str | None) -> Settings:
        if project not in built:
            layer: dict[str, Any] = {}
            path = project_config_path(chats_dir, project) if project else None
            if path is not None:
                try:
                    layer = load_config_file(path)
                except ConfigFileError as exc:
                    if not exc.missing:
                        raise
            layers = ConfigLayers(global_config=global_layer, project_config=layer)
            built[project] = effective_settings(layers, secrets={}, environ=environ)
        return built[project]
    return settings_for


# -- the run ---------------------------------------------------------------------------------------


class ProgressBar:
    """A text progress bar of chats done: redrawn in place on a terminal, a line per tenth
    otherwise."""

    WIDTH = 24

    def __init__(self, stream: TextIO | None, total: int) -> None:
        self._stream, self._total, self._shown = stream, max(total, 1), (-1, "")
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def show(self, done: int, messages: int, note: str = "") -> None:
        """Chats done and messages queued so far, with a note (e.g. that it waits for room)."""
        if self._stream is None:
            return
        shown = (done * 10 // self._total, note)
        if not self._tty and shown == self._shown:
            # A log file gets a line per tenth and per change of note, not one per poll.
            return
        self._shown = shown
        filled = done * self.WIDTH // self._total
        line = (f"backfill [{'#' * filled}{'-' * (self.WIDTH - filled)}]"
                f" {done}/{self._total} chats, {messages} messages{'  ' + note if note else ''}")
        self._stream.write(f"\r{line}\x1b[K" if self._tty else line + "\n")
        self._stream.flush()

    def end(self) -> None:
        """Leave the terminal's cursor on a new line."""
        if self._stream is not None and self._tty:
            self._stream.write("\n")
            self._stream.flush()


class Backfill:
    """One backfill run over some saved chats: read, keep by capture's rules, redact, queue with
    room."""

    def __init__(self, settings: Settings, settings_for: Callable[[str | None], Settings], *,
                 dry_run: bool = False, scheduled: frozenset[str] = frozenset(),
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 make_room: Callable[[float], Any] | None = None,
                 pause: Callable[[float], Any] | None = None, wait_s: float = WAIT_S,
                 progress: TextIO | None = None,
                 secrets_for: Callable[[str | None], Mapping[str, str]] = lambda project: {},
                 profile: str = DEFAULT_PROFILE,
                 include_forgotten: frozenset[str] = frozenset()) -> None:
        self._settings, self._settings_for = settings, settings_for
        self._dry_run, self._scheduled = dry_run, scheduled
        self._clock, self._monotonic = clock, monotonic
        # make_room delivers for at most the given seconds (`--drain`); without it another
        # process's worker does. pause waits out what is left of a poll.
        self._make_room = make_room or (lambda seconds: None)
        self._pause = pause or threading.Event().wait
        self._wait_s, self._progress_stream = wait_s, progress
        self._secrets_for = secrets_for
        self._profile = profile
        # Chats (by id) whose saved log is imported although forget-chat was run for them: only
        # those the user named (`--chat ID --include-forgotten`).
        self._include_forgotten = include_forgotten
        self.tally = Tally()
        self._waiting_since: float | None = None

    def run(self, folders: Sequence[str]) -> dict[str, Any]:
        """Import these chat folders in order; the report (counts only). Never raises on a chat's
        content; an outbox that cannot be opened or stays unusable ends the run with `error`."""
        imported_at = self._clock()  # the one time of every message the saved log has no time for
        progress = ProgressBar(self._progress_stream, len(folders))
        self.tally.chats["found"] = len(folders)
        outbox: Outbox | None = None
        stopped = error = None
        try:
            outbox = self._open_outbox()
            for done, folder in enumerate(folders, 1):
                prepared = self._chat(folder, imported_at, outbox)
                if outbox is not None and not self._dry_run and prepared and not self._enqueue(
                        outbox, prepared, progress, done - 1):
                    stopped = "outbox_full"
                    break
                progress.show(done, sum(self.tally.messages.values()))
        except OutboxError as exc:
            error = exc.code
        finally:
            progress.end()
            if outbox is not None:
                outbox.close()
        return self._report(stopped, error)

    def _open_outbox(self) -> Outbox | None:
        """The outbox to queue into, which also knows the forgotten chats. A dry run opens one only
        where there is one: it creates nothing, and where nothing was captured, nothing was
        forgotten."""
        if self._dry_run and not os.path.exists(self._settings.outbox_path):
            return None
        return Outbox.for_settings(self._settings, busy_timeout_s=OUTBOX_BUSY_S, clock=self._clock)

    def _chat(self, folder: str, imported_at: float, outbox: Outbox | None) -> list[Prepared]:
        """One chat's messages with their events; counts what was skipped."""
        try:
            chat = read_chat(folder)
        except FileRefused as exc:
            self.tally.chats[exc.code] += 1  # not_a_file, too_large, linked_outside
            return []
        except (OSError, ValueError, RecursionError):
            self.tally.chats["unreadable"] += 1
            return []
        chat_id, project = chat_id_of(chat, folder), project_of(chat)
        if outbox is not None and self._skipped_as_forgotten(outbox, chat_id, folder):
            return []
        kept = self._kept(chat, chat_id, project)
        if kept is None:
            return []
        self.tally.chats["imported"] += 1
        return self._prepared(kept[1], chat_id, project, kept[0], imported_at)

    def _skipped_as_forgotten(self, outbox: Outbox, chat_id: str, folder: str) -> bool:
        """Whether the chat was forgotten here (forget-chat) and not named to be imported again:
        then it is skipped, counted and listed. One named (by its id or its folder's) is listed as
        included."""
        if chat_rows.generation(outbox.db, self._settings.destination(), chat_id) == 0:
            return False
        if {chat_id, os.path.basename(folder)} & self._include_forgotten:
            self.tally.forgotten["included"].append(chat_id)
            return False
        self.tally.chats["forgotten"] += 1
        if len(self.tally.forgotten["skipped"]) < MAX_LISTED_CHATS:
            self.tally.forgotten["skipped"].append(chat_id)
        return True

    def _kept(self, chat: dict[str, Any], chat_id: str, project: str | None
              ) -> tuple[Settings, list[SavedMessage]] | None:
        """The chat's settings and the messages capture keeps of it; None (counted) when it is
        skipped whole."""
        try:
            settings = self._settings_for(project)
            facts = chat_facts(chat, chat_id, self._scheduled, self._profile)
            reason = skip_reason_for_chat(facts, settings)
            if reason:
                self.tally.chats[reason] += 1
                return None
            settings = chat_view(settings, facts.human, project, self._settings)
            return settings, chat_messages(chat, facts, settings, self.tally.skipped)
        except ConfigFileError:
            self.tally.chats["project_settings_unusable"] += 1
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):
            self.tally.chats["unreadable"] += 1
        return None

    def _prepared(self, messages: list[SavedMessage], chat_id: str, project: str | None,
                  settings: Settings, imported_at: float) -> list[Prepared]:
        """The kept messages with their events (a dry run counts them here: nothing is queued)."""
        scope, secrets = resolve_scope(settings, project), self._secrets_for(project)
        prepared = []
        for saved in messages:
            events = self._events(saved, chat_id, project, scope, settings, secrets, imported_at)
            if events:
                prepared.append(Prepared(saved, events))
                if self._dry_run:
                    self.tally.kept(prepared[-1])
                    self.tally.events["planned"] += len(events)
        return prepared

    def _events(self, saved: SavedMessage, chat_id: str, project: str | None, scope: str | None,
                settings: Settings, secrets: Mapping[str, str],
                imported_at: float) -> list[NewEvent]:
        """The message through capture's path; [] (counted) when redaction fails or nothing is
        left."""
        request = CaptureRequest(chat_id=chat_id, role=saved.role, source_id=saved.source_id,
                                 text=saved.text, scope_id=scope, project=project)
        header = message_header(request, saved.role.value, settings,
                                imported_at if saved.at is None else saved.at)
        try:
            # The saved text was masked by Agent Zero when it entered the history (its
            # hist_add_before masking extension): known secret values are already aliases, which
            # redaction neutralises.
            events = message_events(header, redacted_text(saved.text, secrets), ambiguous=True)
        except RedactionError:
            self.tally.skipped["redaction_failed"] += 1  # fail closed, as capture does
            return []
        if not events:
            self.tally.skipped["empty"] += 1
            return []
        if len(events) > self._budget():
            self.tally.skipped["larger_than_outbox"] += 1
            return []
        return events

    def _budget(self) -> int:
        return int(self._settings.max_queued_rows * LIVE_SHARE)

    def _enqueue(self, outbox: Outbox, waiting: list[Prepared], progress: ProgressBar,
                 done: int) -> bool:
        """Queue the messages in order while there is room; False when the wait for room ran
        out."""
        while waiting:
            room = self._room(outbox)
            take, size = 0, 0
            while (take < len(waiting) and take < MAX_MESSAGES_PER_ENQUEUE
                   and size + len(waiting[take].events) <= room):
                size += len(waiting[take].events)
                take += 1
            results = self._store(outbox, [p.events for p in waiting[:take]]) if take else []
            # The outbox stops at a message it refuses.
            stored = [r for r in results if not r.refused]
            for prepared, result in zip(waiting, stored, strict=False):
                self.tally.kept(prepared)
                self.tally.events["queued"] += result.inserted
                self.tally.events["already_queued"] += result.duplicates
            del waiting[:len(stored)]
            if stored:
                self._waiting_since = None
            elif waiting and not self._wait(progress, done):
                return False
        return True

    def _room(self, outbox: Outbox) -> int:
        """Rows this backfill may add now: its share of the bound less what waits (pending, leased,
        dead); delivered rows make way when needed (the outbox prunes them)."""
        try:
            counts = outbox.stats()["counts"]
        except OutboxBusy:
            return 0
        return self._budget() - sum(counts.get(state, 0) for state in ("pending", "leased", "dead"))

    def _store(self, outbox: Outbox, batches: list[list[NewEvent]]) -> list[EnqueueResult]:
        try:
            return outbox.enqueue_batches(batches, asked_again=self.tally.forgotten["included"])
        except OutboxBusy:
            return []  # another process holds the write lock: wait as for room

    def _wait(self, progress: ProgressBar, done: int) -> bool:
        """Let the worker deliver for a moment; False once `wait_s` passed without room."""
        now = self._monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        left = self._wait_s - (now - self._waiting_since)
        if left <= 0:
            return False
        progress.show(done, sum(self.tally.messages.values()), "waiting for room in the outbox")
        poll = min(POLL_S, left)
        self._make_room(poll)
        rest = poll - (self._monotonic() - now)
        if rest > 0:
            # A drain that returned at once (nothing it may send) must not spin.
            self._pause(rest)
        return True

    def _report(self, stopped: str | None, error: str | None) -> dict[str, Any]:
        tally = self.tally
        report: dict[str, Any] = {
            "dry_run": self._dry_run,
            "chats": {"found": tally.chats["found"], "imported": tally.chats["imported"],
                      "skipped": {k: v for k, v in sorted(tally.chats.items())
                                  if k not in ("found", "imported")}},
            "messages": {"user": tally.messages["user"], "agent": tally.messages["agent"]},
            "skipped": dict(sorted(tally.skipped.items())),
            "times": {"log": tally.times["log"], "import": tally.times["import"]},
            "events": dict(sorted(tally.events.items())),
            "forgotten": {name: list(ids) for name, ids in tally.forgotten.items()},
            "stopped": stopped,
        }
        if error:
            report["error"] = error
        return report


def report_text(report: Mapping[str, Any]) -> str:
    """The report as a few lines for a person (counts only)."""
    def counts(values: Mapping[str, int]) -> str:
        return ", ".join(f"{name} {count}" for name, count in values.items()) or "none"

    chats, messages, events = report["chats"], report["messages"], report["events"]
    times = report["times"]
    done = "to import" if report["dry_run"] else "imported"
    lines = [f"chats: {chats['found']} found, {chats['imported']} {done};"
             f" skipped: {counts(chats['skipped'])}",
             f"messages {done}: user {messages['user']}, agent {messages['agent']};"
             f" dated by the chat's log {times['log']}, by the import time {times['import']}",
             f"messages skipped: {counts(report['skipped'])}", *_forgotten_lines(report)]
    if report["dry_run"]:
        lines.append(f"events: {events.get('planned', 0)} would be queued;"
                     " nothing was queued (dry run)")
    else:
        lines.append(f"events: {events.get('queued', 0)} queued,"
                     f" {events.get('already_queued', 0)} already in the outbox;"
                     " the worker asks Honcho before sending each (they may be there already)")
    if report.get("error"):
        lines.append(f"stopped: the outbox cannot be used ({report['error']});"
                     " run backfill again later")
    elif report["stopped"] == "outbox_full":
        lines.append("stopped: no room in the outbox (most of max_queued_rows waiting to be"
                     " delivered); let Agent Zero's worker deliver them (or run with --drain, or"
                     " `python -m honcho_hub drain`), then run backfill again: messages already"
                     " queued are not queued twice")
    return "\n".join(lines)


def _forgotten_lines(report: Mapping[str, Any]) -> list[str]:
    """The report's lines naming the forgotten chats it skipped, and those imported again as
    asked."""
    skipped, included = report["forgotten"]["skipped"], report["forgotten"]["included"]
    lines = []
    if skipped:
        more = report["chats"]["skipped"].get("forgotten", 0) - len(skipped)
        lines.append(f"forgotten chats skipped: {', '.join(skipped)}"
                     f"{f' and {more} more' if more > 0 else ''}"
                     " (import one again with --chat ID --include-forgotten)")
    if included:
        lines.append(f"forgotten chats imported again as asked: {', '.join(included)}")
    return lines
