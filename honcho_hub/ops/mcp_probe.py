"""The MCP handshake over the streamable HTTP transport: initialize, initialized, tools/list.

JSON-RPC 2.0 POSTed to the MCP URL, answered in JSON or SSE; bounded in time, bytes and pages. The
outcome holds codes, never server text but a cleaned name and version. See docs/architecture.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from .. import __version__
from ..errors import HubError

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "2025-06-18"  # the revision asked for; the server answers with the one it speaks
MAX_RESPONSE_BYTES = 1_000_000
MAX_PAGES = 10
MAX_TEXT_CHARS = 80
ACCEPT = "application/json, text/event-stream"
_VERSION_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SESSION_ID_RE = re.compile(r"[\x21-\x7e]{1,256}")  # visible ASCII, as the transport requires
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Handshake:
    """What the handshake found. `state`: ready, auth_required (the server answered 401) or failed;
    `status`: the last HTTP status seen (None when no answer came); `error`: a code, None when
    nothing went wrong (a 401 to a request without a key is the answer expected, not an error)."""

    state: str
    status: int | None
    error: str | None
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    tool_count: int | None = None
    tools_complete: bool = False  # False: more pages than MAX_PAGES, so tool_count is a lower bound

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def handshake(url: str, bearer: str | None, budget_s: float,
              client_factory: Callable[..., httpx.Client] = httpx.Client,
              monotonic: Callable[[], float] = time.monotonic) -> Handshake:
    """Initialize, list the tools, end the session; within `budget_s` in all. `bearer` is sent as
    `Authorization: Bearer` on every request when given. Never raises for what the server does."""
    with client_factory(timeout=budget_s, follow_redirects=False) as client:
        exchange = _Exchange(client, url, bearer, monotonic() + budget_s, monotonic)
        try:
            found = exchange.run()
        except _Stopped as stop:
            found = Handshake(stop.state, stop.status, stop.error)
        finally:
            exchange.end_session()
    log.debug("MCP handshake: %s (%s)", found.state, found.error)
    return found


class _Stopped(HubError):
    """Ends the handshake early; never leaves this module."""

    def __init__(self, error: str | None, status: int | None, state: str = "failed") -> None:
        super().__init__(error or state)
        self.code = error or state
        self.error, self.status, self.state = error, status, state


class _Exchange:
    """One handshake's requests: the headers they share, what is left of the budget, the session."""

    def __init__(self, client: httpx.Client, url: str, bearer: str | None, deadline_mono: float,
                 monotonic: Callable[[], float]) -> None:
        self.client, self.url, self.bearer = client, url, bearer
        self.deadline_mono, self.monotonic = deadline_mono, monotonic
        # identity: a compressed answer would be inflated before our byte count could stop it
        self.headers = {"Accept": ACCEPT, "Accept-Encoding": "identity"}
        if bearer:
            self.headers["Authorization"] = f"Bearer {bearer}"
        self.status: int | None = None
        self.session_id: str | None = None
        self._ids = itertools.count(1)

    def run(self) -> Handshake:
        init = self.call("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "honcho-hub", "version": __version__}})
        version = init.get("protocolVersion")
        if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
            raise _Stopped("malformed_response", self.status)
        raw_info = init.get("serverInfo")
        info = raw_info if isinstance(raw_info, dict) else {}
        self.headers["MCP-Protocol-Version"] = version  # every request after initialize names it
        self.notify("notifications/initialized")
        count, complete = self.count_tools()
        return Handshake("ready", self.status, None, version, self.shown(info.get("name")),
                         self.shown(info.get("version")), count, complete)

    def count_tools(self) -> tuple[int, bool]:
        """Tools over at most MAX_PAGES pages, and whether that was all of them."""
        count, cursor = 0, None
        for _ in range(MAX_PAGES):
            page = self.call("tools/list", {"cursor": cursor} if cursor else {})
            if not isinstance(page.get("tools"), list):
                raise _Stopped("malformed_response", self.status)
            count += len(page["tools"])
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return count, True
        return count, False

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer's `result`; an answered error stops the handshake with its
        code."""
        request_id = next(self._ids)
        rpc = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        with self.post(rpc) as response:
            if method == "initialize":
                self.take_session(response)
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind == "application/json":
                message = _json(self.read_all(response))
            elif kind == "text/event-stream":
                message = self.read_events(response, request_id)
            else:
                message = None
        if not _answers(message, request_id):
            raise _Stopped("malformed_response", self.status)
        assert message is not None  # for the type checker: _answers() is false for None
        if "error" in message:
            raise _Stopped(_rpc_code(message["error"]), self.status)
        if not isinstance(message.get("result"), dict):
            raise _Stopped("malformed_response", self.status)
        return message["result"]

    def notify(self, method: str) -> None:
        """A notification: the server accepts it (202) and answers nothing we need to read."""
        with self.post({"jsonrpc": "2.0", "method": method}):
            pass

    def end_session(self) -> None:
        """Best effort, with what is left of the budget: the server may free the session now (405
        and any failure are fine: it expires on its own)."""
        if self.session_id is None:
            return
        try:
            with self.request("DELETE", None):
                pass
        except _Stopped:
            pass

    @contextmanager
    def post(self, message: dict[str, Any]) -> Iterator[httpx.Response]:
        """POST one message; a 401 or any other non-2xx answer stops the handshake."""
        with self.request("POST", message) as response:
            if response.status_code == 401:
                # Without a key this is the expected answer of a server that requires one: no error.
                raise _Stopped("auth_401" if self.bearer else None, 401, "auth_required")
            if not 200 <= response.status_code < 300:
                raise _Stopped(f"http_{response.status_code}", response.status_code)
            yield response

    @contextmanager
    def request(self, method: str, message: dict[str, Any] | None) -> Iterator[httpx.Response]:
        """One streamed request with what is left of the budget; transport failures become codes."""
        remaining = self.deadline_mono - self.monotonic()
        if remaining <= 0:
            raise _Stopped("timeout", self.status)
        self.status = None
        headers = {**self.headers,
                   **({"Mcp-Session-Id": self.session_id} if self.session_id else {})}
        try:
            with self.client.stream(method, self.url, headers=headers, json=message,
                                    timeout=httpx.Timeout(remaining)) as response:
                self.status = response.status_code
                yield response
        except httpx.TimeoutException:
            raise _Stopped("timeout", self.status) from None
        except (httpx.HTTPError, httpx.InvalidURL):
            raise _Stopped("unreachable", self.status) from None
        except UnicodeEncodeError:  # a key httpx cannot put in a header: nothing was sent
            raise _Stopped("unusable_key", None) from None

    def take_session(self, response: httpx.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is not None and not _SESSION_ID_RE.fullmatch(session_id):
            raise _Stopped("malformed_response", self.status)
        self.session_id = session_id

    def chunks(self, response: httpx.Response) -> Iterator[bytes]:
        """The answer's bytes as they arrive, stopped past the byte bound or the time budget."""
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", ""):
            raise _Stopped("malformed_response", self.status)
        total = 0
        for chunk in response.iter_raw():
            total += len(chunk)
            if total > MAX_RESPONSE_BYTES:
                raise _Stopped("oversized_response", self.status)
            if self.monotonic() > self.deadline_mono:
                raise _Stopped("timeout", self.status)
            yield chunk

    def read_all(self, response: httpx.Response) -> bytes:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
            raise _Stopped("oversized_response", self.status)
        return b"".join(self.chunks(response))

    def read_events(self, response: httpx.Response, request_id: int) -> dict[str, Any] | None:
        """The SSE event answering `request_id`; the stream is left as soon as it came (a server may
        keep it open), other events (server notifications and requests) and comments are skipped."""
        data: list[str] = []
        for line in self.lines(response):
            if line == "":  # an event ends
                message = _json("\n".join(data).encode()) if data else None
                data = []
                if _answers(message, request_id):
                    return message
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                if name == "data":
                    data.append(value[1:] if value.startswith(" ") else value)
        return None  # the stream ended without the answer (an unfinished last event does not count)

    def lines(self, response: httpx.Response) -> Iterator[str]:
        """The stream's lines (ended by CRLF, LF or CR) as they arrive."""
        pending = b""
        for chunk in self.chunks(response):
            data = pending + chunk
            # A CR last may be half of a CRLF whose LF is in the next chunk: keep it for then.
            cut = len(data) - 1 if data.endswith(b"\r") else len(data)
            *complete, rest = _LINE_END.split(data[:cut])
            pending = rest + data[cut:]
            yield from (line.decode("utf-8", "replace") for line in complete)

    def shown(self, value: Any) -> str | None:
        """Server text fit to show: printable characters only, at most MAX_TEXT_CHARS, never the
        key."""
        if not isinstance(value, str):
            return None
        text = "".join(c for c in value if c.isprintable()).strip()
        if not text or (self.bearer and (self.bearer in value or self.bearer in text)):
            return None
        return text[:MAX_TEXT_CHARS]


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _answers(message: Any, request_id: int) -> bool:
    """Whether `message` is the JSON-RPC 2.0 response to `request_id`."""
    return (isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and type(message.get("id")) is int and message["id"] == request_id
            and ("result" in message or "error" in message))


def _rpc_code(error: Any) -> str:
    """`rpc_<code>` from a JSON-RPC error; never its message."""
    code = error.get("code") if isinstance(error, dict) else None
    if type(code) is int and -1_000_000 < code < 1_000_000:
        return f"rpc_{code}"
    return "rpc_error"
