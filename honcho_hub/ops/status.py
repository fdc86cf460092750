"""One status, shared by the sidebar API, the tool and the command line.

Gathering the parts (I/O, never raises), building the document (pure) and its text are kept apart;
no credential, message content or outbox path in it. See docs/architecture.md, Operations.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..capture import kept
from ..chats.rules import Remember
from ..errors import HonchoRequestError, OutboxError
from ..settings.config import Settings
from ..settings.hosts import is_hosted_url
from ..storage import expiries, memory_log, processes
from ..storage.expiries import ExpiryState
from ..storage.outbox import Outbox, with_existing_outbox
from ..storage.processes import SharedCircuit
from .running_code import RunningCode, restart_sentence

if TYPE_CHECKING:
    from ..runtime import ProcessState

STALE_QUEUE_S = 600.0  # a pending event older than this makes health amber
PURGED_REASON = "purged: uninstall the plugin now, or resume memory"
MAX_LISTED_PROCESSES = 8  # worker processes status_text names; the document lists every shown one
# What status_text says instead of a setting's value that the host masks as a secret: the value
# would read `§§secret(NAME)` in Agent Zero.
IN_SECRETS = "set in secrets"


@dataclass
class StatusParts:
    """The live pieces status is made of; every field has a safe empty value."""

    session_id: str | None = None
    scope_id: str | None = None
    # session -> pending/completed/failed
    scope_backfill: dict[str, str] = field(default_factory=dict)
    scope_problem: str | None = None
    queue_counts: dict[str, int] = field(default_factory=dict)
    dead_by_code: dict[str, int] = field(default_factory=dict)
    oldest_pending_captured_at: float | None = None
    next_attempt_at: float | None = None
    outbox_problem: str | None = None  # outbox_corrupt, outbox_unavailable…
    in_journal: int = 0  # accepted messages the capture journal holds, not yet in the outbox
    capture_counters: dict[str, int] = field(default_factory=dict)
    worker: dict[str, Any] = field(
        default_factory=lambda: {"state": "stopped", "metrics": {}, "circuits": {}})
    cache_entries: int = 0
    cache_counters: dict[str, int] = field(default_factory=dict)
    dialectic_counters: dict[str, int] = field(default_factory=dict)
    # How the latest loads a turn waited for ended (hit, fresh, timeout, error), oldest first.
    recent_recalls: list[str] = field(default_factory=list)
    # Whether Honcho is still deriving from what was delivered for the session (recaller.freshness).
    memory: dict[str, Any] = field(
        default_factory=lambda: {"state": "fresh", "pending": 0, "checked_age_s": None})
    # ok_at, failed_at, code, auth of the last checks
    api_check: dict[str, Any] = field(default_factory=dict)
    # memory_log.summary: counts, latest ids and times
    memory_writes: dict[str, Any] = field(default_factory=dict)
    # expiries.counts: the destination's memory lifetimes by state
    memory_expiry: dict[str, int] = field(default_factory=dict)
    # The server's configuration of the session's configured peers (gateway.session_peer_flags:
    # peer -> flags, None when it holds none, absent when unread); None when status did not ask.
    session_peers: dict[str, dict[str, bool | None] | None] | None = None
    # The heartbeat rows of the processes that drain the outbox (processes.listed, with
    # `this_process`) and the unreachable circuit they share for the destination.
    processes: list[dict[str, Any]] = field(default_factory=list)
    shared_circuit: SharedCircuit | None = None
    honcho_timed_out: bool = False  # the reads of Honcho above ended at their deadline
    # The chats this process has seen, by kind (chats.rules.chat_kind), and the current chat's kind
    # and sender key (what `sender_peers` maps), from the adapter.
    chats_seen: dict[str, int] = field(default_factory=dict)
    chat_kind: str | None = None
    chat_sender: str | None = None
    # The host's open chats by "Don't remember this chat" state (Remember's values), from the
    # adapter; status shows the states that are not remembered.
    not_remembered: dict[str, int] = field(default_factory=dict)
    # The sidebar's purge holds the plugin in this process (Hub.purged): nothing is captured.
    purged: bool = False
    # The newest upgrade from the Hub's honcho 1.x (settings.upgrade.last_upgrade), from the
    # adapter, which knows where the plugin's config.json is.
    upgrade: dict[str, Any] | None = None
    # Whether this process runs the plugin's code on disk (running_code); None when not read.
    code: RunningCode | None = None


def gather_parts(settings: Settings, state: ProcessState, *, session_id: str | None = None,
                 scope_id: str | None = None, outbox_problem: str | None = None, worker: Any = None,
                 recaller: Any = None,
                 scope_backfill: Callable[[str], dict[str, str]] | None = None,
                 session_peers: Callable[[str, Sequence[str]], dict] | None = None,
                 deadline_s: float | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> StatusParts:
    """Status's pieces from this process (the Hub passes what it holds; `state` is the process
    state): capture, outbox counters, worker, recall, with `scope_backfill` the scope's progress
    from Honcho, and with `session_peers` (gateway.session_peer_flags) the server's configuration
    of the session's peers; with `deadline_s`, those requests end together that long from now (on
    `monotonic`). Never raises."""
    with state.lock:
        api_check = dict(state.api_checks.get(settings.destination(), {}))
        journal = kept.JOURNAL.of(state)
        waiting = len(journal) if journal is not None else 0
    parts = StatusParts(session_id=session_id, scope_id=scope_id, in_journal=waiting,
                        api_check=api_check, capture_counters=kept.COUNTERS.of(state).snapshot(),
                        outbox_problem=outbox_problem)
    def read(box: Outbox) -> tuple:
        return (box.stats(), memory_log.summary(box.db), processes.listed(box.db),
                processes.shared_circuit(box.db, settings.destination()),
                expiries.counts(box.db, settings.destination()))

    try:
        (stats, parts.memory_writes, rows, parts.shared_circuit,
         parts.memory_expiry) = with_existing_outbox(settings, read, (None, {}, [], None, {}))
    except OutboxError as exc:
        parts.outbox_problem = parts.outbox_problem or exc.code
        stats = None
    else:
        here = (os.getpid(), processes.host_name())
        parts.processes = [{**row, "this_process": (row["pid"], row["host"]) == here}
                           for row in rows]
    if stats is not None:
        parts.queue_counts, parts.dead_by_code = stats["counts"], stats["dead_by_code"]
        parts.oldest_pending_captured_at = stats["oldest_pending_captured_at"]
        parts.next_attempt_at = stats["next_attempt_at"]
    if worker is not None:
        parts.worker = worker.state.snapshot()
    if recaller is not None:
        parts.cache_entries, parts.scope_problem = recaller.cache_entries(), recaller.scope_problem
        parts.cache_counters = recaller.cache_counters()
        parts.dialectic_counters = recaller.dialectic_counters()
        parts.recent_recalls = recaller.recent_loads()
        if session_id:
            parts.memory = recaller.freshness(settings, session_id)
    if deadline_s is None:
        _read_honcho(parts, settings, scope_backfill, session_peers)
        return parts
    from ..gateway import deadline  # here: the light status must work without httpx installed

    with deadline.within(deadline_s, monotonic):
        _read_honcho(parts, settings, scope_backfill, session_peers)
        parts.honcho_timed_out = deadline.passed()
    return parts


def _read_honcho(parts: StatusParts, settings: Settings,
                 scope_backfill: Callable[[str], dict[str, str]] | None,
                 session_peers: Callable[[str, Sequence[str]], dict] | None) -> None:
    """The parts of status that ask Honcho: the scope's progress, the server's flags of the
    session's peers."""
    if scope_backfill is not None and parts.scope_id:
        try:
            parts.scope_backfill = scope_backfill(parts.scope_id)
        except HonchoRequestError as exc:
            parts.scope_problem = (parts.scope_problem
                                   or f"scope status unavailable: {exc.code}")
    if session_peers is not None and parts.session_id:
        try:
            peers = [settings.user_peer_id, settings.agent_peer_id]
            parts.session_peers = dict(session_peers(parts.session_id, peers))
        except Exception:  # the reader promises not to raise; status stays whole if one does
            parts.session_peers = {}


def build_status(settings: Settings, parts: StatusParts, now: float) -> dict[str, Any]:
    """The status document (stable keys; JSON-safe)."""
    metrics = parts.worker.get("metrics", {})
    circuit = parts.worker.get("circuits", {}).get(settings.destination())
    counts = {state: parts.queue_counts.get(state, 0)
              for state in ("pending", "leased", "delivered", "dead")}
    status = {
        # An unusable URL is shown as null beside the name of where it was given, never as its
        # stand-in.
        # The deployment in effect (the API URL's, whatever endpoint_mode says); no MCP URL (null)
        # when a self-hosted deployment has none set. Each with where it comes from.
        "endpoints": {"mode": settings.deployment, "mode_source": settings.deployment_source,
                      "api_url": None if settings.api_url_problem else settings.api_url,
                      "api_url_source": settings.api_url_source,
                      "mcp_url": (settings.mcp_url if settings.mcp_configured
                                  and not settings.mcp_url_problem else None),
                      "mcp_url_source": settings.mcp_url_source,
                      "api_url_problem": settings.api_url_problem,
                      "mcp_url_problem": settings.mcp_url_problem,
                      "api_reach": _reach(now, metrics, parts.api_check)},
        "identity": {"workspace_id": settings.workspace_id, "user_peer_id": settings.user_peer_id,
                     "agent_peer_id": settings.agent_peer_id, "session_id": parts.session_id,
                     "session_strategy": settings.session_strategy,
                     "observation": _observation(settings, parts.session_peers,
                                                 parts.honcho_timed_out),
                     "api_key_configured": settings.has_api_key},
        "capture": {"enabled": settings.capture_enabled, "purged": parts.purged,
                    "scheduler_chats": settings.capture_scheduler_chats,
                    "outbox_problem": parts.outbox_problem,
                    # Too large to redact on the hook: not on disk until the writer redacted and
                    # stored it.
                    "large_messages_accepted_in_memory":
                        parts.capture_counters.get("accepted_in_memory", 0)},
        "recall": {"enabled": settings.recall_enabled, "mode": settings.recall_mode,
                   "context_cadence": settings.context_cadence,
                   "cache_entries": parts.cache_entries,
                   "cache": {name: parts.cache_counters.get(name, 0)
                             for name in ("hits", "loads", "reused", "stale_served", "timeouts",
                                          "errors")},
                   "recent": {"loads": len(parts.recent_recalls),
                              "timeouts": parts.recent_recalls.count("timeout")},
                   "cache_ttl_s": settings.cache_ttl_s,
                   "max_context_tokens": settings.max_context_tokens,
                   "agent_representation": settings.include_agent_representation,
                   "memory": parts.memory,
                   "dialectic": {"enabled": settings.dialectic_enabled,
                                 "cadence": settings.dialectic_cadence,
                                 "depth": settings.dialectic_depth,
                                 **{name: parts.dialectic_counters.get(name, 0)
                                    for name in ("started", "done", "failed", "busy", "running")}}},
        "scope": {"strategy": settings.scope_strategy, "current": parts.scope_id,
                  "backfill": _backfill(parts.scope_backfill), "problem": parts.scope_problem},
        "queue": {**counts, "dead_by_code": dict(parts.dead_by_code),
                  "in_journal": parts.in_journal,
                  "oldest_pending_age_s": _age(now, parts.oldest_pending_captured_at),
                  "next_attempt_in_s": _until(now, parts.next_attempt_at)},
        "worker": {"state": parts.worker.get("state", "stopped"),
                   "circuit": {"kind": circuit["kind"], "reason": circuit["code"],
                               "retry_in_s": _until(now, circuit["open_until"])}
                              if circuit else None,
                   "last_success_age_s": _age(now, metrics.get("last_success_at")),
                   "last_error_code": metrics.get("last_error_code"),
                   "last_error_age_s": _age(now, metrics.get("last_error_at")),
                   "last_latency_ms": _ms(metrics.get("last_latency_s")),
                   "sent": metrics.get("sent", 0), "reconciled": metrics.get("reconciled", 0),
                   "reconcile_failures": metrics.get("reconcile_failures", 0),
                   "failed": metrics.get("failed", 0), "dead_lettered": metrics.get("dead", 0)},
        "processes": _processes(parts, now),
        # The chats seen, by kind, and the shown chat's; the open chats the user asked us not to
        # remember ("Don't remember this chat"), by state.
        "chats": {"seen": dict(sorted(parts.chats_seen.items())), "kind": parts.chat_kind,
                  "sender": parts.chat_sender,
                  "not_remembered": {state.value: parts.not_remembered.get(state.value, 0)
                                     for state in (Remember.NO_CAPTURE, Remember.OFF)}},
        # The memory tool's own writes, kept in the outbox: counts, ids and ages only, never their
        # text.
        "memory_writes": {"remembered": parts.memory_writes.get("remembered", 0),
                          "forgotten": parts.memory_writes.get("forgotten", 0),
                          "latest": [{"id": w["id"], "kind": w["kind"],
                                      "age_s": _age(now, w["at"])}
                                     for w in parts.memory_writes.get("latest", [])]},
        # Memories remembered for a while: lifetimes still running, ended in a delete, or whose
        # delete Honcho kept refusing.
        "memory_expiry": {state.value: parts.memory_expiry.get(state.value, 0)
                          for state in ExpiryState},
        "refusals": {"queue_full": parts.capture_counters.get("refused_full", 0),
                     "journal_full": parts.capture_counters.get("refused_journal_full", 0),
                     "redaction_failed": parts.capture_counters.get("redaction_failed", 0),
                     "journal_unavailable": parts.capture_counters.get("journal_unavailable", 0),
                     "handed_off": parts.capture_counters.get("handed_off", 0)},
        "upgrade": _upgrade(parts.upgrade, now),
        # The plugin's version running and on disk, and whether Agent Zero must restart to run
        # what an update put on disk; with the sentence that tells the user so.
        "code": _code(parts.code),
    }
    status["health"], status["health_reasons"] = _health(settings, status)
    return status


def status_text(status: dict[str, Any], masked: Callable[[str], bool] = lambda value: False
                ) -> str:
    """A compact, human-readable rendering for the tool and the terminal. `masked(value)`: whether
    the host will mask that value where the text is shown (Agent Zero replaces a secret's value
    with its alias in every tool result); such a setting is named as kept in secrets instead."""
    q, w, i, m = status["queue"], status["worker"], status["identity"], status["memory_writes"]

    def shown(value: str) -> str:
        return IN_SECRETS if masked(value) else value

    scope = status["scope"]["current"]
    lines = [
        f"Honcho memory: {status['health'].upper()}"
        + (f" ({'; '.join(status['health_reasons'])})" if status["health_reasons"] else ""),
        f"{_api_text(status['endpoints']['api_url'], masked)} · workspace"
        f" {shown(i['workspace_id'])} · user {shown(i['user_peer_id'])}"
        f" · agent {shown(i['agent_peer_id'])}"
        f" · key {'set' if i['api_key_configured'] else 'missing'}",
        f"Capture {'on' if status['capture']['enabled'] else 'off'}"
        f" · recall {status['recall']['mode']}"
        f" · scope {shown(scope) if scope else 'none'} ({status['scope']['strategy']})",
        _memory_line(status["recall"]["memory"]),
        *_dialectic_lines(status["recall"]["dialectic"]),
        *_sessions_lines(i),
        f"Queue: {q['pending']} pending, {q['leased']} sending, {q['dead']} dead,"
        f" {q['in_journal']} in the journal"
        + (f"; oldest {q['oldest_pending_age_s']:.0f} s"
           if q["oldest_pending_age_s"] is not None else ""),
        f"Worker {w['state']}: {w['sent']} sent, {w['failed']} failed"
        + (f"; last error {w['last_error_code']}" if w["last_error_code"] else ""),
        *_processes_lines(status["processes"]),
        *_not_remembered_lines(status["chats"]["not_remembered"]),
        *_upgrade_lines(status["upgrade"]),
        f"Memory tool: {m['remembered']} remembered, {m['forgotten']} forgotten"
        + (f"; latest {m['latest'][0]['kind']} {m['latest'][0]['id']}"
           f" {m['latest'][0]['age_s']:.0f} s ago" if m["latest"] else ""),
        *_expiry_lines(status["memory_expiry"]),
    ]
    return "\n".join(lines)


def _api_text(api_url: str | None, masked: Callable[[str], bool]) -> str:
    """The API URL in effect, or, when the host masks it, whether it is hosted Honcho."""
    if not api_url:
        return "API unusable"
    if masked(api_url):
        return f"API URL {IN_SECRETS} ({'hosted' if is_hosted_url(api_url) else 'self-hosted'})"
    return f"API {api_url}"


def _upgrade(upgrade: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
    if upgrade is None:
        return None
    return {"moved": list(upgrade["moved"]), "set_aside": list(upgrade["set_aside"]),
            "set_aside_count": upgrade["set_aside_count"], "record": upgrade["record"],
            "age_s": _age(now, upgrade["at"])}


def _upgrade_lines(upgrade: dict[str, Any] | None) -> list[str]:
    if upgrade is None:
        return []
    aside = upgrade["set_aside"]
    more = upgrade["set_aside_count"] - len(aside)
    return [f"Upgraded from honcho 1.x {upgrade['age_s']:.0f} s ago: moved"
            f" {', '.join(upgrade['moved']) or 'nothing'}"
            + (f"; set aside {', '.join(aside)}{f' and {more} more' if more > 0 else ''}"
               f" (kept in {upgrade['record']})" if aside else "")]


def _expiry_lines(counts: dict[str, int]) -> list[str]:
    """One line once a memory was remembered for a while, none before."""
    if not any(counts.values()):
        return []
    return [f"Expiring memories: {counts['pending']} pending, {counts['deleted']} expired and"
            f" deleted, {counts['failed']} failed"]


def _not_remembered_lines(counts: dict[str, int]) -> list[str]:
    """One line when some chat is not remembered, none otherwise."""
    if not any(counts.values()):
        return []
    return [f"Chats not remembered: {counts[Remember.NO_CAPTURE.value]} not captured,"
            f" {counts[Remember.OFF.value]} neither captured nor recalled"]


def _code(code: RunningCode | None) -> dict[str, Any] | None:
    if code is None:
        return None
    return {"running_version": code.running_version, "disk_version": code.disk_version,
            "changed_files": code.changed_files, "restart_needed": code.restart_needed,
            "restart": restart_sentence(code)}


def _processes(parts: StatusParts, now: float) -> dict[str, Any]:
    """The processes that drain the outbox, newest beat first (an expired row is not shown), and
    the circuit they share: ids, times, states, codes and counts only."""
    workers = []
    for row in sorted(parts.processes, key=lambda r: r["beat_at"], reverse=True):
        if processes.expired(row, now):
            continue
        kind = row["circuit_kind"]
        workers.append({
            "pid": row["pid"], "host": row["host"], "this_process": bool(row.get("this_process")),
            "state": row["state"], "reason": row["reason"], "stale": processes.is_stale(row, now),
            "stale_after_s": processes.stale_after_s(row),
            "started_age_s": _age(now, row["started_at"]), "beat_age_s": _age(now, row["beat_at"]),
            "circuit": {"kind": kind, "reason": row["circuit_code"],
                        "retry_in_s": _until(now, row["circuit_open_until"])}
                       if kind else None,
            "last_success_age_s": _age(now, row["last_success_at"]),
            "last_error_code": row["last_error_code"],
            "last_error_age_s": _age(now, row["last_error_at"]), "sent": row["sent"],
            "reconciled": row["reconciled"], "failed": row["failed"], "dead_lettered": row["dead"]})
    stale = sum(1 for w in workers if w["stale"])
    shared = parts.shared_circuit
    return {"workers": workers, "live": len(workers) - stale, "stale": stale,
            "shared_circuit": {"reason": shared.code,
                               "retry_in_s": _until(now, shared.open_until),
                               "failures": shared.failures} if shared else None}


def _processes_lines(section: dict[str, Any]) -> list[str]:
    def text(w: dict[str, Any]) -> str:
        circuit = f" (circuit {w['circuit']['kind']})" if w["circuit"] else ""
        here = " (this process)" if w["this_process"] else ""
        return (f"pid {w['pid']}{here} on {w['host']}"
                f" {'stale' if w['stale'] else w['state']}{circuit},"
                f" beat {w['beat_age_s']:.0f} s ago, {w['sent']} sent")

    workers = section["workers"]
    lines = []
    if workers:
        more = len(workers) - MAX_LISTED_PROCESSES
        lines.append("Workers of this outbox: "
                     + "; ".join(text(w) for w in workers[:MAX_LISTED_PROCESSES])
                     + (f"; and {more} more" if more > 0 else ""))
    shared = section["shared_circuit"]
    if shared:
        lines.append(f"Honcho unreachable for every process ({shared['reason']}):"
                     f" next probe in {shared['retry_in_s']:.0f} s")
    return lines


def _observation(settings: Settings, held: dict[str, dict[str, bool | None] | None] | None,
                 timed_out: bool = False) -> dict[str, Any]:
    """The observation preset and its flags by role; with the session read, the server's flags by
    role (None: not in the session on the server yet; a role left out: not read, `timed_out` when
    status's deadline ended the read). Honcho keeps the configuration a session's peer already has,
    so where the server holds other flags, the server's win."""
    configured = {role: settings.observation_of(role) for role in ("user", "agent")}
    server: dict[str, dict[str, bool | None] | None] | None = None
    wins = False
    if held is not None:
        peers = {"user": settings.user_peer_id, "agent": settings.agent_peer_id}
        server = {role: held[peer] for role, peer in peers.items() if peer in held}
        wins = any(flags is not None and flags != configured[role]
                   for role, flags in server.items())
    return {"preset": settings.observation, "configured": configured, "server": server,
            "server_wins": wins,
            "timed_out": timed_out and held is not None and len(server or {}) < 2}


def _memory_line(memory: dict[str, Any]) -> str:
    if memory["state"] == "fresh":
        return "Memory is fresh"
    if memory.get("checked_age_s") is None:
        return "Memory is deriving (not checked yet)"
    return (f"Memory is deriving ({memory['pending']} pending, last checked"
            f" {memory['checked_age_s']} s ago)")


def _dialectic_lines(dialectic: dict[str, Any]) -> list[str]:
    if not dialectic["enabled"]:
        return []
    return [f"Dialectic every {dialectic['cadence']} turns, depth {dialectic['depth']}:"
            f" {dialectic['done']} notes, {dialectic['failed']} failed,"
            f" {dialectic['running']} running"]


def _sessions_lines(identity: dict[str, Any]) -> list[str]:
    observation, session_id = identity["observation"], identity["session_id"]
    lines = [f"Sessions {identity['session_strategy']} · observation {observation['preset']}: "
             + flags_text(observation["configured"])]
    server = observation["server"]
    if server is None or not session_id:
        return lines
    if not server:
        lines.append(f"Session {session_id} on the server: not read"
                     + (" (timed out: Honcho answered too slowly)"
                        if observation["timed_out"] else ""))
    elif len(server) == 2 and all(flags is None for flags in server.values()):
        lines.append(f"Session {session_id} is not on the server yet: created with these flags")
    else:
        lines.append(f"Session {session_id} on the server: {flags_text(server)} — "
                     + ("the server's configuration wins" if observation["server_wins"]
                        else "as configured"))
    return lines


def flags_text(by_role: dict[str, dict[str, bool | None] | None]) -> str:
    """Each role's flags; a role the server holds none for is not in the session yet, one missing
    was not read."""
    def word(value: bool | None) -> str:
        return "default" if value is None else "on" if value else "off"

    def text(role: str) -> str:
        if role not in by_role:
            return f"{role} not read"
        flags = by_role[role]
        if flags is None:
            return f"{role} not in the session yet"
        return f"{role} me {word(flags['observe_me'])}, others {word(flags['observe_others'])}"

    return "; ".join(text(role) for role in ("user", "agent"))


def _reach(now: float, metrics: dict[str, Any], check: dict[str, Any]) -> dict[str, Any]:
    """Whether this process reached the API: the newest of the worker's sends and the checks
    decides."""
    successes = [t for t in (metrics.get("last_success_at"), check.get("ok_at")) if t is not None]
    failures = [(at, code, auth) for at, code, auth in (
        (metrics.get("last_error_at"), metrics.get("last_error_code"), False),
        (check.get("failed_at"), check.get("code"), bool(check.get("auth")))) if at is not None]
    last_ok = max(successes, default=None)
    failed_at, code, auth = max(failures, key=lambda f: f[0], default=(None, None, False))
    if last_ok is None and failed_at is None:
        state = "not_yet"
    elif failed_at is not None and (last_ok is None or failed_at > last_ok):
        state = "failed"
    else:
        state = "ok"
    return {"state": state, "last_ok_age_s": _age(now, last_ok),
            "last_failure_age_s": _age(now, failed_at),
            "last_failure": code if state == "failed" else None,
            "refused_key": state == "failed" and auth}


def _health(settings: Settings, s: dict[str, Any]) -> tuple[str, list[str]]:
    red, amber = [], []
    if s["capture"]["purged"]:
        amber.append(PURGED_REASON)
    reach = s["endpoints"]["api_reach"]
    if settings.api_url_problem:
        red.append(f"{settings.api_url_problem};"
                   " memory is neither sent nor recalled until it is fixed")
    if settings.mcp_url_problem:
        red.append(f"{settings.mcp_url_problem}; fix it to use Honcho's MCP server")
    # Hosted Honcho always needs a key; a self-hosted server may run without auth.
    if not s["identity"]["api_key_configured"] and is_hosted_url(settings.api_url):
        red.append("no API key: set HONCHO_API_KEY under Settings → Secrets")
    if s["capture"]["outbox_problem"]:
        red.append(f"outbox {s['capture']['outbox_problem']}")
    circuit, shared = s["worker"]["circuit"], s["processes"]["shared_circuit"]
    if circuit and circuit["kind"] in ("auth", "sdk_missing"):
        red.append(f"delivery paused: {circuit['reason']}")
    elif circuit or shared:  # this process's, or the one another process of the outbox opened
        amber.append(f"Honcho unreachable ({(circuit or shared)['reason']})")
    elif reach["state"] == "failed":
        (red if reach["refused_key"] else amber).append(
            f"last request to Honcho failed ({reach['last_failure']})")
    draining = any(not w["stale"] and w["state"] != "paused" for w in s["processes"]["workers"])
    if s["worker"]["state"] == "stopped" and s["queue"]["pending"] and not draining:
        amber.append("worker stopped with events pending")
    if s["queue"]["dead"]:
        codes = ", ".join(f"{n} {code}"
                          for code, n in sorted(s["queue"]["dead_by_code"].items(), key=str))
        amber.append(f"{s['queue']['dead']} dead letters" + (f" ({codes})" if codes else ""))
    age = s["queue"]["oldest_pending_age_s"]
    if age is not None and age > STALE_QUEUE_S:
        amber.append("queue is not draining")
    if s["refusals"]["journal_unavailable"]:
        red.append("messages refused: no folder for the capture journal")
    if any(s["refusals"][k] for k in ("queue_full", "journal_full", "redaction_failed")):
        amber.append("messages were refused")
    if s["scope"]["problem"]:
        amber.append(s["scope"]["problem"])
    if s["code"] and s["code"]["restart"]:
        amber.append(s["code"]["restart"])
    if red or amber:
        # The purge's reason first (the line shows the first): what the user did last, and what
        # to do next.
        return ("red" if red else "amber"), sorted(red + amber, key=lambda r: r != PURGED_REASON)
    if reach["state"] == "not_yet":
        return "neutral", ["Honcho not yet reached"]
    return "green", []


def _backfill(jobs: dict[str, str]) -> dict[str, int]:
    return {state: sum(1 for v in jobs.values() if v == state)
            for state in ("pending", "completed", "failed")}


def _age(now: float, then: float | None) -> float | None:
    return None if then is None else round(max(0.0, now - then), 1)


def _until(now: float, then: float | None) -> float | None:
    return None if then is None else round(max(0.0, then - now), 1)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)
