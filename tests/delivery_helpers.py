"""A delivery test bench: real outbox, real capture, real honcho.Honcho over a MockTransport
fake."""

from __future__ import annotations

import dataclasses
import os
import random
import sqlite3
from collections.abc import Callable

import httpx
import hub_testkit  # noqa: F401  (imported for its effect: the checkout on sys.path)
from fake_honcho import FakeHoncho
from outbox_helpers import ManualClock, temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.settings.config import build_settings

KEY = "hch-test-key-0123456789"


def with_api_url_problem(settings, problem: str):
    """These settings as config.py builds them when the configured API URL cannot be used
    (`problem` names the setting, never its value)."""
    return dataclasses.replace(settings, api_url_problem=problem)


class Bench:
    """One process's view: settings, capture, worker, fake server and the clocks the test moves.

    Every request a client built here sends is kept in `sent` (URL, headers and body as they left);
    every gateway built here is kept in `gateways`, and every HTTP client is closed when the test
    ends. `supports_scopes` injects the SDK capability check (False: an SDK without scopes)."""

    def __init__(self, test, supports_scopes: bool | None = None,
                 worker_options: dict | None = None, **overrides) -> None:
        self.test = test
        self.path = temp_outbox_path(test)
        self.fake = FakeHoncho(api_key=KEY)
        self.sent: list[httpx.Request] = []
        self.gateways: list[HonchoGateway] = []
        self.clients: list[httpx.Client] = []
        # registered first: runs after the worker and capture stopped
        test.addCleanup(self._close_clients)
        # runs before the fake answers
        self.on_request: Callable[[httpx.Request], None] | None = None
        self._fake_transport = self.fake.transport()
        self.transport = httpx.MockTransport(self._record)
        self.supports_scopes = None if supports_scopes is None else (lambda: supports_scopes)
        self.secrets = {"HONCHO_API_KEY": KEY}
        self.clock, self.mono = ManualClock(1_800_000_000.0), ManualClock(1000.0)
        self.enabled = True
        self._said = 0
        plugin = {"outbox_path": self.path, "api_url": "https://honcho.test", **overrides}
        self.settings = build_settings(plugin, self.secrets, {},
                                       load_secrets=lambda: dict(self.secrets))
        # Its journals in the test's folder: no other test's journal is replayed into this outbox.
        journals = os.path.join(os.path.dirname(os.path.dirname(self.path)), "state-journal")
        self.capture_service = CaptureService(self.settings, clock=self.clock, monotonic=self.mono,
                                              fallback_journal_folder=journals)
        test.addCleanup(self.capture_service.close)
        self.worker = self.new_worker(**(worker_options or {}))

    def new_worker(self, **options) -> DeliveryWorker:
        """A worker of this process on the bench's outbox, fake and clocks (another owner each
        time)."""
        worker = DeliveryWorker(lambda: self.settings, enabled=lambda: self.enabled,
                                clock=self.clock, monotonic=self.mono, rng=random.Random(7),
                                gateway_factory=self.gateway, **options)
        self.test.addCleanup(worker.stop, 10)
        return worker

    def _record(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.on_request is not None:
            self.on_request(request)
        return self._fake_transport.handle_request(request)

    def adds(self, chat: str) -> int:
        """How many add-messages requests reached the fake for this chat."""
        return (self.fake.count(f"/sessions/chat-{chat}/messages")
                - self.fake.count(f"/sessions/chat-{chat}/messages/"))

    def http_client(self, **kwargs) -> httpx.Client:
        """An httpx client whose requests reach the fake and are kept in `sent`."""
        client = httpx.Client(transport=self.transport, **kwargs)
        self.clients.append(client)
        return client

    def open_clients(self) -> list[httpx.Client]:
        """The HTTP clients built here that are still open: what the code under test holds on
        to."""
        return [client for client in self.clients if not client.is_closed]

    def _close_clients(self) -> None:
        for client in self.clients:
            client.close()

    def gateway(self, settings, timeout_s: float | None = None) -> HonchoGateway:
        gateway = HonchoGateway.for_settings(settings, timeout_s,
                                             http_client_factory=self.http_client,
                                             supports_scopes=self.supports_scopes)
        self.gateways.append(gateway)
        return gateway

    def say(self, chat: str, n: int, role: Role = Role.USER, text: str = "message",
            scope: str | None = None) -> list[str]:
        """Capture n messages in one chat (of the project whose scope is `scope`) through the real
        capture path; returns their texts."""
        texts = []
        for i in range(n):
            content = f"{text} {chat} {i}"
            self._said += 1
            outcome = self.capture_service.capture(
                CaptureRequest(chat, role, f"source-{self._said}", content, scope), self.settings)
            self.test.assertEqual(outcome.value, "queued")
            texts.append(content)
        return texts

    def run_until_idle(self, max_steps: int = 200) -> int:
        """Step until a step leases nothing; returns the number of steps."""
        for steps in range(1, max_steps + 1):
            if self.worker.step().leased == 0:
                return steps
        raise AssertionError("the worker never went idle")

    def server_texts(self, chat: str) -> list[str]:
        return [m["content"] for m in self.fake.session_messages(f"chat-{chat}")]

    def states(self) -> dict:
        conn = sqlite3.connect(self.path)
        try:
            return dict(conn.execute(
                "SELECT state, count(*) FROM events GROUP BY state").fetchall())
        finally:
            conn.close()

    def rows(self) -> list[tuple]:
        conn = sqlite3.connect(self.path)
        try:
            return conn.execute("SELECT id, state, attempts, error_code, next_attempt_at"
                                " FROM events ORDER BY seq").fetchall()
        finally:
            conn.close()

    def assert_exactly_once(self, chat: str, texts: list[str]) -> None:
        self.test.assertEqual(self.server_texts(chat), texts)
