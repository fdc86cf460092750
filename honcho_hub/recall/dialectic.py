"""The dialectic layer (opt-in): a short note on what about the user matters now, written by
Honcho's dialectic in the background on a chat's refresh turns and added to recall's pack once
ready. Off by default: automatic recall never calls the dialectic unless the user switched it on.
Its cadence, passes and scope rule: docs/architecture.md ("Recall").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..bounded import BoundedMap
from ..errors import AuthError, HonchoRequestError, PermanentError
from ..gateway import queries
from ..gateway.gateway import HonchoGateway
from ..names import MAX_DIALECTIC_QUERY
from ..settings.config import Settings
from ..settings.spec import REASONING_LEVELS
from .cache import Submit

QUERY_MAX_CHARS = MAX_DIALECTIC_QUERY
# (characters of the redacted user message, levels raised), longest first
LEVEL_STEPS = ((400, 2), (120, 1))
LATEST_CHARS = 2_000  # of the user's latest message in a question
ANSWER_CHARS = 3_000  # of each earlier answer in an audit or reconciliation
# A strong answer is long and structured: it already says enough, so further passes would cost an
# LLM call each to restate it.
STRONG_CHARS, STRONG_LINES = 300, 3
PREWARM_INTERVAL_S = 30.0  # at most one prewarm started per this many seconds in the process
# Computations in flight in the process: each holds a thread of recall's pool for up to depth ×
# ask_timeout_s, and the pool's other threads must stay free for the turns' recall.
MAX_RUNNING = 2

COLD_QUESTION = ("Who is this person? Tell an assistant who is about to work with them what you"
                 " know of them: their preferences, their goals and their way of working. Answer in"
                 " a few short points, and say so plainly where you know nothing.")
WARM_QUESTION = ("Given what this session has discussed, what context about the user matters most"
                 " right now for an assistant helping them? Answer in a few short points, most"
                 " important first, and leave out what does not bear on the work at hand.")
AUDIT_QUESTION = ("Check the earlier answer below against the most recent evidence you hold about"
                  " the user (their latest messages and conclusions): keep what is still supported,"
                  " correct what is outdated or wrong, and add what matters now that it missed."
                  " Answer with the corrected points only.")
RECONCILE_QUESTION = ("The two answers below about the user may contradict each other or what else"
                      " you know. Settle each contradiction (newer evidence wins; say where it"
                      " stays uncertain) and answer with one consistent set of short points, most"
                      " important first.")


def reasoning_level(settings: Settings, redacted_user_text: str) -> str:
    """The turn's reasoning level: `dialectic_reasoning_level`, raised by the heuristic (when on)
    one level from 120 characters of the redacted message and two from 400, surrounding space aside.

    `reasoning_level_cap` bounds the raise only: a base level already above the cap is kept, since
    the user chose it and the cap names how far the heuristic may go (result = max(base, min(base +
    raise, cap)))."""
    base = REASONING_LEVELS.index(settings.dialectic_reasoning_level)
    if not settings.reasoning_level_heuristic:
        return REASONING_LEVELS[base]
    length = len((redacted_user_text or "").strip())
    steps = next((raised for chars, raised in LEVEL_STEPS if length >= chars), 0)
    cap = REASONING_LEVELS.index(settings.reasoning_level_cap)
    return REASONING_LEVELS[max(base, min(base + steps, cap))]


def level_for_pass(settings: Settings, turn_level: str, pass_index: int) -> str:
    """Pass `pass_index`'s level (0 is the first pass): the one `dialectic_pass_levels` names for
    it, else the turn's. A named level is the user's explicit choice: the heuristic's cap does not
    apply to it."""
    levels = settings.pass_levels
    return levels[pass_index] if 0 <= pass_index < len(levels) else turn_level


def is_strong(answer: str) -> bool:
    """Long and structured: at least STRONG_CHARS characters over at least STRONG_LINES non-empty
    lines."""
    text = (answer or "").strip()
    return (len(text) >= STRONG_CHARS
            and sum(1 for line in text.splitlines() if line.strip()) >= STRONG_LINES)


def cut_note(text: str, max_chars: int) -> str:
    """`text` without surrounding space, cut to at most `max_chars` at a word boundary with an
    ellipsis (inside a word only when its first word alone is longer than the limit)."""
    text = (text or "").strip()
    if len(text) <= max_chars:
        return text
    head = text[:max(0, max_chars - 1)]  # room for the ellipsis
    if not text[len(head)].isspace():  # the limit falls inside a word: end before it
        space = max(head.rfind(" "), head.rfind("\n"))
        head = head[:space] if space > 0 else head
    return head.rstrip() + "…"


@dataclass
class _Session:
    """What the process knows of one chat's dialectic (guarded by the Dialectic's lock)."""

    turns: int = 0  # user turns counted while the dialectic was on
    note: str | None = None  # the newest ready note
    running: bool = False  # a computation is in flight


@dataclass(frozen=True)
class _Question:
    """What one computation asks about, fixed when it starts."""

    session_id: str
    scope_id: str | None
    cold: bool
    summary: str | None  # sent in the question only when the question is scoped
    latest: str  # the user's latest message, redacted; '' for a prewarm
    level: str  # the turn's reasoning level


class Dialectic:
    """One per process: each chat's turn count and newest note, the computations in flight (at most
    one a chat, MAX_RUNNING in all) and the prewarm rate. Thread-safe; nothing here blocks on the
    network: computations run through the `submit` the caller gives (recall's bounded pool).

    `gateway_for(settings)` gives the gateway the passes use (the caller's, cached per destination).
    """

    def __init__(self, gateway_for: Callable[[Settings], HonchoGateway],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._gateway_for, self._monotonic = gateway_for, monotonic
        self._lock = threading.Lock()
        # Bounded by cache_max_entries, given at each put.
        self._sessions: BoundedMap[Hashable, _Session] = BoundedMap()
        self._running = 0
        self._last_prewarm: float | None = None  # when the newest prewarm started
        self._counters = {"started": 0, "done": 0, "failed": 0, "prewarms": 0, "busy": 0,
                          "unscoped": 0}

    def on_user_turn(self, settings: Settings, session_id: str, scope_id: str | None,
                     redacted_text: str, summary: str | None, base_known: bool,
                     submit: Submit) -> bool:
        """Count a user turn of the chat and, on a refresh turn, start its note's computation; True
        when one was started. Returns at once.

        With the dialectic off nothing is counted (switching it on makes the next turn a first
        turn).
        Refresh turns are 1, 1 + cadence, 1 + 2 × cadence, …; one is skipped (counted `busy`) while
        the chat has a computation in flight, MAX_RUNNING are in flight, or `submit` refuses. Turn 1
        starts nothing when a prewarm already gave the chat a note. `redacted_text` is the user's
        message as it may be sent (already masked and redacted); `summary` the session's summary,
        which a scoped question carries; `base_known` whether anything is known about the user yet
        (else the cold question)."""
        if not settings.dialectic_enabled:
            return False
        key = _key(settings, session_id)
        with self._lock:
            entry = self._entry(key, settings)
            entry.turns += 1
            if (entry.turns - 1) % settings.dialectic_cadence:
                return False
            if entry.turns == 1 and entry.note is not None:
                return False  # the prewarm's note is this turn's
            if not self._claim(entry):
                return False
        question = _Question(session_id, scope_id, not base_known, summary,
                             cut_note(redacted_text, LATEST_CHARS),
                             reasoning_level(settings, redacted_text))
        return self._start(settings, entry, question, submit, prewarm=False)

    def prewarm(self, settings: Settings, session_id: str, scope_id: str | None,
                submit: Submit) -> bool:
        """Start a new chat's note before its first turn (the general question, at the configured
        depth and the base level); True when started. Only with `dialectic_enabled` and
        `dialectic_prewarm`, for a chat with no counted turn and no note, and at most one start per
        PREWARM_INTERVAL_S in the process (a start `submit` refused does not count). Which chats are
        new is the caller's to say."""
        if not (settings.dialectic_enabled and settings.dialectic_prewarm):
            return False
        now = self._monotonic()
        with self._lock:
            if self._last_prewarm is not None and now - self._last_prewarm < PREWARM_INTERVAL_S:
                return False
            entry = self._entry(_key(settings, session_id), settings)
            if entry.turns or entry.note is not None or not self._claim(entry):
                return False
            previous, self._last_prewarm = self._last_prewarm, now
        question = _Question(session_id, scope_id, True, None, "", reasoning_level(settings, ""))
        if self._start(settings, entry, question, submit, prewarm=True):
            return True
        with self._lock:
            if self._last_prewarm == now:
                self._last_prewarm = previous
        return False

    def note(self, settings: Settings, session_id: str) -> str | None:
        """The chat's newest ready note, at most `dialectic_max_chars`; None when there is none or
        the dialectic is off (recall then injects nothing of it)."""
        if not settings.dialectic_enabled:
            return None
        with self._lock:
            entry = self._sessions.get(_key(settings, session_id))
            note = entry.note if entry is not None else None
        return cut_note(note, settings.dialectic_max_chars) if note else None

    def counters(self) -> dict[str, int]:
        """For status: computations started (prewarms included), done, failed (a pass's request
        failed), prewarms started, busy (a refresh turn or prewarm not started: the chat's
        computation in flight, MAX_RUNNING running, or `submit` refused; a rate-limited prewarm is
        not counted), unscoped (a refused scope asked again about the session), and how many are
        running now."""
        with self._lock:
            return {**self._counters, "running": self._running}

    def clear(self) -> int:
        """Forget every chat's note and count (with recall's cache); a computation in flight keeps
        nothing. Returns how many notes there were."""
        with self._lock:
            notes = sum(1 for entry in self._sessions.values() if entry.note is not None)
            self._sessions.clear()  # a computation in flight finishes on an entry no one reads
            return notes

    # -- internals -------------------------------------------------------------------------------

    def _entry(self, key: Hashable, settings: Settings) -> _Session:
        """The chat's state (call under the lock), kept as the most recently used."""
        entry = self._sessions.get(key) or _Session()
        self._sessions.put(key, entry, settings.cache_max_entries)
        return entry

    def _claim(self, entry: _Session) -> bool:
        """Reserve a computation for the chat (call under the lock); False, counted busy, when none
        may start."""
        if entry.running or self._running >= MAX_RUNNING:
            self._counters["busy"] += 1
            return False
        entry.running = True
        self._running += 1
        return True

    def _start(self, settings: Settings, entry: _Session, question: _Question, submit: Submit,
               prewarm: bool) -> bool:
        with self._lock:
            self._counters["started"] += 1
            self._counters["prewarms"] += int(prewarm)
        if submit(self._compute, settings, entry, question):
            return True
        with self._lock:  # not started: as if never claimed
            self._counters["started"] -= 1
            self._counters["prewarms"] -= int(prewarm)
            self._counters["busy"] += 1
            self._release(entry)
        return False

    def _release(self, entry: _Session) -> None:
        entry.running = False
        self._running -= 1

    def _compute(self, settings: Settings, entry: _Session, question: _Question) -> None:
        """The passes, on the caller's pool thread; the newest answer becomes the note, even when a
        later pass fails. A failure leaves the note as it was and is counted, never raised."""
        answers: list[str] = []
        failed = False
        try:
            self._passes(settings, question, answers)
        except HonchoRequestError:
            failed = True
        finally:
            with self._lock:
                self._release(entry)
                self._counters["failed" if failed else "done"] += 1
                if answers:  # on an entry clear() or the bound let go, it is not kept
                    entry.note = cut_note(answers[-1], settings.dialectic_max_chars)

    def _passes(self, settings: Settings, question: _Question, answers: list[str]) -> None:
        gateway = self._gateway_for(settings)
        scope = question.scope_id if question.scope_id and gateway.supports_scopes() else None
        context = _context(question, scoped=scope is not None)
        for index in range(settings.dialectic_depth):
            query = _query(index, question.cold, context, answers)
            level = level_for_pass(settings, question.level, index)
            try:
                answer = _ask(gateway, settings, question.session_id, scope, query, level)
            except (AuthError, PermanentError) as exc:
                if scope is None or exc.code == "http_404":
                    raise  # nothing to fall back to, or the scope is not there yet: nothing known
                scope = None
                with self._lock:
                    self._counters["unscoped"] += 1
                answer = _ask(gateway, settings, question.session_id, scope, query, level)
            answer = answer.strip()
            if not answer:
                return  # nothing known: nothing to audit either
            answers.append(answer)
            if is_strong(answer):
                return


def _ask(gateway: HonchoGateway, settings: Settings, session_id: str, scope: str | None,
         query: str, level: str) -> str:
    return queries.ask(gateway, settings.agent_peer_id, settings.user_peer_id, query,
                       session_id=session_id, scope=scope, reasoning_level=level,
                       timeout_s=settings.ask_timeout_s)


def _context(question: _Question, scoped: bool) -> str:
    """What every pass's question carries after its own text: the latest message, and in a scoped
    warm question (which names no session) the session's summary, last since it is the longest."""
    parts = []
    if question.latest:
        parts.append(f"\n\nThe user's latest message:\n{question.latest}")
    if scoped and not question.cold and question.summary and question.summary.strip():
        parts.append(f"\n\nSummary of this session so far:\n{question.summary.strip()}")
    return "".join(parts)


def _query(index: int, cold: bool, context: str, answers: list[str]) -> str:
    """Pass `index`'s question, within Honcho's limit: its own text first, so a cut only shortens
    the end."""
    if index == 0:
        head = COLD_QUESTION if cold else WARM_QUESTION
    elif index == 1:
        head = f"{AUDIT_QUESTION}\n\nThe earlier answer:\n{cut_note(answers[0], ANSWER_CHARS)}"
    else:
        head = (f"{RECONCILE_QUESTION}\n\nThe first answer:\n{cut_note(answers[0], ANSWER_CHARS)}"
                f"\n\nThe audited answer:\n{cut_note(answers[-1], ANSWER_CHARS)}")
    return cut_note(head + context, QUERY_MAX_CHARS)


def _key(settings: Settings, session_id: str) -> tuple:
    """A note is what this agent knows of this user at this destination, in this chat."""
    return (settings.api_url, settings.workspace_id, settings.agent_peer_id, settings.user_peer_id,
            session_id)
