"""Support for the contract suites: the real Honcho's address, fresh workspaces, settings and
gateways built the way the plugin builds them, messages to send, and the one bounded wait for
Honcho's deriver.

The suites run against any Honcho named by HONCHO_REAL_URL (auth off, or a key in
HONCHO_REAL_ADMIN_KEY); the auth suite also needs HONCHO_REAL_AUTH_URL. A missing variable fails the
test with the reason: a skipped contract test would be a promise nobody checked.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import unittest
import uuid
from collections.abc import Callable, Sequence
from typing import Any

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import hub_testkit  # noqa: E402,F401 - puts the checkout on sys.path, allows loopback only

from honcho_hub.gateway.gateway import HonchoGateway, Message  # noqa: E402
from honcho_hub.settings.config import Settings, build_settings  # noqa: E402

USER, AGENT = "user", "agent-zero"  # the plugin's default peer ids
DERIVATION_TIMEOUT_S = 60.0  # the deriver takes ~5 s here; a slow CI box gets a generous bound
POLL_S = 0.25


def required_url(name: str = "HONCHO_REAL_URL") -> str:
    """The URL in `name`, or a failure that says how to provide it."""
    value = os.environ.get(name, "").strip().rstrip("/")
    if not value:
        raise AssertionError(f"{name} is not set: start a Honcho "
                             "(../shared/real-honcho/up --auth-port 8002) "
                             f"and export {name}; the contract suites never skip")
    return value


def admin_key() -> str:
    """The key for the real servers ('' when they run without auth)."""
    return os.environ.get("HONCHO_REAL_ADMIN_KEY", "").strip()


def fresh_workspace(tag: str) -> str:
    """A workspace id no earlier run used: reruns never see old data."""
    return f"ct-{tag.lower()[:24]}-{uuid.uuid4().hex[:12]}"


def real_settings(cleanup: Callable, url: str, workspace_id: str, secrets: dict | None = None,
                  **plugin: Any) -> Settings:
    """Settings as the plugin builds them, pointing at `url`; the key is read from `secrets` on
    every use (the dict may be changed later), and the outbox lives in a temporary folder that
    `cleanup` (a test's addCleanup or a class's addClassCleanup) removes."""
    folder = tempfile.TemporaryDirectory()
    cleanup(folder.cleanup)
    secrets = secrets if secrets is not None else {"HONCHO_API_KEY": admin_key()}
    values = {"api_url": url, "workspace_id": workspace_id,
              "outbox_path": os.path.join(folder.name, "outbox.sqlite3"), **plugin}
    return build_settings(values, dict(secrets), {}, load_secrets=lambda: dict(secrets))


def real_gateway(cleanup: Callable, settings: Settings, timeout_s: float = 30.0) -> HonchoGateway:
    """The plugin's gateway for these settings, closed by `cleanup`."""
    gateway = HonchoGateway.for_settings(settings, timeout_s)
    cleanup(gateway.close)
    return gateway


def turns(session_id: str, texts: Sequence[str], *, start: float = 1_700_000_000.0,
          scope_id: str | None = None, tag: str = "") -> list[Message]:
    """One message per text, alternating user and agent (user first), created one second apart."""
    made = []
    for i, text in enumerate(texts):
        peer, role = (USER, "user") if i % 2 == 0 else (AGENT, "agent")
        made.append(Message(id=f"ev_{tag or session_id}_{i:04d}", session_id=session_id,
                            peer_id=peer, role=role, content=text, created_at=start + i,
                            scope_id=scope_id))
    return made


def user_turns(session_id: str, texts: Sequence[str], *, scope_id: str | None = None,
               tag: str = "") -> list[Message]:
    """Messages the user said, one per text."""
    return [Message(id=f"ev_{tag or session_id}_u{i:04d}", session_id=session_id, peer_id=USER,
                    role="user", content=text, created_at=1_700_000_000.0 + i, scope_id=scope_id)
            for i, text in enumerate(texts)]


def await_derivation(gateway: HonchoGateway, what: str, *, until: Callable[[], Any] | None = None,
                     session_id: str | None = None, timeout_s: float = DERIVATION_TIMEOUT_S) -> Any:
    """Wait for Honcho's background work, bounded by `timeout_s`; fails with `what` at the deadline.

    With `until`: until it returns something truthy (that value is returned), e.g. the expected
    conclusions. Without: until the queue status (of `session_id`, else the workspace) showed work
    and then none pending or in progress.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    last: Any = None
    while True:
        if until is not None:
            last = until()
            if last:
                return last
        else:
            last = gateway.call(lambda client: client.queue_status(session=session_id) if session_id
                                else client.queue_status())
            if (last.total_work_units > 0 and last.pending_work_units == 0
                    and last.in_progress_work_units == 0):
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}; "
                                 f"last seen: {last!r}")
        pause.wait(POLL_S)


def quiet_workspace(gateway: HonchoGateway) -> None:
    """Turn off derivation and summaries for a workspace whose tests need neither, so the one
    deriver the server shares between workspaces stays free for the tests that wait on it."""
    from honcho.api_types import (
        ReasoningConfiguration,
        SummaryConfiguration,
        WorkspaceConfiguration,
    )

    off = WorkspaceConfiguration(reasoning=ReasoningConfiguration(enabled=False),
                                 summary=SummaryConfiguration(enabled=False))
    gateway.call(lambda client: client.set_configuration(off))


def conclusions_about(gateway: HonchoGateway, observer: str, observed: str) -> list[Any]:
    """Every conclusion of `observer` about `observed` (first 100)."""
    return list(gateway.call(lambda c: gateway.reader_peer(observer).conclusions_of(observed)
                             .list(size=100)).items)


class RealHonchoCase(unittest.TestCase):
    """A test class with a workspace of its own on HONCHO_REAL_URL."""

    url: str
    workspace_id: str

    quiet = False  # True: this class's workspace has no derivation or summaries

    @classmethod
    def setUpClass(cls) -> None:
        cls.url = required_url()
        cls.workspace_id = fresh_workspace(cls.__name__)
        if cls.quiet:
            quiet_workspace(cls.class_gateway())

    @classmethod
    def class_gateway(cls, **plugin: Any) -> HonchoGateway:
        """A plugin gateway to this class's workspace that lives as long as the class."""
        return real_gateway(cls.addClassCleanup,
                            real_settings(cls.addClassCleanup, cls.url, cls.workspace_id, **plugin))

    def settings(self, **plugin: Any) -> Settings:
        """Settings for this class's workspace on the auth-off server."""
        return real_settings(self.addCleanup, self.url, self.workspace_id, **plugin)

    def gateway(self, timeout_s: float = 30.0, **plugin: Any) -> HonchoGateway:
        """A fresh plugin gateway to this class's workspace."""
        return real_gateway(self.addCleanup, self.settings(**plugin), timeout_s)
