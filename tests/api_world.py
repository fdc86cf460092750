"""The plugin's Agent Zero API handlers, loaded as Agent Zero loads them (a stub host), against the
fake Honcho served over loopback: one setup for every handler test."""

from __future__ import annotations

import os
import unittest
from typing import Any

from fake_honcho import FakeHoncho
from hub_testkit import StubApiHandler, classes_in, import_by_path, stub_agent_zero
from loopback import LoopbackServer, serve


def api_world(test: unittest.TestCase, key: str) -> tuple[FakeHoncho, LoopbackServer, Any]:
    """(the fake Honcho, its loopback server, the stub host configured for it with `key`); all
    closed by the test's cleanups."""
    fake = FakeHoncho(api_key=key)
    server = serve(fake)
    test.addCleanup(server.close)
    stub = stub_agent_zero()
    host = stub.__enter__()
    test.addCleanup(stub.__exit__, None, None, None)
    host.config.update(api_url=server.url)
    host.secrets = {"HONCHO_API_KEY": key}
    return fake, server, host


def api_handler(host: Any, name: str) -> Any:
    """The handler class of `api/<name>.py` in the stub host's plugin folder."""
    return classes_in(import_by_path(os.path.join(host.plugin_dir, "api", f"{name}.py")),
                      StubApiHandler)[0]
