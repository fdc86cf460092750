"""A small MCP server for the MCP check's tests: JSON-RPC 2.0 over the streamable HTTP transport,
served on 127.0.0.1 by a thread (as loopback.py serves the fake Honcho API).

It answers `initialize`, `notifications/initialized`, `tools/list` (in pages) and a session's
DELETE, either as one JSON body or as an SSE stream. Its SSE streams are shaped like real ones: a
comment, a server notification before the answer, CRLF and LF line ends, the answer's JSON split
over two `data:` lines and over several writes, and the stream left open after the answer (as a
server may keep it for later messages), so a client that waits for the end of the stream times out.

What it can be told to be (keyword arguments of `McpFake`):
    form="json" | "sse"      how requests are answered
    key="..."                only `Authorization: Bearer <key>` is let in; 401 otherwise, as
                             Honcho's MCP server does without one
    unauthorized=True        401 on every path but the OAuth metadata, whatever is sent
    session_id=None          stateless: no Mcp-Session-Id (the default hands one out and requires
                             it)
    behaviour=               "hang" (reads the request, never answers), "sse_stall" (starts an SSE
                             stream, never answers in it), "garbage" (a 200 that is not JSON-RPC),
                             "oversized" (2 MB), "rpc_error" (a JSON-RPC error with server text in
                             it)
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# how long "hang" holds a request, and an SSE stream stays open; clients give up well before
STALL_S = 30.0
METADATA_PATH = "/.well-known/oauth-protected-resource"
SERVER_TEXT = "Missing Authorization header. Provide 'Authorization: Bearer <your-honcho-key>'."
OVERSIZED_BYTES = 2 * 1024 * 1024


class McpFake:
    """A running fake MCP server; `url` is its endpoint, `seen` every request it got. Stop with
    `close()`."""

    def __init__(self, *, form: str = "json", key: str | None = None, unauthorized: bool = False,
                 session_id: str | None = "mcp-session-7f3a", behaviour: str | None = None,
                 tools: int = 31, page_size: int = 20, protocol_version: str = "2025-06-18",
                 server_name: str = "Honcho MCP Server", server_version: str = "3.0.0") -> None:
        self.form, self.key, self.unauthorized, self.session_id = (form, key, unauthorized,
                                                                   session_id)
        self.behaviour, self.tools, self.page_size = behaviour, tools, page_size
        self.server_info = {"name": server_name, "version": server_version}
        self.protocol_version = protocol_version
        self.seen: list[dict] = []  # method, path, headers (lower-case names), body as text
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # A short poll: close() waits for the serving loop to see the shutdown, once per fake.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="fake-mcp", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def rpc_methods(self) -> list[str]:
        """The JSON-RPC methods posted, in order (DELETE shown as "DELETE")."""
        with self.lock:
            return [r["method"] if r["method"] != "POST" else _rpc_method(r["body"])
                    for r in self.seen]

    def headers_of(self, name: str) -> list[str | None]:
        """One header of every request, in order (None where it was absent)."""
        with self.lock:
            return [r["headers"].get(name) for r in self.seen]

    # -- answers -----------------------------------------------------------------------------------

    def answer(self, method: str, path: str, headers: dict,
               body: bytes) -> tuple[int, dict, list[bytes], bool]:
        """(status, headers, body pieces, keep the stream open) for one request."""
        if path == METADATA_PATH and method == "GET":
            return _json(200, {"resource": self.url,
                               "authorization_servers": ["http://127.0.0.1:9"]})
        if self.unauthorized or (self.key is not None
                                 and headers.get("authorization") != f"Bearer {self.key}"):
            return _json(401, {"error": SERVER_TEXT},
                         {"WWW-Authenticate":
                          f'Bearer resource_metadata="{self.url}{METADATA_PATH}"'})
        if urlsplit(path).path != "/":
            return _json(404, {"error": "Not found"})
        if method == "DELETE":
            return 200, {}, [], False
        try:
            message = json.loads(body)
        except ValueError:
            return _json(400, {"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32700, "message": "Parse error"}})
        if self.session_id is not None and message.get("method") != "initialize":
            if headers.get("mcp-session-id") != self.session_id:
                return _json(400, {"jsonrpc": "2.0", "id": None,
                                   "error": {"code": -32000, "message": "no session"}})
        if "id" not in message:  # a notification: accepted, nothing to answer
            return 202, {}, [], False
        return self._reply(message)

    def _reply(self, message: dict) -> tuple[int, dict, list[bytes], bool]:
        extra = ({"Mcp-Session-Id": self.session_id}
                 if self.session_id and message["method"] == "initialize" else {})
        if self.behaviour == "garbage":
            return 200, {"Content-Type": _TYPES[self.form], **extra}, [
                b"data: <html>" + SERVER_TEXT.encode() + b"</html>\n\n"], False
        if self.behaviour == "oversized":
            filler = b"x" * OVERSIZED_BYTES
            if self.form == "sse":
                return 200, {"Content-Type": _TYPES["sse"], **extra}, [b"data: \"" + filler], True
            return 200, {"Content-Type": _TYPES["json"], **extra}, [b"\"" + filler + b"\""], False
        if self.behaviour == "sse_stall":
            return 200, {"Content-Type": _TYPES["sse"], **extra}, [b": waiting\n\n"], True
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": self._result(message)}
        if self.behaviour == "rpc_error":
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32603, "message": SERVER_TEXT}}
        if self.form == "json":
            return (200, {"Content-Type": _TYPES["json"], **extra}, [json.dumps(reply).encode()],
                    False)
        return 200, {"Content-Type": _TYPES["sse"], **extra}, _sse_pieces(reply), True

    def _result(self, message: dict) -> dict:
        if message["method"] == "initialize":
            return {"protocolVersion": self.protocol_version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": self.server_info, "instructions": "Use these tools to remember."}
        start = int((message.get("params") or {}).get("cursor") or 0)
        page = [{"name": f"tool_{i}", "description": "d", "inputSchema": {"type": "object"}}
                for i in range(start, min(start + self.page_size, self.tools))]
        more = start + self.page_size < self.tools
        return {"tools": page, **({"nextCursor": str(start + self.page_size)} if more else {})}


_TYPES = {"json": "application/json", "sse": "text/event-stream"}


def _json(status: int, payload: dict,
          extra: dict | None = None) -> tuple[int, dict, list[bytes], bool]:
    return (status, {"Content-Type": "application/json", **(extra or {})},
            [json.dumps(payload).encode()], False)


def _sse_pieces(reply: dict) -> list[bytes]:
    """The answer as a real server's stream may carry it: cut anywhere, after other traffic."""
    text = json.dumps(reply)
    note = {"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "hi"}}
    half = text.index(", ") + 1  # the two data lines join with a newline: JSON whitespace there
    stream = (f": stream opened\r\n\r\nevent: message\r\ndata: {json.dumps(note)}\r\n\r\n"
              f"event: message\nid: 1\ndata: {text[:half]}\ndata: {text[half:]}\n\n").encode()
    return [stream[:7], stream[7:60], stream[60:-3], stream[-3:]]


def _rpc_method(body: str) -> str | None:
    try:
        return json.loads(body).get("method")
    except (ValueError, AttributeError):
        return None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # clients hanging up is what tests do
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(fake: McpFake) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # each SSE piece leaves at once, not after the client's delayed ACK
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            with fake.lock:
                fake.seen.append({"method": self.command, "path": self.path, "headers": headers,
                                  "body": body.decode("utf-8", "replace")})
            if fake.behaviour == "hang":
                fake.stop.wait(STALL_S)
                self.close_connection = True
                return
            status, extra, pieces, keep_open = fake.answer(self.command, self.path, headers, body)
            try:
                self._send(status, extra, pieces, keep_open)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading, as it may
                self.close_connection = True

        def _send(self, status: int, extra: dict, pieces: list[bytes], keep_open: bool) -> None:
            head = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in extra.items())]
            if not keep_open:
                data = b"".join(pieces)
                self.wfile.write(("\r\n".join([*head, f"Content-Length: {len(data)}"])
                                  + "\r\n\r\n").encode() + data)
                return
            self.wfile.write(("\r\n".join([*head, "Transfer-Encoding: chunked"])
                              + "\r\n\r\n").encode())
            # each piece its own write, so the client reads the stream in parts
            for piece in pieces:
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            fake.stop.wait(STALL_S)  # the stream stays open: nothing more comes
            self.close_connection = True

    return Handler
