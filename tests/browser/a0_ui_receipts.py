"""Receipts in the real Agent Zero v1.7 web UI, in headless Chromium, against the real Honcho: after
a turn that got memory, the chat shows one receipt (a step of the turn, in counts); expanding it
fetches the redacted pack from the inspector's API and shows it as text (the card's markup stays
text); once the cache is cleared, expanding it again after a reload says the pack is no longer
cached.

Its own Agent Zero: `.ci/run` runs every `tests/browser/a0_ui_*.py`, or
`$A0_PYTHON tests/browser/a0_ui_receipts.py` with `A0_HARNESS` and `HONCHO_REAL_URL` set.
Screenshots go to `HONCHO_HUB_SCREENSHOTS` when it names a folder (docs/receipt*.png).
"""

from __future__ import annotations

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

import a0_ui_browser as kit  # noqa: E402
from host_kit import wait_for  # noqa: E402

ANSWER = "Noted: bring the blue kayak."
CARD = ["ATTRIBUTE: Paddles a blue kayak called Wren",
        "PREFERENCE: <img src=x id=honchoxss> tea over coffee"]
RECEIPT = "[id^='process-step-honcho-receipt-']"


def setUpModule():
    kit.setUpModule()


def tearDownModule():
    kit.tearDownModule()


class ReceiptTest(kit.UiCase):
    def expand(self, receipt) -> None:
        receipt.wait_for(timeout=30_000)
        if "expanded" not in (receipt.get_attribute("class") or ""):
            receipt.locator(".process-step-header").click()
        wait_for(lambda: "expanded" in (receipt.get_attribute("class") or ""), 10,
                 "the receipt expanded")

    def test_a_receipt_after_a_turn_expands_to_its_redacted_pack_then_says_when_it_is_gone(self):
        kit.ui.set_card(CARD)
        kit.ui.script([ANSWER])
        page = self.open_page()
        page.evaluate(kit.WATCH_MARKUP)
        self.new_chat(page)
        page.fill("#chat-input", "What should I bring to the lake?")
        page.press("#chat-input", "Enter")
        page.get_by_text(ANSWER).first.wait_for(timeout=60_000)
        receipt = page.locator(RECEIPT)
        receipt.first.wait_for(timeout=30_000)
        self.assertEqual(receipt.count(), 1)
        title = receipt.locator(".step-title").inner_text()
        self.assertRegex(title, r"^Honcho memory: (fresh|base|stale) · \d+ sections? · \d+ tokens")
        self.assertNotIn("kayak", receipt.locator(".process-step-header").inner_text())

        self.expand(receipt)
        pack = receipt.locator(".honcho-receipt-pack")
        wait_for(lambda: pack.count() and "blue kayak called Wren" in pack.inner_text(), 30,
                 "the pack in the expanded receipt")
        self.assertIn("<img src=x id=honchoxss>".replace("<", "\u2039").replace(">", "\u203a"),
                      pack.inner_text())
        self.assertEqual(page.evaluate("() => globalThis.honchoMarkupSeen"), [])
        self.assertIn("card", receipt.locator(".msg-kvps").inner_text())
        receipt.scroll_into_view_if_needed()
        kit.shoot(page, "receipt-expanded-pack")

        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-panel] button[data-action=clear_cache]").click()
        self.toast(page, "cached memory packs")
        page.reload(wait_until="networkidle")
        receipt = page.locator(RECEIPT)
        self.expand(receipt)
        pack = receipt.locator(".honcho-receipt-pack")
        wait_for(lambda: pack.count() and "no longer cached" in pack.inner_text(), 30,
                 "the receipt saying its pack is gone")
        self.assertNotIn("kayak", pack.inner_text())
        receipt.scroll_into_view_if_needed()
        kit.shoot(page, "receipt-no-longer-cached")


if __name__ == "__main__":
    unittest.main()
