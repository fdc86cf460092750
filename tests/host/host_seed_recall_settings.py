"""Seed guarantee: `recall_limit_to_session` and `recall_include_messages` change what recall does.

Real Agent Zero v1.7 (real turns with the scripted model, settings saved as the settings page does)
and a real Honcho behind a loopback proxy that records each recall request to the session context
endpoint and Honcho's answer.

Honcho's context endpoint has no switch for the recent messages: it fills whatever budget the
conclusions leave with them. So `recall_include_messages` is shown to keep the request the same and
the messages Honcho returned out of the pack; `recall_limit_to_session` is a request parameter.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_kit import ProxiedHostCase, conclusions, delivered, wait_for  # noqa: E402

PLUGIN = "honcho"
FACT = "I sail a blue boat named Petrel on the lake."
MESSAGES_TITLE = "Relevant recent messages"
CONCLUSIONS_TITLE = "Relevant conclusions about the user"


class RecallSettings(ProxiedHostCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.host.script("Noted: a blue boat named Petrel.")
        cls.ctx = cls.host.new_chat()
        cls.host.turn(cls.ctx, FACT)
        wait_for(lambda: delivered(cls.world, f"chat-{cls.ctx.id}", 2), 30,
                 "the fact in the real Honcho")
        wait_for(lambda: any("Petrel" in c.content for c in conclusions(cls.world)), 90,
                 "the deriver's conclusion about Petrel")

    def recall_turn(self, settings, text):
        """One turn with these settings saved; its recall request (and Honcho's answer) and its
        pack."""
        self.host.save_config(PLUGIN, settings)
        context_path = f"/sessions/chat-{self.ctx.id}/context"
        before = len(self.proxy.seen(lambda r: r.path.endswith(context_path)))
        self.host.script("Your boat is Petrel.")
        self.assertEqual(self.host.turn(self.ctx, text), "Your boat is Petrel.")
        requests = self.proxy.seen(lambda r: r.path.endswith(context_path))[before:]
        self.assertEqual(len(requests), 1, "one recall request for the turn")
        prompt = self.host.prompts(self.ctx)[-1]
        start, end = prompt.find("<honcho_memory>"), prompt.find("</honcho_memory>")
        self.assertGreaterEqual(start, 0, "the turn got a memory pack")
        return requests[0], prompt[start:end]

    def test_limit_to_session_is_sent_with_the_recall_request(self):
        for value in (False, True):
            with self.subTest(recall_limit_to_session=value):
                request, pack = self.recall_turn({"recall_limit_to_session": value},
                                                 f"Which boat do I sail? (limit {value})")
                self.assertEqual(request.query.get("limit_to_session"), [json.dumps(value)])
                self.assertIn("Petrel", pack)

    def test_include_messages_false_asks_the_same_and_leaves_the_returned_messages_out(self):
        question = "Remind me what my boat is called."
        with_messages, pack_with = self.recall_turn({"recall_include_messages": True}, question)
        without_messages, pack_without = self.recall_turn({"recall_include_messages": False},
                                                          question)

        self.assertEqual(without_messages.query, with_messages.query,
                         "the same question to Honcho")
        self.assertTrue(json.loads(without_messages.response)["messages"],
                        "Honcho returned recent messages")
        self.assertIn(MESSAGES_TITLE, pack_with)
        self.assertNotIn(MESSAGES_TITLE, pack_without)
        self.assertIn(CONCLUSIONS_TITLE, pack_without, "the pack keeps the conclusions")
        self.assertIn("Petrel", pack_without)


if __name__ == "__main__":
    unittest.main()
