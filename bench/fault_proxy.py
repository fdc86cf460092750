"""A fault-injecting loopback HTTP proxy in front of a Honcho API, for bench/faults.py.

Every request that reaches the proxy gets one seeded random draw, in arrival order, that picks its
fate:

- `http_503`: answered 503 without forwarding (the server never sees it);
- `reset_before`: the client connection is closed without forwarding and without an answer;
- `reset_after`: forwarded, the server's full answer read, then the client connection closed without
  an answer (the server did the work; the client never hears of it);
- `http_429`: answered 429 with `Retry-After: 1` without forwarding;
- otherwise forwarded and answered as the server answered.

The proxy keeps one record per request (route, session, fault, the event ids of a message add, the
server's status, whether the answer reached the client socket), so a run can be explained
afterwards. A caller may arm an action (bench/faults.py kills the worker process) to run on the next
request about to be answered, after the server answered it.

    proxy = FaultProxy("http://127.0.0.1:8000", DEFAULT_MIX, seed=1)
    ...  # point clients at proxy.url
    proxy.close()
"""

from __future__ import annotations

import json
import random
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

FAULT_KINDS = ("http_503", "reset_before", "reset_after", "http_429")
NOT_FORWARDED = ("http_503", "http_429", "reset_before")
DEFAULT_MIX = {"http_503": 0.05, "reset_before": 0.05, "reset_after": 0.05, "http_429": 0.03}
RETRY_AFTER_S = 1
FORWARD_TIMEOUT_S = 60.0  # one upstream request; the clients' own timeouts are shorter
IDLE_CONNECTION_S = 120.0  # a keep-alive connection with no request for this long is closed

JSON = {"Content-Type": "application/json"}

_WS = r"^/v3/workspaces/[^/]+"
_SID = r"/sessions/(?P<sid>[^/]+)"
# (method, path pattern, route name); the first match names the request.
ROUTES = (
    ("POST", _WS + _SID + r"/messages/list$", "message_list"),
    ("POST", _WS + _SID + r"/messages$", "message_add"),
    ("POST", _WS + _SID + r"/peers$", "session_peers"),
    ("POST", _WS + r"/sessions$", "session"),
    ("POST", _WS + r"/peers$", "peer"),
    ("POST", r"^/v3/workspaces$", "workspace"),
    ("POST", _WS + r"/scopes", "scope"),
)
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                         "trailer", "upgrade", "host", "content-length", "accept-encoding"})


def route_of(method: str, path: str) -> tuple[str, str | None]:
    """(route name, session id or None) of a request; 'other' when no route matches."""
    for verb, pattern, name in ROUTES:
        match = re.match(pattern, path)
        if verb == method and match:
            return name, match.groupdict().get("sid")
    return "other", None


@dataclass
class ProxiedRequest:
    """What happened to one request that reached the proxy."""

    seq: int  # arrival order, from 0
    route: str
    session_id: str | None
    fault: str | None  # one of FAULT_KINDS, or None when passed through
    event_ids: tuple[str, ...] = ()  # metadata.event_id of each message of a message add
    upstream_status: int | None = None  # the server's status when forwarded and answered
    upstream_error: str | None = None  # why forwarding failed (the client then got a 502)
    answered: bool = False  # the proxy's answer was written to the client's socket
    # an armed action (a kill of the client) ran on it: the connection was then closed
    killed: bool = False

    @property
    def stored(self) -> bool:
        """A message add the server accepted (whether or not the client heard of it)."""
        return (self.route == "message_add" and self.upstream_status is not None
                and 200 <= self.upstream_status < 300)


class FaultProxy:
    """A running proxy on 127.0.0.1; `url` is its base URL. Stop it with `close()`."""

    def __init__(self, upstream_url: str, mix: dict[str, float], seed: int,
                 delay_s: float = 0.0) -> None:
        unknown = set(mix) - set(FAULT_KINDS)
        if unknown or sum(mix.values()) > 1:
            raise ValueError(f"bad fault mix: {mix}")
        self.upstream_url = upstream_url.rstrip("/")
        self.mix = dict(mix)
        self.delay_s = delay_s  # added to every answer: a server that far away
        self.records: list[ProxiedRequest] = []
        self._lock = threading.Lock()
        self._armed: tuple[Callable[[ProxiedRequest], None], str | None] | None = None
        self._rng = random.Random(seed)
        self._upstream = httpx.Client(base_url=self.upstream_url, timeout=FORWARD_TIMEOUT_S)
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, close the listening socket and the upstream client; idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()
        self._upstream.close()

    def arrived(self, route: str, session_id: str | None,
                event_ids: tuple[str, ...]) -> ProxiedRequest:
        """Record a request and draw its fate, under one lock so draws follow arrival order."""
        with self._lock:
            draw, fault, edge = self._rng.random(), None, 0.0
            for kind in FAULT_KINDS:
                edge += self.mix.get(kind, 0.0)
                if draw < edge:
                    fault = kind
                    break
            record = ProxiedRequest(len(self.records), route, session_id, fault, event_ids)
            self.records.append(record)
            return record

    def arm(self, action: Callable[[ProxiedRequest], None], route: str | None = None) -> None:
        """Run `action(record)` once, on the next request (of `route`, if given) about to be
        answered or reset: after the server answered it when it was forwarded, before the client
        hears anything."""
        with self._lock:
            self._armed = (action, route)

    def disarm(self) -> bool:
        """Cancel an armed action; False when a request already took it."""
        with self._lock:
            armed, self._armed = self._armed, None
            return armed is not None

    def about_to_answer(self, record: ProxiedRequest) -> bool:
        """Run the armed action if it wants this request; True when it ran."""
        with self._lock:
            armed = self._armed
            if armed is None or armed[1] not in (None, record.route):
                return False
            self._armed = None
        record.killed = True
        armed[0](record)
        return True

    def forward(self, method: str, path: str, headers: dict[str, str],
                body: bytes) -> httpx.Response:
        kept = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
        kept["accept-encoding"] = "identity"
        return self._upstream.request(method, path, headers=kept, content=body)


def summarize(records: list[ProxiedRequest]) -> dict:
    """Requests and injected faults of `records`: totals per kind, per route, and upstream
    failures."""
    faults = Counter(r.fault for r in records if r.fault)
    by_route: dict[str, Counter] = {}
    for r in records:
        if r.fault:
            by_route.setdefault(r.route, Counter())[r.fault] += 1
    return {"requests": len(records),
            "requests_by_route": dict(Counter(r.route for r in records)),
            "faults_injected": {kind: faults.get(kind, 0) for kind in FAULT_KINDS},
            "faults_by_route": {route: dict(kinds) for route, kinds in sorted(by_route.items())},
            "upstream_errors": sum(1 for r in records if r.upstream_error)}


def _event_ids(body: bytes) -> tuple[str, ...]:
    try:
        messages = json.loads(body).get("messages") or []
        return tuple(str((m.get("metadata") or {}).get("event_id", "")) for m in messages)
    except (ValueError, AttributeError):
        return ()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that vanished (a killed worker resets its idle keep-alive connections) is
        expected."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(proxy: FaultProxy) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = IDLE_CONNECTION_S

        def do_GET(self) -> None:
            self._handle()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def log_message(self, *args) -> None:  # a bench prints one JSON line, nothing else
            pass

        def _handle(self) -> None:
            body = self._read_body()
            path = urlsplit(self.path).path
            route, session_id = route_of(self.command, path)
            record = proxy.arrived(route, session_id,
                                   _event_ids(body) if route == "message_add" else ())
            if proxy.delay_s:
                time.sleep(proxy.delay_s)
            self._serve(record, body)

        def _serve(self, record: ProxiedRequest, body: bytes) -> None:
            response = None
            if record.fault not in NOT_FORWARDED:
                try:
                    response = proxy.forward(self.command, self.path, dict(self.headers.items()),
                                             body)
                    record.upstream_status = response.status_code
                except httpx.HTTPError as exc:
                    record.upstream_error = type(exc).__name__
            if proxy.about_to_answer(record):
                return self._reset()  # its client is gone: nobody to answer
            if record.fault == "http_503":
                return self._answer(record, 503, b'{"detail":"injected 503"}', JSON)
            if record.fault == "http_429":
                return self._answer(record, 429, b'{"detail":"injected 429"}',
                                    {**JSON, "Retry-After": str(RETRY_AFTER_S)})
            if record.fault in ("reset_before", "reset_after"):
                return self._reset()
            if response is None:
                return self._answer(record, 502, b'{"detail":"upstream failed"}', JSON)
            extra = {k: v for k, v in response.headers.items()
                     if k.lower() in ("content-type", "retry-after")}
            return self._answer(record, response.status_code, response.content, extra)

        def _read_body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline(65_537).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline(65_537).strip():
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline(65_537)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _answer(self, record: ProxiedRequest, status: int, data: bytes,
                    extra: dict[str, str]) -> None:
            head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}",
                    f"Content-Length: {len(data)}"]
            head += [f"{k}: {v}" for k, v in extra.items()]
            try:  # one write: a client never waits on Nagle's algorithm for the body
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
                self.wfile.flush()
                record.answered = True
            except OSError:  # the client is gone (a killed worker)
                self.close_connection = True

        def _reset(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


def start_delaying(upstream: str, delay_s: float) -> tuple:
    """(process, url): a proxy that only delays, in its own process (its threads must not share the
    measured process's interpreter lock), at the lowest CPU priority (it stands for a server
    elsewhere). Stop it by closing its stdin (bench/delivery.stop_loopback)."""
    import os
    import subprocess

    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), upstream, str(delay_s)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise RuntimeError("the delaying proxy did not start")
    os.setpriority(os.PRIO_PROCESS, process.pid, 19)
    return process, url


if __name__ == "__main__":
    delayed = FaultProxy(sys.argv[1], {}, seed=0, delay_s=float(sys.argv[2]))
    print(delayed.url, flush=True)
    sys.stdin.read()
    delayed.close()
