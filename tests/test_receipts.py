"""Receipts: what a turn's receipt says (labels and counts, nothing of the pack's text), how long
the block behind it is held and what drops it, the inspector's `receipt` action, and the recall
extension, loaded as Agent Zero loads it, logging one receipt per recalled turn (none with
`recall_receipts` off)."""

import asyncio
import json
import os
import sys
import types
import unittest

from fake_honcho import FakeHoncho
from hub_testkit import ROOT, StubAgent, StubContext, import_by_path, stub_agent_zero
from loopback import serve
from outbox_helpers import ManualClock, temp_outbox_path
from test_inspector import HOST_SECRET, LEAKED, InspectorBench

from honcho_hub.ops import inspector
from honcho_hub.recall.pack import (
    NOTE_TITLE,
    REMOVED_BLOCK,
    MemoryPack,
    render_block,
    without_blocks,
)
from honcho_hub.recall.recaller import Recaller, RecallResult
from honcho_hub.recall.receipts import LOG_ID_PREFIX, HeldBlocks, receipt_of
from honcho_hub.settings.config import build_settings

TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"
RECALL_EXT = "extensions/python/message_loop_prompts_after/_55_honcho_recall.py"
KEY = "hch-receipts-key-2468013579"
PACK = MemoryPack((
    (NOTE_TITLE, "The user is planning the beehive move this week."),
    ("Relevant conclusions about the user", "The user keeps three beehives.\nLikes teal."),
    ("The user's card", "- ATTRIBUTE: Beekeeper"),
))
# Every word of the pack's text: none of them may be in a receipt.
PACK_WORDS = {word.strip(".-:") for _, text in PACK.sections for word in text.split()} - {""}


def settings(test, **plugin):
    return build_settings({"api_url": "https://honcho.test",
                           "outbox_path": temp_outbox_path(test), **plugin}, {}, {})


class ReceiptContentTest(unittest.TestCase):
    def test_a_receipt_names_sections_tokens_freshness_and_the_note_in_counts_only(self):
        block = render_block(PACK, TEMPLATE)
        receipt = receipt_of("0123456789abcdef", "fresh", PACK, block)
        self.assertEqual(receipt.freshness, "fresh")
        self.assertEqual([name for name, _ in receipt.sections],
                         ["dialectic note", "conclusions", "card"])
        self.assertTrue(all(tokens > 0 for _, tokens in receipt.sections))
        self.assertEqual(receipt.tokens, -(-len(block) // 4))
        self.assertTrue(receipt.note)
        self.assertEqual(receipt.log_id, LOG_ID_PREFIX + "0123456789abcdef")
        self.assertEqual(receipt.heading(), f"Honcho memory: fresh · 3 sections · {receipt.tokens}"
                                            " tokens · dialectic note")
        kvps = receipt.kvps()
        self.assertEqual((kvps["memory"], kvps["recall"], kvps["tokens"], kvps["dialectic_note"]),
                         ("fresh", "fresh", receipt.tokens, "yes"))
        self.assertRegex(kvps["sections"], r"^dialectic note \d+ · conclusions \d+ · card \d+$")
        shown = (receipt.heading() + json.dumps(kvps)).lower()
        self.assertEqual([word for word in PACK_WORDS
                          if len(word) > 3 and word.lower() in shown], [])

    def test_freshness_follows_where_recall_got_the_pack(self):
        block = render_block(PACK, TEMPLATE)
        table = {"hit": "fresh", "fresh": "fresh", "base": "base", "stale": "stale",
                 "reused": "stale"}
        for source, freshness in table.items():
            with self.subTest(source=source):
                receipt = receipt_of("0123456789abcdef", source, PACK, block)
                self.assertEqual((receipt.freshness, receipt.kvps()["recall"]),
                                 (freshness, source))

    def test_a_turn_that_got_nothing_says_none_and_why(self):
        table = {"timeout": (None, ""), "error": (None, ""), "fresh": (MemoryPack(), "")}
        for source, (pack, block) in table.items():
            with self.subTest(source=source):
                receipt = receipt_of("0123456789abcdef", source, pack, block)
                why = "empty" if source == "fresh" else source
                self.assertEqual(receipt.heading(), f"Honcho memory: none ({why})")
                self.assertEqual(receipt.kvps(), {"memory": "none", "recall": why,
                                                  "sections": "none", "tokens": 0,
                                                  "dialectic_note": "no"})

    def test_a_section_title_it_does_not_know_is_named_other(self):
        pack = MemoryPack((("A title carrying recalled words", "teal"),))
        receipt = receipt_of("0123456789abcdef", "base", pack, render_block(pack, TEMPLATE))
        self.assertEqual([name for name, _ in receipt.sections], ["other"])


class ForgottenBlocksTest(unittest.TestCase):
    def test_every_block_in_a_saved_prompt_goes_and_the_tools_mention_of_the_tag_stays(self):
        block = render_block(PACK, TEMPLATE)
        prompt = (f"System: memory is added as the `<honcho_memory>` block.\nHuman: hi\n"
                  f"[EXTRAS] {json.dumps({'honcho_memory': block})} and {block}")
        cleaned, count = without_blocks(prompt)
        self.assertEqual(count, 2)
        self.assertTrue(cleaned.startswith("System: memory is added as the `<honcho_memory>`"))
        self.assertEqual(cleaned.count(REMOVED_BLOCK), 2)
        self.assertNotIn("beehive", cleaned)


class HeldBlocksTest(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(100.0)
        self.held = HeldBlocks(self.clock)
        self.settings = settings(self, cache_ttl_s=60, cache_max_entries=2)

    def test_a_block_is_held_for_the_cache_lifetime_then_gone(self):
        rid = self.held.hold(self.settings, "<honcho_memory>teal</honcho_memory>")
        self.assertRegex(rid, r"^[0-9a-f]{16}$")
        self.clock.advance(59)
        self.assertEqual(self.held.get(self.settings, rid), "<honcho_memory>teal</honcho_memory>")
        self.clock.advance(1)
        self.assertIsNone(self.held.get(self.settings, rid))

    def test_a_turn_that_got_nothing_is_held_as_empty_not_as_gone(self):
        rid = self.held.hold(self.settings, "")
        self.assertEqual(self.held.get(self.settings, rid), "")
        self.assertIsNone(self.held.get(self.settings, "f" * 16))

    def test_clear_drops_every_block_and_the_bound_drops_the_oldest(self):
        first, second, third = (self.held.hold(self.settings, text) for text in "abc")
        self.assertEqual(len({first, second, third}), 3)
        self.assertIsNone(self.held.get(self.settings, first))
        self.assertEqual(self.held.get(self.settings, third), "c")
        self.held.clear()
        self.assertIsNone(self.held.get(self.settings, third))


class RecallerReceiptTest(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(100.0)
        self.recaller = Recaller(monotonic=self.clock)
        self.addCleanup(self.recaller.close)
        self.settings = settings(self, cache_ttl_s=60)

    def test_the_receipts_block_is_held_until_the_cache_is_cleared(self):
        block = render_block(PACK, TEMPLATE)
        receipt = self.recaller.receipt(self.settings, RecallResult(block, "fresh", PACK))
        self.assertEqual(receipt.freshness, "fresh")
        self.assertEqual(self.recaller.held_block(self.settings, receipt.receipt_id), block)
        self.recaller.clear_cache(self.settings)  # as a forget of a chat and Clear cache do
        self.assertIsNone(self.recaller.held_block(self.settings, receipt.receipt_id))

    def test_a_turn_with_nothing_gets_a_receipt_whose_block_is_empty(self):
        receipt = self.recaller.receipt(self.settings, RecallResult("", "timeout"))
        self.assertEqual(receipt.freshness, "none")
        self.assertEqual(self.recaller.held_block(self.settings, receipt.receipt_id), "")


class InspectorReceiptTest(unittest.TestCase):
    def setUp(self):
        self.bench = InspectorBench(self)

    def held(self, block):
        b = self.bench
        pack = MemoryPack((("Relevant conclusions about the user", block),))
        return b.recaller.receipt(b.settings, RecallResult(render_block(pack, TEMPLATE), "fresh",
                                                           pack)).receipt_id

    def test_a_held_receipt_shows_its_pack_masked_and_redacted(self):
        rid = self.held(f"The user keeps bees. Token {LEAKED}; password {HOST_SECRET}.")
        shown = inspector.receipt(self.bench.ins, rid)
        self.assertEqual((shown["ok"], shown["state"]), (True, "ready"))
        self.assertIn("The user keeps bees.", shown["text"])
        self.assertNotIn(LEAKED, shown["text"])
        self.assertNotIn(HOST_SECRET, shown["text"])

    def test_a_receipt_no_longer_cached_says_so_and_shows_nothing(self):
        rid = self.held("The user keeps bees.")
        self.bench.recaller.clear_cache(self.bench.settings)
        self.assertEqual(inspector.receipt(self.bench.ins, rid),
                         {"ok": True, "state": "expired", "text": ""})

    def test_a_turn_that_got_nothing_and_a_bad_id(self):
        b = self.bench
        rid = b.recaller.receipt(b.settings, RecallResult("", "error")).receipt_id
        self.assertEqual(inspector.receipt(b.ins, rid), {"ok": True, "state": "empty", "text": ""})
        for bad in (None, 7, "", "ABCDEF0123456789", "0" * 17, "../etc"):
            with self.subTest(bad=bad):
                self.assertFalse(inspector.receipt(b.ins, bad)["ok"])


class StubLog:
    """Agent Zero's `context.log`: the items a call to `log` adds, as their output."""

    def __init__(self):
        self.items = []

    def log(self, type, heading=None, content=None, kvps=None, update_progress=None, id=None,
            **kwargs):
        self.items.append({"type": type, "heading": heading, "content": content,
                           "kvps": dict(kvps or {}), "id": id, **kwargs})


class RecallAdapterReceiptTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.fake.representations[("agent-zero", "user")] = "The user prefers green tea."
        self.server = serve(self.fake)
        self.addCleanup(self.server.close)
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        self.host.config.update(api_url=self.server.url, recall_timeout_s=10)
        self.host.secrets = {"HONCHO_API_KEY": KEY}
        module = import_by_path(os.path.join(self.host.plugin_dir, RECALL_EXT))
        self.recall = next(v for k, v in vars(module).items() if k.startswith("Honcho"))

    def turn(self, text):
        context = StubContext(id="Rc3dE6gH")
        context.log = StubLog()
        data = types.SimpleNamespace(iteration=0, extras_persistent={},
                                     user_message=types.SimpleNamespace(
                                         content={"user_message": text}))
        asyncio.run(self.recall(agent=StubAgent(0, context)).execute(loop_data=data))
        return data.extras_persistent.get("honcho_memory"), context.log.items

    def test_a_recalled_turn_logs_one_receipt_of_counts_without_recalled_text(self):
        block, items = self.turn("Which tea should I buy?")
        self.assertIn("green tea", block)
        self.assertEqual(len(items), 1, items)
        item = items[0]
        self.assertEqual(item["type"], "info")
        self.assertRegex(item["id"], "^" + LOG_ID_PREFIX + "[0-9a-f]{16}$")
        self.assertTrue(item["heading"].startswith("Honcho memory: fresh · 1 section · "),
                        item["heading"])
        self.assertEqual(item["kvps"]["memory"], "fresh")
        self.assertNotIn("tea", json.dumps(item).lower())
        self.assertNotIn("Which", json.dumps(item))

    def test_a_log_that_fails_costs_the_receipt_not_the_turns_memory(self):
        context = StubContext(id="Rc3dE6gH")
        context.log = types.SimpleNamespace(log=self.refuse)
        data = types.SimpleNamespace(iteration=0, extras_persistent={},
                                     user_message=types.SimpleNamespace(
                                         content={"user_message": "Which tea should I buy?"}))
        with self.assertLogs("honcho_hub.adapters", "WARNING"):
            asyncio.run(self.recall(agent=StubAgent(0, context)).execute(loop_data=data))
        self.assertIn("green tea", data.extras_persistent.get("honcho_memory", ""))

    @staticmethod
    def refuse(*args, **kwargs):
        raise TypeError("a log of another shape")

    def test_with_receipts_off_the_turn_still_gets_memory_and_logs_nothing(self):
        self.host.config["recall_receipts"] = False
        block, items = self.turn("Which tea should I buy?")
        self.assertIn("green tea", block)
        self.assertEqual(items, [])


class ForgetRecalledTest(unittest.TestCase):
    """A forgotten chat's recall blocks leave the context window Agent Zero saves in its file."""

    def setUp(self):
        stub = stub_agent_zero()
        self.host = stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        window = {"text": "system <honcho_memory>The user likes green tea.</honcho_memory> end"}
        self.agent = types.SimpleNamespace(
            data={"ctx_window": window}, loop_data=types.SimpleNamespace(extras_persistent={}))
        self.context = types.SimpleNamespace(id="Rc3dE6gH", agent0=self.agent)
        contexts = {"Rc3dE6gH": self.context}
        agent_class = types.SimpleNamespace(DATA_NAME_CTX_WINDOW="ctx_window",
                                            DATA_NAME_SUBORDINATE="_subordinate")
        self.addCleanup(sys.modules.pop, "agent", None)  # Agent Zero's module, stubbed here
        sys.modules["agent"] = types.SimpleNamespace(
            Agent=agent_class, AgentContext=types.SimpleNamespace(get=contexts.get))

    def test_a_chat_file_that_cannot_be_saved_is_logged_not_raised(self):
        # The forget itself is done by then: its answer must not turn into a failure.
        def full_disk(context):
            raise OSError(28, "No space left on device")

        sys.modules["helpers.persist_chat"] = types.SimpleNamespace(save_tmp_chat=full_disk)
        from usr.plugins.honcho.extensions.honcho_bridge import host

        with self.assertLogs("honcho_hub.adapters", "WARNING"):
            removed = host.forget_recalled("Rc3dE6gH")
        self.assertEqual(removed, 1)
        self.assertNotIn("green tea", self.agent.data["ctx_window"]["text"])


class ReceiptSettingTest(unittest.TestCase):
    def test_receipts_are_on_by_default_and_a_project_may_turn_them_off(self):
        from honcho_hub.settings.spec import FIELDS

        field = next(f for f in FIELDS if f.name == "recall_receipts")
        self.assertEqual((field.kind, field.default, field.group), ("bool", True, "recall"))
        with open(os.path.join(ROOT, "webui", "config.html"), encoding="utf-8") as page:
            self.assertIn('x-model="config.recall_receipts"', page.read())


if __name__ == "__main__":
    unittest.main()
