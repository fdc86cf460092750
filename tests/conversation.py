"""A scripted conversation through capture, delivery and recall against the fake Honcho, turn by
turn.

Each turn does what Agent Zero and the plugin do for one user message: the query-aware recall is
started when the message is captured (prefetch), the recall hook takes its pack, the agent's answer
is captured, and the worker delivers both. The recall pool has one thread, and the test waits for it
between steps, so the order of requests is fixed; the clocks move 45 s a turn.
"""

from __future__ import annotations

import json
import unittest

import hub_testkit
from delivery_helpers import Bench
from idle import wait_idle

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.recall.recaller import Recaller, RecallResult

TEMPLATE = hub_testkit.checkout_text("prompts", "honcho.recall_block.md")
TURN_S = 45.0


class Conversation:
    def __init__(self, test: unittest.TestCase, **settings) -> None:
        self.bench = Bench(test, **settings)
        self.recaller = Recaller(lambda s: self.bench.gateway(s, s.recall_timeout_s),
                                 monotonic=self.bench.mono, threads=1,
                                 ask_gateway_factory=lambda s: self.bench.gateway(s))
        test.addCleanup(self.recaller.close)
        self.test = test
        self.turns = 0

    @property
    def settings(self):
        return self.bench.settings

    def turn(self, chat: str, text: str, scope: str | None = None) -> RecallResult:
        """One user turn in `chat`; returns what the recall hook injected."""
        bench, session, turn = self.bench, f"chat-{chat}", self.turns
        self.turns += 1
        self.recaller.prefetch(bench.settings, session, text, scope)
        bench.capture_service.capture(
            CaptureRequest(chat, Role.USER, f"u{turn}", text, scope_id=scope), bench.settings)
        self.test.assertTrue(wait_idle(30, self.recaller))
        result = self.recaller.recall(bench.settings, session, text, TEMPLATE, scope)
        self.test.assertTrue(wait_idle(30, self.recaller))
        bench.capture_service.capture(
            CaptureRequest(chat, Role.AGENT, f"a{turn}", f"answer {turn}: {result.source}",
                           scope_id=scope), bench.settings)
        bench.run_until_idle()
        bench.mono.advance(TURN_S)
        bench.clock.advance(TURN_S)
        return result

    def requests(self) -> list[dict]:
        """Every request sent so far, in order, as plain data: method, path, sorted query, JSON
        body."""
        return [_plain(request) for request in self.bench.sent]

    def count(self, method: str, path_end: str) -> int:
        """How many requests so far had this method and a path ending in `path_end`."""
        return sum(1 for r in self.bench.sent
                   if r.method == method and r.url.path.endswith(path_end))


def _plain(request) -> dict:
    body = json.loads(request.content) if request.content else None
    return {"method": request.method, "path": request.url.path,
            "query": sorted(request.url.params.multi_items()), "body": body}
