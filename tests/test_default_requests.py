"""With every memory control at its default, the plugin makes exactly the requests it made before them.

`fixtures/default_requests.json` was recorded by the code before the memory controls existed (commit
160ab0d): a scripted conversation — two chats, one in a project scope, captured, delivered and recalled
over several turns with an injected clock and a one-thread recall pool (so the order of requests is
fixed) — and every request it sent: method, path, query and body. The same script runs here on today's
code with default settings; the requests must be identical.
"""

from __future__ import annotations

import json
import os
import unittest

import hub_testkit
from delivery_helpers import Bench

from honcho_hub.capture.service import CaptureRequest, Role
from honcho_hub.recall.recaller import Recaller

GOLDEN = os.path.join(hub_testkit.ROOT, "tests", "fixtures", "default_requests.json")
TEMPLATE = open(os.path.join(hub_testkit.ROOT, "prompts", "honcho.recall_block.md"), encoding="utf-8").read()
SCOPE = "a0-garden"
TURNS = (("c1", None, "what tea should I buy for the winter?"),
         ("c1", None, "and which cups go with it?"),
         ("c2", SCOPE, "plan the vegetable beds for spring"),
         ("c1", None, "remind me what we said about tea"),
         ("c2", SCOPE, "ok"))


def scripted_requests(test: unittest.TestCase, **settings) -> list[dict]:
    """Run the scripted conversation; returns every request sent, in order, as plain data."""
    bench = Bench(test, **settings)
    recaller = Recaller(lambda s: bench.gateway(s, s.recall_timeout_s), monotonic=bench.mono, threads=1)
    test.addCleanup(recaller.close)
    for turn, (chat, scope, text) in enumerate(TURNS):
        session = f"chat-{chat}"
        recaller.prefetch(bench.settings, session, text, scope)
        bench.capture_service.capture(CaptureRequest(chat, Role.USER, f"u{turn}", text, scope_id=scope),
                                      bench.settings)
        test.assertTrue(recaller.wait_idle(30))
        result = recaller.recall(bench.settings, session, text, TEMPLATE, scope)
        test.assertTrue(recaller.wait_idle(30))
        bench.capture_service.capture(CaptureRequest(chat, Role.AGENT, f"a{turn}", f"answer {turn}: {result.source}",
                                                     scope_id=scope), bench.settings)
        bench.run_until_idle()
        bench.mono.advance(45.0)
        bench.clock.advance(45.0)
    return [_plain(request) for request in bench.sent]


def _plain(request) -> dict:
    body = json.loads(request.content) if request.content else None
    return {"method": request.method, "path": request.url.path, "query": sorted(request.url.params.multi_items()),
            "body": body}


class DefaultRequestsTest(unittest.TestCase):
    def test_default_settings_send_exactly_the_requests_recorded_before_the_memory_controls(self):
        with open(GOLDEN, encoding="utf-8") as handle:
            recorded = json.load(handle)
        made = json.loads(json.dumps(scripted_requests(self)))  # tuples as lists, as the file holds them
        self.assertEqual(len(made), len(recorded))
        for index, (now, before) in enumerate(zip(made, recorded, strict=True)):
            with self.subTest(request=index, path=before["path"]):
                self.assertEqual(now, before)

    def test_the_script_is_deterministic(self):
        self.assertEqual(scripted_requests(self), scripted_requests(self))


if __name__ == "__main__":
    unittest.main()
