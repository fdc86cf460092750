"""Support for the host tests: the plugin inside a real Agent Zero v1.7, talking to a real Honcho.

Each `tests/host/host_*.py` file is one process with one Agent Zero (the harness imports Agent Zero
into the process, once). It runs under Agent Zero's own Python 3.12 (`$A0_PYTHON`) from
`../shared/real-agent-zero`, against the Honcho at `$HONCHO_REAL_URL` (`../shared/real-honcho`).
`tests/host/run` starts one process per file.

The plugin goes into the tree as a copy of this checkout's files (never `.git`, `.venv` or caches),
so Agent Zero's writes (`config.json`, `.toggle-*`) land in the copy and never in the working tree.
Each process uses its own Honcho workspace and its own outbox in a temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
import uuid
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = "honcho"
REAL_AGENT_ZERO = os.environ.get("A0_SHARED", os.path.join(os.path.dirname(ROOT), "shared",
                                                           "real-agent-zero"))
_SKIP = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.pyc", ".pytest_cache",
                               "config.json", ".toggle-*", "execute_record.json", "*.sqlite3*",
                               "node_modules")


def required_env(name: str) -> str:
    """A variable the host suites cannot run without; a clear failure, never a skip."""
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} is not set: run the host tests through tests/host/run "
                           "(it sets up ../shared/real-agent-zero and needs HONCHO_REAL_URL)")
    return value


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str,
             interval_s: float = 0.2) -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        pause.wait(interval_s)


class HostWorld:
    """One Agent Zero tree with this plugin copied in, its environment, and a started host."""

    def __init__(self, env: dict[str, str] | None = None, plugins: tuple[str, ...] = (),
                 unset: tuple[str, ...] = (),
                 prepare: Callable[[HostWorld], None] | None = None) -> None:
        """`plugins`: folders of test plugins to copy into the tree beside this one (each folder
        named as its plugin.yaml names the plugin), before Agent Zero starts. `unset`: variables
        removed from the environment after it is set up (e.g. HONCHO_WORKSPACE_ID, when the test's
        files name the workspace); `prepare`: called with the world once the tree is there, before
        Agent Zero starts."""
        self.tmp = tempfile.mkdtemp(prefix="honcho-host-")
        self.honcho_url = required_env("HONCHO_REAL_URL")
        self.workspace_id = "host-" + uuid.uuid4().hex[:12]
        self.outbox_path = os.path.join(self.tmp, "outbox.sqlite3")
        os.environ.update({"HONCHO_API_URL": self.honcho_url,
                           "HONCHO_WORKSPACE_ID": self.workspace_id,
                           "HONCHO_OUTBOX_PATH": self.outbox_path, **(env or {})})
        for name in unset:
            os.environ.pop(name, None)
        self.tree = new_tree(self.tmp)
        self.plugin_dir = os.path.join(self.tree, "usr", "plugins", PLUGIN)
        for folder in plugins:
            shutil.copytree(folder, os.path.join(self.tree, "usr", "plugins",
                                                 os.path.basename(folder)), ignore=_SKIP)
        if prepare is not None:
            prepare(self)
        sys.path.insert(0, required_env("A0_HARNESS"))
        import a0host

        self.host = a0host.start(self.tree)
        self._clients: dict[str, Any] = {}

    def honcho(self, workspace_id: str | None = None):
        """A client of the real Honcho, outside the plugin, to check what arrived (one per
        workspace)."""
        from honcho import Honcho

        workspace_id = workspace_id or self.workspace_id
        if workspace_id not in self._clients:
            self._clients[workspace_id] = Honcho(
                base_url=self.honcho_url, workspace_id=workspace_id,
                api_key=os.environ.get("HONCHO_REAL_ADMIN_KEY") or None, max_retries=0, timeout=15)
        return self._clients[workspace_id]

    def session_messages(self, session_id: str) -> list[Any]:
        """Messages the real Honcho holds for a session, oldest first."""
        return list(self.honcho().session(session_id).messages())

    def chat_texts(self, ctx: Any) -> list[str]:
        """What the real Honcho holds for a chat, oldest first."""
        return [m.content for m in self.session_messages(f"chat-{ctx.id}")]


class ProxiedHostCase(unittest.TestCase):
    """Tests whose Agent Zero reaches the real Honcho through a HonchoProxy, to make faults on the
    wire."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.proxy = HonchoProxy(required_env("HONCHO_REAL_URL"))
        cls.world = HostWorld(env={"HONCHO_API_URL": cls.proxy.url})
        cls.host = cls.world.host

    @classmethod
    def tearDownClass(cls) -> None:
        cls.proxy.release()
        cls.proxy.close()

    def setUp(self) -> None:
        # pre_update and uninstall keep the plugin's threads stopped in this process; in Agent Zero
        # the update or removal follows, here the next test reuses the plugin as a reinstall would.
        self.addCleanup(release_restart)


def plugin_module(name: str) -> Any:
    """The plugin's module `name` (dotted, under the plugin) as Agent Zero imported it: its current
    generation."""
    full = f"usr.plugins.{PLUGIN}.{name}"
    __import__(full)
    return sys.modules[full]


def integration_handlers(sent: list[tuple[str, str]] | None = None) -> Any:
    """Agent Zero's bundled Telegram, WhatsApp and e-mail handler modules (`.telegram`,
    `.whatsapp`, `.email`). aiogram is not installed in the host: the harness's stub finder makes it
    importable (the handlers' code these tests run never calls it). With `sent`, the three reply
    senders append (chat id, reply) there instead of reaching the network."""
    import importlib.util

    if importlib.util.find_spec("aiogram") is None:
        import stubs

        sys.meta_path.append(stubs._StubFinder(["aiogram"]))
    from plugins._email_integration.helpers import handler as email
    from plugins._telegram_integration.helpers import handler as telegram
    from plugins._whatsapp_integration.helpers import handler as whatsapp

    if sent is not None:
        async def send_reply(context, response_text, *args, **kwargs):
            sent.append((context.id, response_text))
            return None  # sent, no error

        telegram.send_telegram_reply = send_reply
        whatsapp.send_wa_reply = send_reply
        email.send_email_reply = send_reply
    return types.SimpleNamespace(telegram=telegram, whatsapp=whatsapp, email=email)


def remembered_id(text: str) -> str:
    """The conclusion id in the memory tool's answer to `remember`."""
    found = re.fullmatch(r"Remembered as conclusion ([A-Za-z0-9_-]+)\.", text.strip())
    if not found:
        raise AssertionError(f"not a remember result: {text!r}")
    return found.group(1)


def release_restart() -> None:
    """Lift the hold on starting the plugin's workers that pre_update or uninstall left here."""
    from usr.plugins.honcho.honcho_hub.runtime import process_state

    state = process_state()
    with state.lock:
        state.restart_hold = None


def staged_plugin(tmp: str) -> str:
    """A copy of this checkout's plugin files (uncommitted edits included) in `tmp`."""
    target = os.path.join(tmp, "plugin-src")
    shutil.copytree(ROOT, target, ignore=_SKIP)
    return target


def new_tree(tmp: str) -> str:
    """A fresh Agent Zero tree (../shared/real-agent-zero/new-tree --copy) holding the staged
    plugin."""
    command = [os.path.join(REAL_AGENT_ZERO, "new-tree"), "--copy", staged_plugin(tmp)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"new-tree failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def save_secret(name: str, value: str) -> None:
    """Store a secret as Settings → Secrets does (Agent Zero's secrets manager,
    `usr/secrets.env`)."""
    from helpers.secrets import get_default_secrets_manager

    manager = get_default_secrets_manager()
    manager.save_secrets_with_merge(f"{manager.read_secrets_raw()}\n{name}={value}\n")


def real_admin_key() -> str:
    """The auth-on real Honcho's admin key: HONCHO_REAL_ADMIN_KEY, else the JWT
    ../shared/real-honcho writes into its state folder."""
    if os.environ.get("HONCHO_REAL_ADMIN_KEY"):
        return os.environ["HONCHO_REAL_ADMIN_KEY"]
    state = os.environ.get("REAL_HONCHO_STATE",
                           os.path.join(os.environ.get("TMPDIR", "/tmp"), "real-honcho"))
    with open(os.path.join(state, "admin_key"), encoding="utf-8") as handle:
        return handle.read().strip()


def user_message(text: str) -> Any:
    """Agent Zero's UserMessage for `AgentContext.communicate` (a turn started without waiting)."""
    from agent import UserMessage

    return UserMessage(message=text, attachments=[])


# -- additions for the seed-guarantee suites (tests/host/host_seed_*.py) ---------------------------

class ProxiedRequest:
    """One request the proxy saw: what was asked, when, and how it ended."""

    def __init__(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        self.method, self.path, self.query, self.body = method, path, query, body
        self.arrived_mono = time.monotonic()
        self.ended_mono: float | None = None
        self.outcome = "open"  # answered, dropped, client_gave_up
        self.status: int | None = None
        self.response: bytes = b""


class HonchoProxy:
    """A loopback HTTP proxy in front of the real Honcho, so faults happen on the network.

    Records every request; `mode` says what happens to the next ones: "forward" (answer from the
    real Honcho, after `delay_s`), "hold" (keep the request open without an answer until
    `release()`, then forward it; a client that gives up first is recorded as such) or "drop" (close
    the connection without an answer). Counts requests in flight at once (`max_in_flight`) and open
    client connections.
    """

    def __init__(self, upstream: str, mode: str = "forward", delay_s: float = 0.0) -> None:
        import http.server
        from urllib.parse import urlsplit

        self.upstream = urlsplit(upstream)
        self.mode, self.delay_s = mode, delay_s
        self.requests: list[ProxiedRequest] = []
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0

        self.open_connections = 0  # client connections not yet closed (keep-alive ones included)
        self._released = threading.Event()
        self._closed = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def setup(self) -> None:
                super().setup()
                with proxy.lock:
                    proxy.open_connections += 1

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with proxy.lock:
                        proxy.open_connections -= 1

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="honcho-proxy",
                                        daemon=True)
        self._thread.start()

    def hold(self) -> None:
        """From now on, keep new requests open without an answer."""
        self._released.clear()
        self.mode = "hold"

    def release(self, mode: str = "forward") -> None:
        """Forward the held requests (and the next ones, unless `mode` says otherwise)."""
        self.mode = mode
        self._released.set()

    def seen(self, predicate: Callable[[ProxiedRequest], bool] = lambda r: True
             ) -> list[ProxiedRequest]:
        """The recorded requests that match, oldest first."""
        with self.lock:
            return [r for r in self.requests if predicate(r)]

    def close(self) -> None:
        self._closed.set()
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # -- internals ---------------------------------------------------------------------------------

    def _handle(self, handler: Any) -> None:
        import socket
        from urllib.parse import parse_qs, urlsplit

        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        record = ProxiedRequest(handler.command, parts.path, parse_qs(parts.query), body)
        with self.lock:
            self.requests.append(record)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.mode == "hold" and not self._wait_for_release(handler):
                record.outcome = "client_gave_up"
                handler.close_connection = True
                return
            if self.mode == "drop":
                record.outcome = "dropped"
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if self.delay_s:
                self._closed.wait(self.delay_s)
            self._forward(handler, record)
        finally:
            record.ended_mono = time.monotonic()
            with self.lock:
                self.in_flight -= 1

    def _wait_for_release(self, handler: Any) -> bool:
        """Wait for release(); False when the client closed its connection first."""
        import select
        import socket

        sock = handler.connection
        while not self._released.wait(0.02):
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except OSError:
                    return False
        return not self._closed.is_set()

    def _forward(self, handler: Any, record: ProxiedRequest) -> None:
        import http.client

        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port,
                                              timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in ("host", "connection")}
            upstream.request(handler.command, handler.path, body=record.body or None,
                             headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        record.status, record.response, record.outcome = answer.status, data, "answered"
        head = [f"HTTP/1.1 {answer.status} {answer.reason}"]
        head += [f"{k}: {v}" for k, v in answer.getheaders()
                 if k.lower() not in ("content-length", "transfer-encoding", "connection")]
        head.append(f"Content-Length: {len(data)}")
        handler.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        handler.wfile.flush()


def user_typed(ctx: Any, text: str) -> Any:
    """What Agent Zero does with a typed message before the agent loop runs: agent 0's
    hist_add_user_message (its extensions, our capture among them, run); the model is not called."""
    import agent

    return ctx.get_agent().hist_add_user_message(agent.UserMessage(message=text, attachments=[]))


def outbox_counts(path: str, session_id: str | None = None) -> dict[str, int]:
    """Rows of the outbox file by state (only `session_id`'s when given), read straight from
    SQLite."""
    rows = _outbox_read(path, "SELECT state, count(*) FROM events WHERE ? IS NULL OR session_id = ?"
                              " GROUP BY state", (session_id, session_id))
    return dict(rows)


def outbox_rows(path: str, session_id: str | None = None) -> list[tuple[str, str | None, str]]:
    """(state, error code, content) of each row (only `session_id`'s when given), in capture
    order."""
    return _outbox_read(path, "SELECT state, error_code, content FROM events"
                              " WHERE ? IS NULL OR session_id = ? ORDER BY seq",
                        (session_id, session_id))


def outbox_due(path: str, session_id: str | None = None) -> bool:
    """Whether every pending row (of `session_id`, when given) may be attempted now."""
    rows = _outbox_read(path, "SELECT max(next_attempt_at) FROM events WHERE state = 'pending'"
                              " AND (? IS NULL OR session_id = ?)", (session_id, session_id))
    latest = rows[0][0] if rows else None
    return latest is None or latest <= time.time()


def memory_writes(path: str, conclusion_id: str) -> list[tuple[str, str | None, str, str]]:
    """The memory tool's local record of one conclusion, oldest first: (kind, session, observed
    peer, content) per write."""
    return _outbox_read(path, "SELECT kind, session_id, observed_id, content FROM memory_writes"
                              " WHERE conclusion_id = ? ORDER BY seq", (conclusion_id,))


def _outbox_read(path: str, sql: str, params: tuple) -> list[tuple]:
    import sqlite3

    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone():
            # Created a moment ago (by the worker's start, off the loop): its schema not yet in.
            return []
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def honcho_action(host: Any, action: str) -> dict[str, Any]:
    """POST /api/plugins/honcho/honcho_action through Agent Zero's Flask app; the action's
    result."""
    response = host.api("plugins/honcho/honcho_action", {"action": action})
    body = response.get_json(silent=True)
    if response.status_code != 200 or not body or not body.get("ok"):
        raise AssertionError(f"honcho_action {action}: {response.status_code} "
                             f"{response.get_data(as_text=True)[:500]}")
    return body["result"]


def honcho_status(host: Any, ctx: Any = None) -> dict[str, Any]:
    """POST /api/plugins/honcho/honcho_status (for the chat `ctx` when given); the status
    document."""
    response = host.api("plugins/honcho/honcho_status",
                        {"context": ctx.id} if ctx is not None else {})
    body = response.get_json(silent=True)
    if response.status_code != 200 or not body or not body.get("ok"):
        raise AssertionError(f"honcho_status: {response.status_code} "
                             f"{response.get_data(as_text=True)[:500]}")
    return body["status"]


def plugin_threads(name: str | None = None) -> list[threading.Thread]:
    """Live threads of the plugin (marked `honcho_hub_worker`), optionally only those called
    `name`."""
    return [t for t in threading.enumerate()
            if getattr(t, "honcho_hub_worker", False) and t.is_alive()
            and (name is None or t.name == name)]


def delivery_workers() -> list[threading.Thread]:
    """Live delivery coordinator threads of the plugin, whatever module generation started them."""
    return plugin_threads("honcho-hub-delivery")


# -- additions for the host suites of issue 10 (install, conversation, recall, tool, api, toggle, …)

def conclusions(world: HostWorld, observer: str = "agent-zero",
                observed: str = "user") -> list[Any]:
    """The conclusions `observer` holds about `observed` in the world's workspace (first 100)."""
    return list(world.honcho().peer(observer).conclusions_of(observed).list(size=100).items)


def delivered(world: HostWorld, session_id: str, count: int) -> list[Any] | None:
    """The session's messages in the real Honcho once there are at least `count` (for wait_for)."""
    messages = world.session_messages(session_id)
    return messages if len(messages) >= count else None
