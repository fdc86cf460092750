"""Receipts in a real Agent Zero v1.7 against a real Honcho: a turn that got memory leaves one
receipt in the chat's log and in its saved file, in labels and counts with nothing recalled in it
(Agent Zero itself saves the last prompt, the recall block in it, as agent 0's `ctx_window`);
the inspector's `receipt` action shows the pack while it is cached; `recall_receipts` off leaves
none; a chat forgotten afterwards keeps its receipt, its saved file holds no recalled text (the
block is removed from the saved context window), and the receipt's pack is gone.
"""

from __future__ import annotations

import json
import os
import unittest

import host_kit

PLUGIN = "honcho"
INSPECTOR = "plugins/honcho/honcho_inspector"
FACT = "My heron-blue canoe is called Saltmarsh Wren."
QUESTION = "What should I pack for a weekend on the water?"
# Words of the fact: recalled text, which a receipt and a chat file that only recalled it must lack.
RECALLED = ("Saltmarsh", "heron-blue")
PREFIX = "honcho-receipt-"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    world.host.save_config(PLUGIN, {"recall_timeout_s": 15})
    world.host.script("Noted: your canoe.")
    told = world.host.new_chat()
    world.host.turn(told, FACT)
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{told.id}", 2), 30,
                      "the first chat's two messages in the real Honcho")
    host_kit.wait_for(lambda: any("Saltmarsh" in c.content for c in host_kit.conclusions(world)),
                      90, "the deriver's conclusion about the canoe")


def receipts(ctx) -> list[dict]:
    return [item.output() for item in ctx.log.logs
            if isinstance(item.id, str) and item.id.startswith(PREFIX)]


def saved_chat(ctx) -> str:
    """The chat's file as Agent Zero saves it after each turn (saved once more here)."""
    from helpers import persist_chat

    persist_chat.save_tmp_chat(ctx)
    path = os.path.join(persist_chat.get_chat_folder_path(ctx.id), "chat.json")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def opened(ctx, log_id: str) -> dict:
    answer = world.host.api(INSPECTOR, {"action": "receipt", "context": ctx.id,
                                        "receipt": log_id.removeprefix(PREFIX)})
    body = answer.get_json(silent=True)
    assert answer.status_code == 200 and body, answer.get_data(as_text=True)[:300]
    return body


class PromptWindowTest(unittest.TestCase):
    def test_the_turns_model_call_ends_the_hold_its_typed_message_started(self) -> None:
        # honcho_hub/prompt_window.py: the typed message holds the writer and the worker until
        # Agent Zero's before_main_llm_call. With an hour's cap, a hold ended by anything else
        # would still run after the turn, and the message would not reach Honcho.
        window_class = host_kit.plugin_module("honcho_hub.prompt_window").PromptWindow
        default_cap = window_class.MAX_HOLD_S
        window_class.MAX_HOLD_S = 3600.0
        self.addCleanup(setattr, window_class, "MAX_HOLD_S", default_cap)
        window = host_kit.plugin_module("honcho_hub.hub").current().prompt_window
        self.addCleanup(window.model_called)  # the other tests' messages must not wait an hour
        world.host.script("Noted: the tide tables.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, "Please note the tide tables for Porto.", timeout=60)
        self.assertEqual(window.held_s(), 0.0)
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                          "the turn's two messages in the real Honcho")
        self.assertEqual(world.chat_texts(ctx),
                         ["Please note the tide tables for Porto.", "Noted: the tide tables."])


class ReceiptTest(unittest.TestCase):
    def test_a_turn_with_memory_leaves_one_receipt_of_counts_in_the_log_and_the_file(self):
        world.host.script("Sunscreen and a dry bag.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, QUESTION)
        prompt = world.host.prompts(ctx)[0]
        self.assertIn("Saltmarsh", prompt[prompt.rfind("<honcho_memory>"):])  # it got memory
        found = receipts(ctx)
        self.assertEqual(len(found), 1, found)
        item = found[0]
        self.assertEqual(item["type"], "info")
        self.assertRegex(item["heading"], r"^Honcho memory: (fresh|base|stale) · \d+ sections? · "
                                          r"\d+ tokens")
        self.assertIn(item["kvps"]["memory"], ("fresh", "base", "stale"))
        self.assertIn("conclusions", item["kvps"]["sections"])
        text = json.dumps(item)
        for word in RECALLED:
            self.assertNotIn(word, text)
        saved = [entry for entry in json.loads(saved_chat(ctx))["log"]["logs"]
                 if entry.get("id") == item["id"]]
        self.assertEqual(len(saved), 1)
        for word in RECALLED:
            self.assertNotIn(word, json.dumps(saved))
        shown = opened(ctx, item["id"])
        self.assertEqual((shown["ok"], shown["state"]), (True, "ready"), shown)
        self.assertIn("Saltmarsh", shown["text"])

    def test_with_receipts_off_a_turn_with_memory_leaves_none(self):
        read = world.host.config(PLUGIN)
        world.host.save_config(PLUGIN, {**read, "recall_receipts": False})
        self.addCleanup(world.host.save_config, PLUGIN, read)
        world.host.script("Sunscreen.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, QUESTION)
        prompt = world.host.prompts(ctx)[0]
        self.assertIn("Saltmarsh", prompt[prompt.rfind("<honcho_memory>"):])
        self.assertEqual(receipts(ctx), [])

    def test_a_forgotten_chats_file_keeps_its_receipt_and_no_recalled_text(self):
        world.host.script("A paddle and a map.")
        ctx = world.host.new_chat()
        world.host.turn(ctx, QUESTION)
        host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                          "the chat in Honcho")
        (item,) = receipts(ctx)
        done = world.host.api("plugins/honcho/honcho_forget",
                              {"action": "forget_chat", "chat": ctx.id, "confirmed": True})
        self.assertTrue(done.get_json()["ok"], done.get_data(as_text=True)[:300])
        saved = saved_chat(ctx)
        self.assertIn(item["id"], saved)
        for word in RECALLED:
            self.assertNotIn(word, saved)
        self.assertEqual(opened(ctx, item["id"]), {"ok": True, "state": "expired", "text": ""})


if __name__ == "__main__":
    unittest.main()
