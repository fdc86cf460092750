"""The pictures of docs/, made from a configured instance in the real Agent Zero v1.7 web UI against
the real Honcho, in headless Chromium: the Honcho key saved as Settings → Secrets saves it (the
auth-on server), a workspace with a user card and conclusions, a model provider's key (so Agent Zero
shows no "API key missing" banner), and a chat of a few turns with memory at work. The test asserts
what the pictures must show: no missing-key banner, the sidebar line saying ok, a receipt per turn
whose expanded pack holds the card, the card in the panel and the inspector, the project's settings
with their global notes. Then it shoots each view at 1440×900 and 390×844 (phone), dark and light:
`<view>[-phone]-<dark|light>.png`.

Its own Agent Zero: `.ci/run` runs every `tests/browser/a0_ui_*.py`. To regenerate docs/:
`HONCHO_HUB_SCREENSHOTS=docs $A0_PYTHON tests/browser/a0_ui_pictures.py` with `A0_HARNESS`,
`HONCHO_REAL_URL` and `HONCHO_REAL_AUTH_URL` set (the admin key from `HONCHO_REAL_ADMIN_KEY`, else
the real Honcho's state folder). The pictures are copied only when that variable names a folder.
"""

from __future__ import annotations

import os
import sys
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

import a0_ui_browser as kit  # noqa: E402
from host_kit import real_admin_key, required_env, wait_for  # noqa: E402
from mcp_fake import McpFake  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
RECEIPT = "[id^='process-step-honcho-receipt-']"
CARD = ["IDENTITY: Dana Reyes, marine biologist in Bergen",
        "ATTRIBUTE: Sails a 28 ft sloop called Wren from Sandviken marina",
        "PREFERENCE: Short answers, metric units",
        "INSTRUCTION: Check the wind before suggesting a sail"]
CONCLUSIONS = ["Dana is allergic to shellfish",
               "Dana had Wren's outboard serviced in May",
               "Dana plans a week on the Hardangerfjord in July"]
# The chat: what Dana types, what the (scripted) model answers.
TURNS = [("Plan Saturday for me: I want to get out on the water.",
          "Saturday: leave Sandviken with Wren by 08:00, wind 6–8 m/s easing after 14:00. "
          "Pack lunch (no shellfish) and be back by 16:00."),
         ("Anything to check on the boat first?",
          "The outboard was serviced in May; check the fuel and bring the spare shear pin."),
         ("And for July?",
          "For the Hardangerfjord week: book guest harbours early, plan 15–20 nm a day.")]
# View -> shot on a phone too (the project scope's page is the global one's with notes).
VIEWS = {"sidebar": True, "sidebar-panel": True, "receipt-chat": True, "inspector": True,
         "settings": True, "settings-project": False}
IDLE = "() => !Alpine.store('chats').selectedContext?.running"
# No transition or finite animation still running on the page.
SETTLED = """() => document.getAnimations().every(a => a.playState !== 'running'
  || a.effect.getComputedTiming().iterations === Infinity)"""
# A provider key as Agent Zero reads it (its default chat and utility provider): no model is called,
# the scripted model answers.
PROVIDER_KEY = {"API_KEY_OPENROUTER": "sk-or-v1-" + "0" * 64}


def setUpModule():
    # The module's own Agent Zero, configured as a user would: not a0_ui_browser's throwaway one.
    kit.shots = kit.tempfile.mkdtemp(prefix="honcho-pictures-")
    kit.mcp = McpFake()
    kit.ui = kit.AgentZeroUi(
        kit.mcp.url, api_key=real_admin_key(),
        env={**PROVIDER_KEY, "HONCHO_API_URL": required_env("HONCHO_REAL_AUTH_URL"),
             "HONCHO_WORKSPACE_ID": "dana-home-" + uuid.uuid4().hex[:4]})
    kit._pw = sync_playwright().start()
    kit.browser = kit._pw.chromium.launch(executable_path=kit.CHROMIUM, headless=True,
                                          args=kit.CHROMIUM_ARGS)


def tearDownModule():
    kit.tearDownModule()


class PicturesTest(kit.UiCase):
    taken: list[str]

    def shoot(self, page, view: str, phone: bool) -> None:
        # Taken once the page's transitions ended (a theme's colours, the sidebar sliding): Agent
        # Zero's endless animations (a pulsing dot) are not waited for.
        wait_for(lambda: page.evaluate(SETTLED), 10, "the page's transitions to end")
        self.taken.append(kit.shoot(page, view + ("-phone" if phone else "")))

    def set_theme(self, page, dark: bool) -> None:
        page.evaluate("(dark) => { Alpine.store('preferences').darkMode = dark; }", dark)
        wait_for(lambda: kit.theme(page) == ("dark" if dark else "light"), 10, "the theme")

    def sidebar_open(self, page) -> None:
        if page.locator("#left-panel.hidden").count():
            page.click("#toggle-sidebar")

    def sidebar_closed(self, page) -> None:
        """On a phone, Agent Zero's sidebar lies over the chat: slid out of sight."""
        if not page.locator("#left-panel.hidden").count():
            page.click("#toggle-sidebar")
        wait_for(lambda: page.locator("#left-panel").evaluate(kit.BOX)["right"] <= 1, 10,
                 "the sidebar out of sight")

    def chat_at_work(self) -> str:
        """The chat, typed in the UI: its id. Asserts no missing-key banner, a receipt per turn
        and the line saying ok."""
        kit.ui.set_card(CARD)
        for text in CONCLUSIONS:
            kit.ui.conclude(text, "chat-dana-notes")
        kit.ui.script([answer for _, answer in TURNS])
        page = self.open_page(viewport=DESKTOP)
        context_id = self.new_chat(page)
        for n, (text, answer) in enumerate(TURNS, 1):
            # Typed while the last turn still runs, a message would wait in Agent Zero's queue.
            wait_for(lambda: page.evaluate(IDLE), 60, "the agent done with the last turn")
            page.fill("#chat-input", text)
            page.press("#chat-input", "Enter")
            page.get_by_text(answer).first.wait_for(timeout=60_000)
            wait_for(lambda n=n: page.locator(RECEIPT).count() == n, 30, f"receipt {n}")
        wait_for(lambda: len(kit.ui.honcho_messages(f"chat-{context_id}")) >= 2 * len(TURNS), 60,
                 "the chat in Honcho")
        self.assertRegex(page.locator(RECEIPT).last.locator(".step-title").inner_text(),
                         r"^Honcho memory: (fresh|base|stale) · \d+ sections? · \d+ tokens")
        return context_id

    def open_chat(self, context_id: str, viewport: dict):
        page = self.open_page(viewport=viewport)
        page.evaluate("(id) => Alpine.store('chats').selectChat(id)", context_id)
        wait_for(lambda: page.locator(RECEIPT).count() == len(TURNS), 30, "the chat's receipts")
        state = page.locator(".honcho-sidebar-state")
        wait_for(lambda: state.inner_text() == "ok", 40, "the line saying ok")
        self.assertIn("honcho-sidebar-green",
                      page.locator(".honcho-sidebar-dot").get_attribute("class"))
        # Agent Zero asks for its banners when a chat is selected; none may say a key is missing.
        wait_for(lambda: page.evaluate("() => !!Alpine.store('composerBanner')"
                                       " && Alpine.store('composerBanner').lastRefresh > 0"
                                       " && Alpine.store('composerBanner').loading === false"),
                 20, "Agent Zero's banners")
        self.assertFalse(page.evaluate("() => Alpine.store('composerBanner').hasMissingApiKeys"))
        self.assertEqual(page.get_by_text("API key missing").count(), 0)
        return page

    def views(self, page, phone: bool) -> None:
        """Every view of VIEWS in the page's theme."""
        self.sidebar_open(page)
        self.shoot(page, "sidebar", phone)
        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        facts = panel.locator(".honcho-sidebar-card-fact")
        wait_for(lambda: facts.all_inner_texts() == CARD, 20, "the card in the panel")
        self.shoot(page, "sidebar-panel", phone)
        panel.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        wait_for(lambda: inspector.locator(".honcho-inspector-fact").all_inner_texts() == CARD, 30,
                 "the card in the inspector")
        inspector.locator("[data-testid=honcho-inspector-conclusion]").first.wait_for(
            timeout=30_000)
        self.shoot(page, "inspector", phone)
        page.locator(".modal-close").last.click()
        page.click(".honcho-sidebar-line")  # the panel closed again

        if phone:
            self.sidebar_closed(page)
        receipt = page.locator(RECEIPT).last
        if "expanded" not in (receipt.get_attribute("class") or ""):
            receipt.locator(".process-step-header").click()
        pack = receipt.locator(".honcho-receipt-pack")
        wait_for(lambda: pack.count() and CARD[1].split(": ")[1] in pack.inner_text(), 30,
                 "the card in the expanded receipt's pack")
        receipt.scroll_into_view_if_needed()
        self.shoot(page, "receipt-chat", phone)

        self.sidebar_open(page)
        self.open_settings(page, kit.TITLE)
        self.shoot(page, "settings", phone)
        if not phone:
            page.locator(".plugin-settings-toolbar-item", has_text="Project").locator(
                "select").select_option(kit.PROJECT)
            page.locator(".honcho-config-global-note:visible").first.wait_for(timeout=15_000)
            self.shoot(page, "settings-project", phone)
        page.locator(".modal-close").last.click()
        page.locator(".plugin-settings-body").wait_for(state="detached")
        page.locator(".modal-close").last.click()

    def test_a_configured_instance_shows_memory_at_work_in_each_size_and_theme(self):
        self.taken = []
        context_id = self.chat_at_work()
        for viewport in (DESKTOP, PHONE):
            page = self.open_chat(context_id, viewport)
            for dark in (True, False):
                self.set_theme(page, dark)
                self.views(page, viewport is PHONE)
        self.assertEqual(sorted(self.taken), sorted(
            f"{view}{size}-{theme}.png" for view, on_phone in VIEWS.items()
            for size in ("", "-phone") if on_phone or not size for theme in ("dark", "light")))


if __name__ == "__main__":
    unittest.main()
