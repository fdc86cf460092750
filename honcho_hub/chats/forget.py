"""Forgetting a chat: its rows leave the outbox, its Honcho sessions are deleted, and its later
messages start a new session; what dreams derived from it and matching card facts are offered for
removal (chats/leftovers.py). Run by the command line (`forget-chat CHAT_ID --yes`), the memory tool
(`forget_chat` with `confirm: true`) and the sidebar's offer once a chat was deleted in Agent Zero.
docs/architecture.md ("Chats") gives the order of the steps and why it matters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..bounded import BoundedMap
from ..errors import ForgetRefused, HonchoRequestError, OutboxError
from ..gateway import deadline
from ..gateway.gateway import HonchoGateway
from ..names import session_id_for
from ..settings.config import Settings
from ..storage import chats as chat_rows
from ..storage.marker import move_marker
from ..storage.outbox import Outbox
from . import leftovers

MAX_CHAT_ID = 256  # characters; Agent Zero's chat ids have 8
POLL_S = 0.1  # how often the wait looks at the leases again
BUSY_WAIT_S = 5.0  # the outbox's lock wait: this is no turn's path
MAX_OFFERS = 32
MAX_WAIT_S = 3_600.0  # the longest lease_s allows
REMOVE_S_EACH = 1.0  # added to the removal's deadline for each conclusion or card it touches

DONE, SENDING, HONCHO_FAILED = "done", "sending", "honcho_failed"


def checked_chat_id(chat_id: Any) -> str:
    """`chat_id` when it can name a chat; else ForgetRefused with a bounded message (the value
    not echoed)."""
    if not isinstance(chat_id, str) or not chat_id.strip():
        raise ForgetRefused("a chat id is required")
    if len(chat_id) > MAX_CHAT_ID or not chat_id.isprintable():
        raise ForgetRefused(f"a chat id is 1 to {MAX_CHAT_ID} printable characters")
    return chat_id


def forget_chat(settings: Settings, chat_id: Any, *, wait_s: float | None = None,
                gateway: HonchoGateway | None = None,
                gateway_factory: Callable[[Settings], HonchoGateway] | None = None,
                clock: Callable[[], float] = time.time,
                monotonic: Callable[[], float] = time.monotonic,
                pause: Callable[[float], Any] | None = None,
                on_waiting: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Forget one chat of the settings' destination (the steps: docs/architecture.md, "Chats"); a
    JSON-safe report, never raising for outbox or Honcho trouble. `wait_s` bounds the wait for sends
    on the wire (default: the lease time, after which a dead holder's lease has run out);
    `on_waiting(leased)` is called once when there is something to wait for. `gateway` (the
    caller's, left open) or one `gateway_factory` builds (closed here) deletes the sessions. Raises
    ForgetRefused for a chat id that cannot be one."""
    chat_id = checked_chat_id(chat_id)
    destination = settings.destination()
    wait = settings.lease_s if wait_s is None else max(0.0, wait_s)
    pause = pause or threading.Event().wait
    try:
        outbox = Outbox.for_settings(settings, busy_timeout_s=BUSY_WAIT_S, clock=clock)
    except OutboxError as exc:
        return {"chat_id": chat_id, "error": exc.code}
    try:
        rows = outbox.begin_forget(destination, chat_id)
        # Every process sharing the outbox hears of it: the chat's turns name its next session.
        move_marker(settings)
        deleted, leased = rows.deleted, rows.leased
        if leased and on_waiting is not None:
            on_waiting(leased)
        deadline = monotonic() + wait
        while leased and monotonic() < deadline:
            pause(min(POLL_S, max(0.0, deadline - monotonic())))
            more, leased = outbox.drop_forgotten_rows(destination, rows.sessions)
            deleted += more
        # The deleted rows' text is still readable in the WAL until a checkpoint.
        outbox.reclaim_space()
        report: dict[str, Any] = {
            "chat_id": chat_id, "generation": rows.generation,
            "next_session": session_id_for(chat_id, rows.generation),
            "sessions": list(rows.sessions), "shared_sessions": list(rows.shared),
            "rows_deleted": deleted, "waited_for": rows.leased, "still_sending": leased,
            "honcho": {}}
        # A send may still reach Honcho: deleting now would let it create the session again.
        if leased:
            report["state"] = SENDING
            return report
        if gateway is not None:
            _forget_in_honcho(report, settings, gateway, outbox, destination, rows.sessions)
        else:
            built = (gateway_factory or HonchoGateway.for_settings)(settings)
            try:
                _forget_in_honcho(report, settings, built, outbox, destination, rows.sessions)
            finally:
                built.close()
        failed = any(outcome not in ("accepted", "gone")
                     for outcome in report["honcho"].values())
        report["state"] = HONCHO_FAILED if failed else DONE
        OFFERS.withdraw(chat_id)
        return report
    except OutboxError as exc:
        return {"chat_id": chat_id, "error": exc.code}
    finally:
        outbox.close()


def _forget_in_honcho(report: dict[str, Any], settings: Settings, gateway: HonchoGateway,
                      outbox: Outbox, destination: str, sessions: tuple[str, ...]) -> None:
    """The chat's conclusions recorded, its sessions deleted, then what survives looked for and
    held for the user's confirmation (each search within its own deadline)."""
    recorded = _bounded(settings, lambda: leftovers.record(gateway, sessions))
    report["honcho"] = _delete_sessions(gateway, outbox, destination, sessions)
    found = recorded if isinstance(recorded, str) else _bounded(
        settings, lambda: leftovers.find(gateway, recorded, sessions))
    if isinstance(found, str):
        report["leftovers"] = {"error": found}
        return
    report["leftovers"] = found.offer()
    if found.conclusions or found.card_facts:
        leftovers.HELD.put(destination, report["chat_id"], found)


def _bounded(settings: Settings, search: Callable[[], Any]) -> Any:
    """What `search` found within the operation deadline, or the code of why not."""
    try:
        with deadline.within(settings.operation_deadline_s):
            return search()
    except HonchoRequestError as exc:
        return exc.code


def forget_leftovers(settings: Settings, chat_id: Any, *, gateway: HonchoGateway | None = None,
                     gateway_factory: Callable[[Settings], HonchoGateway] | None = None
                     ) -> dict[str, Any]:
    """Remove what a forget of `chat_id` in this process offered (the user confirmed): a JSON-safe
    report of what was removed and what could not be (held again, so a second call retries it).
    Raises ForgetRefused for a chat id that cannot be one."""
    chat_id = checked_chat_id(chat_id)
    destination = settings.destination()
    held = leftovers.HELD.take(destination, chat_id)
    if held is None:
        return {"chat_id": chat_id, "error": "nothing_offered"}
    built = gateway or (gateway_factory or HonchoGateway.for_settings)(settings)
    try:
        items = len(held.conclusions) + len({(f.observer, f.observed) for f in held.card_facts})
        with deadline.within(settings.operation_deadline_s + REMOVE_S_EACH * items):
            report = leftovers.remove(built, held)
    finally:
        if gateway is None:
            built.close()
    failed = report["not_removed"]
    if failed:
        leftovers.HELD.put(destination, chat_id, leftovers.Leftovers(
            held.recorded, tuple(c for c in held.conclusions
                                 if any(f.get("conclusion") == c.id for f in failed)),
            tuple(f for f in held.card_facts
                  if any(x.get("card") == f"{f.observer} about {f.observed}" for x in failed))))
    return {"chat_id": chat_id, **report}


def _delete_sessions(gateway: HonchoGateway, outbox: Outbox, destination: str,
                     sessions: tuple[str, ...]) -> dict[str, str]:
    """Each session's outcome: accepted, gone, or the error code (the mark stays: a later forget
    retries)."""
    outcomes: dict[str, str] = {}
    for session_id in sessions:
        try:
            outcomes[session_id] = gateway.delete_session(session_id)
        except HonchoRequestError as exc:
            outcomes[session_id] = exc.code
            continue
        chat_rows.session_deleted(outbox.db, destination, session_id)
    return outcomes


def report_text(report: dict[str, Any], item: Callable[[str], str] = str,
                itemized: bool = True) -> str:
    """A forget's report as lines for the command line and the tool (`item` shows Honcho's text;
    without `itemized`, what it left is counted, not listed)."""
    if "error" in report:
        return (f"chat {report['chat_id']}: nothing forgotten, the outbox is unusable"
                f" ({report['error']})")
    lines = [f"chat {report['chat_id']}: {report['rows_deleted']} queued or kept messages deleted"
             " from the outbox"]
    if report["waited_for"]:
        lines.append(f"waited for {report['waited_for']} messages that were being sent")
    if report["state"] == SENDING:
        lines.append(f"{report['still_sending']} messages are still being sent; nothing is sent"
                     " again, and the Honcho session is deleted when you forget the chat again")
    for session_id, outcome in report["honcho"].items():
        lines.append(f"Honcho session {session_id}: " + {
            "accepted": "deletion accepted (Honcho deletes it in the background)",
            "gone": "already gone"}.get(
                outcome, f"NOT deleted ({outcome}); forget the chat again to retry"))
    for session_id in report["shared_sessions"]:
        lines.append(f"Honcho session {session_id} is shared with other chats: left alone")
    lines.append(f"later messages of the chat go to session {report['next_session']}")
    return "\n".join(lines + offer_lines(report, item, itemized))


def offer_lines(report: dict[str, Any], item: Callable[[str], str] = str,
                itemized: bool = True) -> list[str]:
    """What a forget left in Honcho, one line each, or only their count (none when nothing was
    left)."""
    found = report.get("leftovers")
    if not found:
        return []
    if "error" in found:
        return [f"what dreams derived from it could not be looked for ({found['error']});"
                " its conclusions are gone, so they cannot be found later either"]
    conclusions, facts = found["conclusions"], found["card_facts"]
    if not conclusions and not facts:
        return []
    lines = [f"{len(conclusions)} conclusions derived from this chat and {len(facts)} card facts"
             " matching it are still in Honcho" + (" (more may exist)" if found["more"] else "")
             + (":" if itemized else ".")]
    if not itemized:
        return lines
    lines += [f"- [{c['id']}] {item(c['content'])} ({c['level']})" for c in conclusions]
    lines += [f"- card of {f['observer']} about {f['observed']}: {item(f['fact'])}"
              for f in facts]
    return lines


def leftovers_text(report: dict[str, Any], item: Callable[[str], str] = str) -> str:
    """A forget's leftovers, or their removal, as lines for the command line and the tool."""
    if "leftovers" in report:
        return "\n".join(offer_lines(report, item))
    if report.get("error") == "nothing_offered":
        return (f"chat {report['chat_id']}: nothing is waiting to be removed (offers last until"
                " Agent Zero restarts and are taken once)")
    lines = [f"chat {report['chat_id']}: removed {report['conclusions_removed']} derived"
             f" conclusions and {report['card_facts_removed']} card facts"]
    if report["conclusions_gone"]:
        lines.append(f"{report['conclusions_gone']} were already gone")
    for failed in report["not_removed"]:
        lines.append(f"NOT removed: conclusion {failed['conclusion']} ({failed['code']})"
                     if "conclusion" in failed else
                     f"NOT removed: {failed['facts']} facts of the card of {failed['card']}"
                     f" ({failed['code']})")
    if report["not_removed"]:
        lines.append("removing again retries what was not removed")
    return "\n".join(lines)


class Offers:
    """Chats the user deleted in Agent Zero, each offered once for forgetting (never forgotten
    unasked): the newest MAX_OFFERS, in this process only (a restart drops them: the offer is a
    hint, not a record)."""

    def __init__(self, limit: int = MAX_OFFERS) -> None:
        self._lock = threading.Lock()
        self._offers: BoundedMap[str, float] = BoundedMap(limit)

    def offer(self, chat_id: str, at: float) -> None:
        with self._lock:
            self._offers.put(chat_id, at)

    def withdraw(self, chat_id: str) -> bool:
        with self._lock:
            return self._offers.pop(chat_id, None) is not None

    def pending(self) -> list[dict[str, Any]]:
        """Newest first: chat id and when it was deleted (wall epoch s)."""
        with self._lock:
            return [{"chat_id": chat, "deleted_at": at}
                    for chat, at in reversed(self._offers.items())]


OFFERS = Offers()
