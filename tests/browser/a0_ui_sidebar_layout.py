"""What a user reads in the sidebar of the real Agent Zero v1.7 web UI, in headless Chromium, on a
desktop (1440×900) and a phone (390×844): the collapsed line says the state word and why without
being cut (its tooltip the full sentence), the panel's groups share one label column, and the
sidebar's and the inspector's buttons have readable text and, on a phone, tap targets of 32 px.
Sizes and positions are read from the page (element boxes, computed styles, scroll widths).

Runs under Agent Zero's Python with `A0_HARNESS` and `HONCHO_REAL_URL` set: `.ci/run` runs every
`tests/browser/a0_ui_*.py`, or `$A0_PYTHON tests/browser/a0_ui_sidebar_layout.py`.
"""

from __future__ import annotations

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

import a0_ui_browser as kit  # noqa: E402
from host_kit import wait_for  # noqa: E402

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
MIN_TEXT_PX = 13  # Agent Zero's own sidebar text is 15–16 px; ours is secondary, never below 13
MIN_TAP_PX = 32  # a finger's target on a phone
DEGRADED = ["Honcho unreachable (timeout after 5 s)", "3 dead letters (3 http_500)"]

# Each element of the root (itself included) whose text is cut: wider content than its box, or
# its box reaching past the sidebar's right edge.
CUT = """(root) => {
  const edge = document.querySelector('#left-panel').getBoundingClientRect().right;
  return [root, ...root.querySelectorAll('*')].filter(el => el.offsetParent !== null)
    .filter(el => el.scrollWidth > el.clientWidth + 1
      || el.getBoundingClientRect().right > edge + 1)
    .map(el => el.className + ': ' + JSON.stringify(el.textContent.trim())
      + ' scrollWidth ' + el.scrollWidth + ' clientWidth ' + el.clientWidth); }"""
# The left edge of the first value of each group shown.
VALUE_LEFTS = """() => [...document.querySelectorAll('.honcho-sidebar-group')]
  .filter(g => g.offsetParent !== null)
  .map(g => Math.round(g.querySelector('dd').getBoundingClientRect().left))"""
# Each shown button in the root: its text size and height.
BUTTONS = """(root) => [...root.querySelectorAll('button')].filter(b => b.offsetParent !== null)
  .map(b => ({text: b.textContent.trim(), font: parseFloat(getComputedStyle(b).fontSize),
              height: b.getBoundingClientRect().height}))"""


def setUpModule():
    kit.setUpModule()


def tearDownModule():
    kit.tearDownModule()


class SidebarLayoutTest(kit.UiCase):
    def degraded(self, page) -> None:
        """Agent Zero answers the status with health amber and two reasons (Honcho is not made
        unreachable for this: only what the page shows of such a state is under test)."""
        def answer(route):
            reply = route.fetch()
            body = reply.json()
            if body.get("ok"):
                body["status"]["health"], body["status"]["health_reasons"] = "amber", DEGRADED
            route.fulfill(response=reply, body=json.dumps(body))

        page.route("**/plugins/honcho/honcho_status", answer)

    def line_settled(self, page):
        line = page.locator(".honcho-sidebar-line")
        wait_for(lambda: "checking" not in line.inner_text().lower(), 15,
                 "the collapsed line's first status")
        return line

    def test_the_collapsed_line_says_the_state_and_why_uncut_with_the_sentence_as_tooltip(self):
        for viewport in (DESKTOP, PHONE):
            with self.subTest(viewport=viewport["width"]):
                page = self.open_page(prepare=self.degraded, viewport=viewport)
                line = self.line_settled(page)
                wait_for(lambda line=line: "unreachable" in line.inner_text(), 15,
                         "the degraded status")
                shown = " ".join(line.inner_text().split())
                self.assertIn("degraded", shown)
                self.assertIn("Honcho unreachable", shown)
                self.assertEqual(line.evaluate(CUT), [])
                title = line.get_attribute("title") or ""
                self.assertIn("degraded", title)
                for reason in DEGRADED:
                    self.assertIn(reason, title)

    def test_the_collapsed_line_of_a_fresh_instance_is_not_cut(self):
        for viewport in (DESKTOP, PHONE):
            with self.subTest(viewport=viewport["width"]):
                page = self.open_page(viewport=viewport)
                line = self.line_settled(page)
                self.assertEqual(line.evaluate(CUT), [])
                self.assertNotEqual(line.get_attribute("title"), "Honcho memory status")

    def test_the_panels_groups_start_their_values_at_one_x(self):
        for viewport in (DESKTOP, PHONE):
            with self.subTest(viewport=viewport["width"]):
                page = self.open_page(viewport=viewport)
                page.click(".honcho-sidebar-line")
                page.locator("[data-field=health]").wait_for(timeout=20_000)
                lefts = page.evaluate(VALUE_LEFTS)
                self.assertGreaterEqual(len(lefts), 3)
                self.assertEqual(len(set(lefts)), 1, f"values start at x {lefts}")

    def assert_buttons(self, root, phone: bool) -> None:
        buttons = root.evaluate(BUTTONS)
        self.assertTrue(buttons)
        small = [b for b in buttons if b["font"] < MIN_TEXT_PX - 0.05]
        self.assertEqual(small, [], f"text under {MIN_TEXT_PX} px")
        if phone:
            low = [b for b in buttons if b["height"] < MIN_TAP_PX - 0.5]
            self.assertEqual(low, [], f"tap targets under {MIN_TAP_PX} px")

    def test_sidebar_buttons_are_readable_and_tappable_on_a_phone(self):
        for viewport in (DESKTOP, PHONE):
            with self.subTest(viewport=viewport["width"]):
                page = self.open_page(viewport=viewport)
                line = self.line_settled(page)
                line.click()
                page.locator("[data-field=health]").wait_for(timeout=20_000)
                self.assert_buttons(page.locator(".honcho-sidebar-box"), viewport is PHONE)

    def test_inspector_buttons_are_readable_and_tappable_on_a_phone(self):
        kit.ui.set_card(["IDENTITY: Ada"])
        for viewport in (DESKTOP, PHONE):
            with self.subTest(viewport=viewport["width"]):
                page = self.open_page(viewport=viewport)
                self.line_settled(page).click()
                page.locator("[data-testid=honcho-open-inspector]").click()
                page.locator(".honcho-inspector [data-action=search]").wait_for(timeout=20_000)
                page.locator(".honcho-inspector [data-action=edit_card]").wait_for(timeout=20_000)
                self.assert_buttons(page.locator(".honcho-inspector"), viewport is PHONE)


if __name__ == "__main__":
    unittest.main(verbosity=2)
