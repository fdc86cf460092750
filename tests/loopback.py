"""Serve a FakeHoncho over loopback HTTP: in a thread (benches, tests) or as its own process.

Each response goes out in one buffered write on a keep-alive connection, so a client never waits on
Nagle's algorithm and delayed ACKs; what a benchmark measures is the client, not the fake.
Control routes under /_fake/ let other processes script faults and read the server's state.

    python tests/loopback.py            # prints the port, serves until stdin closes
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_honcho import FakeHoncho, Fault  # noqa: E402

STALL_S = 30.0  # a "timeout" fault holds the answer this long; clients give up well before
POLL_S = 0.05  # how often the serving loop looks for a shutdown


def _handler_for(fake: FakeHoncho, stop: threading.Event, seen: list,
                 trickle_s: float | None) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PUT(self) -> None:
            self._answer()

        def do_DELETE(self) -> None:
            self._answer()

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            parts = urlsplit(self.path)
            if parts.path.startswith("/_fake/"):
                return self._send(*_control(fake, parts.path, body))
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.append({"method": self.command, "path": self.path, "headers": headers,
                         "body": raw.decode()})
            status, extra, payload, fault = fake.handle(self.command, parts.path,
                                                        dict(parse_qsl(parts.query)), body, headers)
            if fault is not None:
                if fault.kind == "timeout":
                    stop.wait(STALL_S)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return None
            return self._send(status, payload, extra)

        def _send(self, status: int, payload, extra: dict | None = None) -> None:
            data = b"" if status == 204 else json.dumps(payload).encode()  # 204 has no body
            head = [f"HTTP/1.1 {status} X", "Content-Type: application/json",
                    f"Content-Length: {len(data)}"]
            head += [f"{k}: {v}" for k, v in (extra or {}).items()]
            if trickle_s is None or self.path.startswith("/_fake/"):
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
                return
            # A trickling server: its head at once, then its body a byte at a time, each well within
            # any read timeout, until the body is out or the server closes.
            try:
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
                for n in range(len(data)):
                    if stop.wait(trickle_s):
                        return
                    self.wfile.write(data[n:n + 1])
            except OSError:  # the client gave up and closed the connection
                self.close_connection = True

    return Handler


def _control(fake: FakeHoncho, path: str, body) -> tuple[int, object]:
    if path == "/_fake/await":
        return 200, {"seen": fake.await_request(body["match"], body["count"], body["timeout"])}
    with fake.lock:
        if path == "/_fake/messages":
            return 200, fake.messages
        if path == "/_fake/fail":
            fake.faults.append(Fault(**body))
            return 200, {"queued": len(fake.faults)}
        if path == "/_fake/requests":
            return 200, fake.requests
        if path == "/_fake/scoped_context_status":  # e.g. 403: this key is not workspace-level
            fake.scoped_context_status = body.get("status")
            return 200, {}
        if path == "/_fake/remember":
            key = (body["observer"], body["target"])
            fake.representations[key], fake.cards[key] = (body.get("representation"),
                                                          body.get("card"))
            return 200, {}
    return 404, {"detail": "unknown control route"}


class LoopbackServer:
    """A running loopback server; `url` is its base URL. Stop it with `close()`."""

    def __init__(self, fake: FakeHoncho, trickle_s: float | None = None) -> None:
        self.fake = fake
        # every API request as it arrived: method, path with query, headers, body
        self.seen: list[dict] = []
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0),
                                           _handler_for(fake, self._stop, self.seen, trickle_s))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # A short poll: close() waits for the serving loop to see the shutdown (half a second at the
        # default, paid by every test that serves a fake).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_S,),
                                        name="fake-honcho", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve(fake: FakeHoncho | None = None, trickle_s: float | None = None) -> LoopbackServer:
    """A loopback server for `fake`; with `trickle_s`, each answer's body comes a byte every
    `trickle_s`."""
    return LoopbackServer(fake or FakeHoncho(), trickle_s)


class ServerProcess:
    """A fake Honcho serving from a process of its own (this file run as a script): one state for
    several worker processes, and no thread or socket of the fake in the test's process. `close()`
    stops it."""

    def __init__(self, api_key: str | None = None) -> None:
        env = dict(os.environ, FAKE_HONCHO_KEY=api_key or "")
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=tempfile.gettempdir())
        self.url = self.process.stdout.readline().strip()

    def control(self, path: str, body=None, timeout: float = 60):
        """POST to one of the fake's control routes (/_fake/...); its JSON answer."""
        import httpx  # here: the server itself needs only the standard library

        return httpx.post(self.url + path, json=body, timeout=timeout).json()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.stdout.close()
        self.process.wait(30)


if __name__ == "__main__":
    server = serve(FakeHoncho(api_key=os.environ.get("FAKE_HONCHO_KEY") or None))
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    server.close()
