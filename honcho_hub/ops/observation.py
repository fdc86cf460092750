"""The observation preset applied to sessions Honcho already holds. Honcho keeps the configuration a
session's peer joined with, so a preset reaches new sessions only: this reads the configured peers'
flags in the sessions this install made (the outbox's chat map) and, when asked, sets the settings'
flags where they differ; one page of sessions a call, within one deadline (docs/reference.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import HonchoRequestError, OutboxError, PermanentError
from ..gateway import deadline, queries
from ..gateway.gateway import API_URL_INVALID, HonchoGateway
from ..settings.config import Settings
from ..storage import chats as chat_rows
from ..storage.db import with_existing
from .status import flags_text

PAGE_SESSIONS = 25  # sessions one call reads (two requests each) and sets (one a peer that differs)
MAX_SESSIONS = 250  # what a walk (the command line) checks at most in one run
CALL_DEADLINE_S = 30.0  # one call: every request of its page together
MAX_LISTED = 10  # sessions that differ, listed by id in a report
ROLES = ("user", "agent")
FLAGS = ("observe_me", "observe_others")
PEERS_NOTE = ("Only the configured peers are read and set. A peer not in a session is left out:"
              " setting it would add it to the session; it joins with these flags when it first"
              " speaks there.")


def check(settings: Settings, gateway: HonchoGateway, offset: int = 0, *,
          monotonic: Callable[[], float] = time.monotonic,
          deadline_s: float = CALL_DEADLINE_S) -> dict[str, Any]:
    """The dry run of one page from `offset`: how many sessions hold other flags, and how."""
    return _page(settings, gateway, offset, False, monotonic, deadline_s)


def apply(settings: Settings, gateway: HonchoGateway, offset: int = 0, *,
          monotonic: Callable[[], float] = time.monotonic,
          deadline_s: float = CALL_DEADLINE_S) -> dict[str, Any]:
    """One page from `offset`: the settings' flags set on each peer whose flags differ."""
    return _page(settings, gateway, offset, True, monotonic, deadline_s)


def walk(settings: Settings, gateway: HonchoGateway, *, apply: bool,
         monotonic: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Page after page (each a call with its own deadline) until every session is done, a page
    stops, or MAX_SESSIONS were checked; one report of them all."""
    report = _page(settings, gateway, 0, apply, monotonic, CALL_DEADLINE_S)
    while (report["next_offset"] is not None and not report["stopped"]
           and report["checked"] < MAX_SESSIONS):
        page = _page(settings, gateway, report["next_offset"], apply, monotonic, CALL_DEADLINE_S)
        report = _merged(report, page)
    return report


def report_text(report: dict[str, Any]) -> str:
    """A report as lines: what differs and how, what was done, and where to go on."""
    lines = [f"Observation {report['preset']}: {flags_text(report['configured'])}"]
    if not report["total"]:
        lines.append("There is no session made by this install to check yet (the chat map records"
                     " one when a chat's first message is captured).")
    elif report["checked"]:
        lines.append(f"{report['differ']} of {report['checked']} sessions this install made hold"
                     f" other flags than the settings"
                     + ("" if report["checked"] == report["total"]
                        else f" ({report['total']} in all)")
                     + f"; {report['same']} as the settings"
                     + (f"; {report['absent']} not on the server" if report["absent"] else ""))
    lines += [f"  {change} in {count} {_sessions(count)}"
              for change, count in report["changes"].items()]
    lines += [f"  {s['session_id']} holds: {flags_text(s['server'])}"
              for s in report["sessions"]]
    lines += [f"  {f['session_id']}: not changed ({f['error']})" for f in report["failed"]]
    if report["dry_run"] and report["differ"]:
        lines.append("Dry run: nothing changed. Apply to set the settings' flags on them.")
    elif not report["dry_run"] and report["checked"]:
        lines.append(f"Applied the flags to {report['applied']} {_sessions(report['applied'])}.")
    if report["stopped"]:
        lines.append(f"Stopped ({report['stopped']}) after {report['checked']}"
                     f" {_sessions(report['checked'])}: run it again to go on.")
    elif report["next_offset"] is not None:
        more = report["total"] - report["next_offset"]
        lines.append(f"{more} more {_sessions(more)}: the next page starts at"
                     f" {report['next_offset']}.")
    if report["total"]:
        lines.append(PEERS_NOTE)
    return "\n".join(lines)


# -- one page --------------------------------------------------------------------------------------


def _page(settings: Settings, gateway: HonchoGateway, offset: int, apply: bool,
          monotonic: Callable[[], float], deadline_s: float) -> dict[str, Any]:
    offset = max(0, int(offset))
    report = _empty(settings, offset, apply)
    nothing: tuple[list[str], int] = ([], 0)  # no outbox yet: no session made here
    try:
        ids, report["total"] = with_existing(settings, lambda db: chat_rows.mapped_sessions(
            db, settings.destination(), offset, PAGE_SESSIONS), nothing)
    except OutboxError as exc:
        report["stopped"] = exc.code
        return report
    with deadline.within(deadline_s, monotonic):
        for session_id in ids:
            try:
                _session(settings, gateway, session_id, apply, report)
            except HonchoRequestError as exc:
                if not isinstance(exc, PermanentError) or exc.code == API_URL_INVALID:
                    report["stopped"] = exc.code  # the next session would fare no better
                    break
                report["failed"].append({"session_id": session_id, "error": exc.code})
            report["checked"] += 1
    end = offset + report["checked"]
    report["next_offset"] = end if end < report["total"] else None
    return report


def _session(settings: Settings, gateway: HonchoGateway, session_id: str, apply: bool,
             report: dict[str, Any]) -> None:
    """Read the configured peers' flags in one session; count, and set them when they differ."""
    peers = {"user": settings.user_peer_id, "agent": settings.agent_peer_id}
    wanted = report["configured"]
    server = {role: queries.peer_configuration(gateway, session_id, peer)
              for role, peer in peers.items()}
    differ = [(role, flag, held[flag], wanted[role][flag])
              for role, held in server.items() if held is not None
              for flag in FLAGS if held[flag] != wanted[role][flag]]
    if all(held is None for held in server.values()):
        report["absent"] += 1
        return
    if not differ:
        report["same"] += 1
        return
    report["differ"] += 1
    for role, flag, was, to in differ:
        change = f"{role} {flag}: {_word(was)} → {_word(to)}"
        report["changes"][change] = report["changes"].get(change, 0) + 1
    if len(report["sessions"]) < MAX_LISTED:
        report["sessions"].append({"session_id": session_id, "server": server})
    if apply:
        for role in dict.fromkeys(role for role, *_ in differ):
            queries.set_peer_configuration(gateway, session_id, peers[role], wanted[role])
        report["applied"] += 1


def _empty(settings: Settings, offset: int, apply: bool) -> dict[str, Any]:
    return {"preset": settings.observation,
            "configured": {role: settings.observation_of(role) for role in ROLES},
            "dry_run": not apply, "offset": offset, "total": 0, "checked": 0, "differ": 0,
            "same": 0, "absent": 0, "applied": 0, "changes": {}, "sessions": [], "failed": [],
            "stopped": None, "next_offset": None}


def _merged(report: dict[str, Any], page: dict[str, Any]) -> dict[str, Any]:
    """Two consecutive pages' reports as one."""
    merged = {**page, "offset": report["offset"]}
    for count in ("checked", "differ", "same", "absent", "applied"):
        merged[count] = report[count] + page[count]
    merged["changes"] = dict(report["changes"])
    for change, count in page["changes"].items():
        merged["changes"][change] = merged["changes"].get(change, 0) + count
    merged["sessions"] = (report["sessions"] + page["sessions"])[:MAX_LISTED]
    merged["failed"] = report["failed"] + page["failed"]
    return merged


def _word(value: bool | None) -> str:
    return "default" if value is None else "on" if value else "off"


def _sessions(count: int) -> str:
    return "session" if count == 1 else "sessions"
