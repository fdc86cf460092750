"""With every memory control at its default, the plugin makes exactly the requests it made before
them.

`fixtures/default_requests.json` was recorded by the code before the memory controls existed
(commit 160ab0d): a scripted conversation — two chats, one in a project scope, captured, delivered
and recalled over several turns with an injected clock and a one-thread recall pool (so the order
of requests is fixed) — and every request it sent: method, path, query and body. The same script
runs here on today's code with default settings; the requests must be identical.
"""

from __future__ import annotations

import json
import os
import unittest

import hub_testkit
from conversation import Conversation

GOLDEN = os.path.join(hub_testkit.ROOT, "tests", "fixtures", "default_requests.json")
SCOPE = "a0-garden"
TURNS = (("c1", None, "what tea should I buy for the winter?"),
         ("c1", None, "and which cups go with it?"),
         ("c2", SCOPE, "plan the vegetable beds for spring"),
         ("c1", None, "remind me what we said about tea"),
         ("c2", SCOPE, "ok"))


def scripted_requests(test: unittest.TestCase, **settings) -> list[dict]:
    """Run the scripted conversation; returns every request sent, in order, as plain data."""
    conversation = Conversation(test, **settings)
    for chat, scope, text in TURNS:
        conversation.turn(chat, text, scope)
    return conversation.requests()


class DefaultRequestsTest(unittest.TestCase):
    def test_default_settings_send_exactly_the_requests_recorded_before_the_memory_controls(self):
        with open(GOLDEN, encoding="utf-8") as handle:
            recorded = json.load(handle)
        # tuples as lists, as the file holds them
        made = json.loads(json.dumps(scripted_requests(self)))
        self.assertEqual(len(made), len(recorded))
        for index, (now, before) in enumerate(zip(made, recorded, strict=True)):
            with self.subTest(request=index, path=before["path"]):
                self.assertEqual(now, before)

    def test_the_script_is_deterministic(self):
        self.assertEqual(scripted_requests(self), scripted_requests(self))


if __name__ == "__main__":
    unittest.main()
