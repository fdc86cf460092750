"""When memory stops working, one notice saying what and what to do; one more when it works again.

`findings` reads which conditions hold from the status document (what health is built from);
`observe` is the state machine, a function of the findings and a monotonic `now`, with hysteresis.
Notices are plain text: the host escapes them. docs/reference.md, Operations, "Notifications".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..runtime import Kept

WATCH_EVERY_S = 5.0  # the watch reads status at most this often
CLEAR_AFTER_S = 30.0  # a raised condition absent this long has recovered
# Recall timing out on most turns: more than half of at least this many recent loads.
RECALL_MIN_LOADS = 5
# Outbox codes that pass by themselves (another writer holds the lock a moment).
PASSING_OUTBOX_CODES = frozenset({"outbox_busy"})
ID_PREFIX = "honcho-memory-"


class Condition(str, Enum):
    """A way memory stops working, each with a notice of its own."""

    OUTBOX_UNUSABLE = "outbox_unusable"
    KEY_REFUSED = "key_refused"
    UNREACHABLE = "unreachable"
    DEAD_LETTERS = "dead_letters"
    RECALL_TIMEOUTS = "recall_timeouts"


# How long a condition must hold before it is raised: a circuit opened by one failed turn closes at
# its next probe; dead letters are final and recall's timeouts are judged over many turns already.
RAISE_AFTER_S: dict[Condition, float] = {
    Condition.OUTBOX_UNUSABLE: 30.0, Condition.KEY_REFUSED: 30.0, Condition.UNREACHABLE: 30.0,
    Condition.DEAD_LETTERS: 0.0, Condition.RECALL_TIMEOUTS: 0.0}

Findings = dict[Condition, dict[str, Any]]  # the conditions that hold, with what to say of each


@dataclass(frozen=True)
class Notice:
    """One notification: `id` is the same for every raise (or every recovery) of a condition, so the
    host updates it in place. Plain text."""

    id: str
    condition: Condition
    recovered: bool
    title: str
    message: str


@dataclass
class Track:
    """One condition between observations."""

    held_since: float | None = None
    raised: bool = False
    clear_since: float | None = None


@dataclass
class Watch:
    """What the watch remembers between observations; plain data (kept on the process state, so a
    reload of the plugin neither repeats an outage nor forgets to say it ended)."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    tracks: dict[str, Track] = field(default_factory=dict)
    dead_floor: int | None = None  # the fewest dead letters seen: more are news
    last_at: float | None = None


WATCH: Kept[Watch] = Kept("alert_watch", Watch)


def due(watch: Watch, now: float) -> bool:
    """Whether the watch should read status now (at most every WATCH_EVERY_S); marks it read."""
    with watch.lock:
        if watch.last_at is not None and now - watch.last_at < WATCH_EVERY_S:
            return False
        watch.last_at = now
        return True


def findings(status: dict[str, Any]) -> Findings:
    """The conditions `status` (ops.status.build_status) holds. Recall timing out is not said while
    Honcho is unreachable or refuses the key: that notice already says why."""
    found: Findings = {}
    problem = status["capture"]["outbox_problem"]
    if problem and problem not in PASSING_OUTBOX_CODES:
        found[Condition.OUTBOX_UNUSABLE] = {"code": problem}
    circuit, shared = status["worker"]["circuit"], status["processes"]["shared_circuit"]
    reach = status["endpoints"]["api_reach"]
    if circuit and circuit["kind"] == "auth":
        found[Condition.KEY_REFUSED] = {"code": circuit["reason"]}
    elif reach["refused_key"]:
        found[Condition.KEY_REFUSED] = {"code": reach["last_failure"]}
    elif (circuit and circuit["kind"] == "unreachable") or shared:
        found[Condition.UNREACHABLE] = {"code": (circuit or shared)["reason"],
                                        "api_url": status["endpoints"]["api_url"]}
    queue = status["queue"]
    if queue["dead"]:
        found[Condition.DEAD_LETTERS] = {"count": queue["dead"],
                                         "codes": dict(queue["dead_by_code"])}
    recent = status["recall"]["recent"]
    if (recent["loads"] >= RECALL_MIN_LOADS and recent["timeouts"] * 2 > recent["loads"]
            and not found.keys() & {Condition.KEY_REFUSED, Condition.UNREACHABLE}):
        found[Condition.RECALL_TIMEOUTS] = dict(recent)
    return found


def observe(watch: Watch, found: Findings, now: float) -> list[Notice]:
    """The notices this observation gives: a condition held RAISE_AFTER_S without a gap is raised
    once; a raised one absent CLEAR_AFTER_S without a gap has recovered. Dead letters hold only when
    there are more than the fewest seen (those found at the start are not news)."""
    notices = []
    with watch.lock:
        found = _new_dead_letters(watch, found)
        for condition in Condition:
            track = watch.tracks.setdefault(condition.value, Track())
            notice = _step(track, condition, found.get(condition), now)
            if notice is not None:
                notices.append(notice)
    return notices


def _new_dead_letters(watch: Watch, found: Findings) -> Findings:
    count = found.get(Condition.DEAD_LETTERS, {}).get("count", 0)
    floor = watch.dead_floor = count if watch.dead_floor is None else min(watch.dead_floor, count)
    if count > floor:
        return found
    return {c: facts for c, facts in found.items() if c is not Condition.DEAD_LETTERS}


def _step(track: Track, condition: Condition, facts: dict[str, Any] | None,
          now: float) -> Notice | None:
    if facts is not None:
        track.clear_since = None
        if track.held_since is None:
            track.held_since = now
        if not track.raised and now - track.held_since >= RAISE_AFTER_S[condition]:
            track.raised = True
            return Notice(ID_PREFIX + condition.value, condition, False,
                          *_RAISED[condition](facts))
        return None
    track.held_since = None
    if not track.raised:
        return None
    if track.clear_since is None:
        track.clear_since = now
    if now - track.clear_since < CLEAR_AFTER_S:
        return None
    track.raised, track.clear_since = False, None
    return Notice(ID_PREFIX + condition.value + "-recovered", condition, True,
                  *_RECOVERED[condition])


def _codes(codes: dict[str, int]) -> str:
    return ", ".join(f"{n} {code}" for code, n in sorted(codes.items()))


# What each condition's notice says: what happened, then what to do.
_RAISED = {
    Condition.UNREACHABLE: lambda f: (
        "Honcho memory: server unreachable",
        f"Honcho at {f['api_url']} does not answer ({f['code']}). Your messages wait in the outbox"
        " and are sent when it answers; recall has only what it already held. Check that Honcho"
        " runs and that the API URL in the plugin's settings is right."),
    Condition.KEY_REFUSED: lambda f: (
        "Honcho memory: API key refused",
        f"Honcho refuses the API key ({f['code']}): nothing is sent or recalled, nothing is lost."
        " Set a valid HONCHO_API_KEY under Settings → Secrets; delivery resumes at the next"
        " probe (or at once with Retry dead in the Honcho panel)."),
    Condition.OUTBOX_UNUSABLE: lambda f: (
        "Honcho memory: outbox unusable",
        f"The local outbox cannot be used ({f['code']}): new messages are not kept for Honcho."
        " Check the free space and permissions of the folder the outbox_path setting names."),
    Condition.DEAD_LETTERS: lambda f: (
        "Honcho memory: messages set aside",
        f"{f['count']} messages were refused by Honcho and set aside"
        + (f" ({_codes(f['codes'])})" if f["codes"] else "")
        + ". Open the Honcho panel in the sidebar to see why and Retry dead to send them again."),
    Condition.RECALL_TIMEOUTS: lambda f: (
        "Honcho memory: recall too slow",
        f"Recall timed out on {f['timeouts']} of the last {f['loads']} turns: the agent answered"
        " without fresh memory. Honcho is slow to answer: check its load, or raise the"
        " recall_timeout_s setting."),
}
_RECOVERED = {
    Condition.UNREACHABLE: ("Honcho memory: server reachable again",
                            "Honcho answers again; what waited in the outbox is being sent."),
    Condition.KEY_REFUSED: ("Honcho memory: API key accepted",
                            "Honcho accepts the API key again; delivery and recall resumed."),
    Condition.OUTBOX_UNUSABLE: ("Honcho memory: outbox usable again",
                                "The local outbox works again; new messages are kept."),
    Condition.DEAD_LETTERS: ("Honcho memory: no new messages set aside",
                             "The messages set aside were sent again or removed."),
    Condition.RECALL_TIMEOUTS: ("Honcho memory: recall on time again",
                                "Recall answers within its deadline again."),
}
