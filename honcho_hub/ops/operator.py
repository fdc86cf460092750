"""Operator verbs shared by the sidebar API and the command line: check, wake, drain, retry dead,
dead letters, clear cache. Each returns a JSON-safe dict and never raises on Honcho or disk trouble;
the process's parts they act on (worker, capture journal, recaller) come from the caller's Hub.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from .. import runtime
from ..delivery import lifecycle
from ..delivery.worker import DeliveryWorker, pause_reason
from ..errors import AuthError, HonchoRequestError, OutboxError
from ..gateway import deadline, queries
from ..gateway.gateway import HonchoGateway
from ..settings.config import Settings
from ..settings.hosts import in_hosted_domain, url_host
from ..settings.spec import HOSTED_MCP_URL, MODE_API_URLS
from ..storage.outbox import with_existing_outbox
from . import mcp_probe

if TYPE_CHECKING:
    from ..recall.recaller import Recaller

MAX_REQUEUE = 100
DRAIN_S = 5.0
_HOSTED_API, _HOSTED_MCP = urlsplit(MODE_API_URLS["hosted"]), urlsplit(HOSTED_MCP_URL)


def check(settings: Settings, http_client_factory: Callable[..., httpx.Client] = httpx.Client,
          monotonic: Callable[[], float] = time.monotonic,
          wall: Callable[[], float] = time.time) -> dict[str, Any]:
    """One authenticated API request, then the MCP handshake (initialize, tools/list), each within
    check_timeout_s; the key goes to the MCP URL only as `mcp_key_decision` allows.

    The API's outcome is remembered for status: until something reached the destination, health
    cannot honestly be green."""
    gateway = HonchoGateway.for_settings(settings, settings.check_timeout_s,
                                         http_client_factory=http_client_factory)
    try:
        # the whole request, however it trickles
        with deadline.within(settings.check_timeout_s, monotonic):
            api, failure = _timed(lambda: queries.workspace_metadata(gateway), monotonic)
    finally:
        gateway.close()
    runtime.record_api_check(settings.destination(), failure is None, api["error"],
                             isinstance(failure, AuthError), wall())
    return {"api": api, "mcp": _mcp_check(settings, http_client_factory, monotonic)}


def mcp_key_decision(settings: Settings) -> tuple[bool, str]:
    """Whether the MCP check may send the API key to the MCP URL, and why (a code).

    The hosted MCP server hands the key it gets to the hosted API, so a key for any other API never
    goes there, whatever `mcp_auth` says. Otherwise `always` and `never` decide; `same_deployment`
    sends it when both URLs are the hosted defaults, or the MCP URL is on the API's host (any port)
    and not plain HTTP where the API is HTTPS (the key would cross the network in clear text)."""
    if not settings.api_key():
        return False, "no_key"
    api, mcp = urlsplit(settings.api_url), urlsplit(settings.mcp_url)
    # hosts as DNS reads them: a trailing dot or another spelling is the same host
    api_host, mcp_host = url_host(settings.api_url), url_host(settings.mcp_url)
    if mcp_host is None:
        return False, "unusable_url"
    hosted_api = api.scheme == "https" and api_host == _HOSTED_API.hostname
    if in_hosted_domain(mcp_host) and not hosted_api:
        return False, "hosted_mcp"
    if settings.mcp_auth in ("always", "never"):
        return settings.mcp_auth == "always", settings.mcp_auth
    if hosted_api and (mcp.scheme, mcp_host) == (_HOSTED_MCP.scheme, _HOSTED_MCP.hostname):
        return True, "hosted"
    if api_host is None or api_host != mcp_host:
        return False, "other_host"
    if api.scheme == "https" and mcp.scheme != "https":
        return False, "insecure_mcp_url"
    return True, "same_host"


def wake(settings: Settings, worker: DeliveryWorker | None,
         start_worker: Callable[[], DeliveryWorker | None],
         enabled: Callable[[], bool] = lambda: True) -> dict[str, Any]:
    """Nudge the process's running `worker`, or start one with `start_worker` when none runs, as
    the capture hooks do: not while an update or uninstall holds the plugin's workers stopped; a
    worker started while the plugin is switched off or the API URL is unusable runs paused
    (`paused` says why) and sends once that is fixed.

    All false: an older module generation's worker is still stopping; the new one starts when it
    ends."""
    woken = False
    if worker is not None and not worker.stopping:
        woken = True
        worker.wake()
    elif not lifecycle.restart_held():
        worker = start_worker()
    reason = pause_reason(settings, enabled)
    return {"woken": woken, "started": not woken and worker is not None and worker.is_alive(),
            "held": not woken and lifecycle.restart_held(), "paused": reason[0] if reason else None}


def drain(settings: Settings, timeout_s: float = DRAIN_S, *, worker: DeliveryWorker | None,
          flush_capture: Callable[[], None],
          enabled: Callable[[], bool] = lambda: True) -> dict[str, Any]:
    """Deliver for at most `timeout_s`: through the process's running `worker`, else with one made
    for the occasion, after `flush_capture` moved what the capture journal holds into the outbox.

    Nothing is sent while `enabled()` says the plugin is switched off in Agent Zero (the command
    line, outside it, has no switch: hence the default) or the configured API URL cannot be used;
    the answer then says delivery is `paused` and why."""
    paused = pause_reason(settings, enabled)
    if paused is not None:
        return {"delivered": 0, "dead": 0, "retried": 0, "paused": paused[0],
                "pending": queue_counts(settings).get("pending", 0)}
    flush_capture()
    own = worker is None
    if worker is None:
        worker = DeliveryWorker(lambda: settings, enabled=enabled)
    try:
        moved = worker.drain(timeout_s)
    except (OutboxError, HonchoRequestError) as exc:
        return {"error": exc.code}
    finally:
        if own:
            worker.stop(timeout_s)
    return {**moved, "pending": queue_counts(settings).get("pending", 0)}


def retry_dead(settings: Settings, worker: DeliveryWorker | None,
               limit: int = MAX_REQUEUE) -> dict[str, Any]:
    """Requeue at most 100 dead letters and let the process's running `worker` probe its auth
    circuits now."""
    try:
        requeued = with_existing_outbox(
            settings, lambda box: box.requeue_dead(max(0, min(int(limit), MAX_REQUEUE))), 0)
    except OutboxError as exc:
        return {"error": exc.code}
    reset = worker.state.reset_auth_circuits() if worker is not None else 0
    if worker is not None:
        worker.wake()
    return {"requeued": requeued, "circuits_reset": reset}


def dead_letters(settings: Settings, limit: int = MAX_REQUEUE) -> dict[str, Any]:
    """Ids, sessions, error codes and attempts of dead letters; no content."""
    try:
        return {"dead": with_existing_outbox(settings, lambda box: box.dead_letters(limit), [])}
    except OutboxError as exc:
        return {"error": exc.code}


def clear_cache(settings: Settings, recaller: Recaller) -> dict[str, Any]:
    """Drop the packs of the process's `recaller` and, through the shared marker, of every process
    using this outbox folder."""
    return {"cleared": recaller.clear_cache(settings)}


def queue_counts(settings: Settings) -> dict[str, int]:
    try:
        return with_existing_outbox(settings, lambda box: box.stats()["counts"], {})
    except OutboxError:
        return {}


def _timed(request: Callable[[], Any],
           monotonic: Callable[[], float]) -> tuple[dict[str, Any], HonchoRequestError | None]:
    """The check's result, and the error when it failed."""
    start = monotonic()
    try:
        request()
        return {"ok": True, "status": 200, "latency_ms": _ms(monotonic() - start),
                "error": None}, None
    except HonchoRequestError as exc:
        status = int(exc.code.rsplit("_", 1)[-1]) if exc.code.rsplit("_", 1)[-1].isdigit() else None
        return {"ok": False, "status": status, "latency_ms": _ms(monotonic() - start),
                "error": exc.code}, exc


def _mcp_check(settings: Settings, http_client_factory: Callable[..., httpx.Client],
               monotonic: Callable[[], float]) -> dict[str, Any]:
    """The MCP handshake's outcome as the check reports it: `ok` unless something went wrong (an
    MCP server that answers 401 to a check without the key is reachable and fine; a self-hosted
    deployment without an MCP URL is `not_configured`, and nothing is sent), `reachable` when an
    HTTP answer came, what was found, whether the key went and why, and a one-line `summary`."""
    start = monotonic()
    if not settings.mcp_url_problem and not settings.mcp_configured:
        found = mcp_probe.Handshake("not_configured", None, None)
        send, why = False, "not_configured"
    elif settings.mcp_url_problem:
        found = mcp_probe.Handshake("failed", None, "unusable_url")
        send, why = False, "unusable_url"
    else:
        send, why = mcp_key_decision(settings)
        found = mcp_probe.handshake(settings.mcp_url, settings.api_key() if send else None,
                                    settings.check_timeout_s, http_client_factory, monotonic)
    result = {"ok": found.error is None, "reachable": found.status is not None,
              "latency_ms": _ms(monotonic() - start), "key_sent": send, "key_decision": why,
              **found.as_dict()}
    return {**result, "summary": _mcp_summary(result, settings.mcp_url_source)}


def _mcp_summary(result: dict[str, Any], mcp_url_source: str) -> str:
    """One line for people: what the handshake found, or its code."""
    if result["state"] == "ready":
        server = " ".join(part for part in (result["server_name"], result["server_version"])
                          if part)
        tools = f"{'' if result['tools_complete'] else 'at least '}{result['tool_count']} tools"
        key = f"key {'sent' if result['key_sent'] else 'not sent'}: {result['key_decision']}"
        return (f"ok: {server or 'an unnamed server'}, protocol {result['protocol_version']},"
                f" {tools} ({key})")
    if result["state"] == "auth_required":
        if result["key_sent"]:
            return f"reachable, key refused ({result['error']})"
        return f"reachable, auth required (key not sent: {result['key_decision']})"
    if result["state"] == "not_configured":
        return f"not configured ({mcp_url_source})"
    return f"FAILED ({result['error']})"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
