"""How the memory inspector looks and waits in the real Agent Zero v1.7 web UI, in headless
Chromium: its search box wears Agent Zero's own input style in dark and in light mode; in each
confirmation that deletes or overwrites memory the safe choice is Agent Zero's primary button
and the destructive one its red one; and the base pack, not loaded when the inspector opens, is
shown once it arrives, asked again a bounded number of times while the inspector is open and
never after it closes. Colours are read from the page (getComputedStyle), compared with Agent
Zero's own elements.

Its own Agent Zero: `.ci/run` runs every `tests/browser/a0_ui_*.py`, or
`$A0_PYTHON tests/browser/a0_ui_inspector_look.py` with `A0_HARNESS` and `HONCHO_REAL_URL` set.
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

INSPECTOR_API = "/plugins/honcho/honcho_inspector"
LOOK = ["backgroundColor", "color", "borderTopColor", "borderTopStyle", "borderRadius",
        "paddingLeft", "fontFamily"]
# The look of an element, and of Agent Zero's own elements made beside the inspector: a text input
# (Agent Zero's input rule), its primary button (.btn.btn-ok) and its accent (its red: the outline
# and text of .btn-cancel, the text of a dialog's cancel).
AGENT_ZEROS_LOOK = """(props) => {
  const made = ['input', 'button', 'span'].map(tag => document.createElement(tag));
  made[0].type = 'text';
  made[1].className = 'btn btn-ok';
  made[2].style.color = 'var(--color-accent)';
  made.forEach(el => document.body.appendChild(el));
  const look = (el) => Object.fromEntries(props.map(p => [p, getComputedStyle(el)[p]]));
  const seen = {input: look(made[0]), primary: look(made[1]).backgroundColor,
                accent: look(made[2]).color};
  made.forEach(el => el.remove());
  return seen;
}"""
# Logs each call of the inspector's API by action, in the page, at the moment fetch is called.
RECORD_ACTIONS = """() => {
  globalThis.honchoTestActions = [];
  const send = globalThis.fetch;
  globalThis.fetch = function (url, request) {
    if (String(url).endsWith('/plugins/honcho/honcho_inspector'))
      globalThis.honchoTestActions.push(JSON.parse(request.body).action);
    return send.apply(this, arguments);
  };
}"""


def setUpModule():
    kit.setUpModule()


def tearDownModule():
    kit.tearDownModule()


TRANSITIONS_ENDED = ("() => document.getAnimations().every(a => a.playState !== 'running'"
                     " || a.effect.getComputedTiming().endTime === Infinity)")


class InspectorLookTest(kit.UiCase):
    def open_inspector(self, page):
        button = page.locator("[data-testid=honcho-open-inspector]")
        if not button.is_visible():  # the panel is closed: the line opens it
            page.click(".honcho-sidebar-line")
        button.click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        inspector.wait_for(timeout=20_000)
        return inspector

    def set_dark(self, page, dark: bool) -> None:
        page.evaluate("(dark) => { Alpine.store('preferences').darkMode = dark; }", dark)
        wait_for(lambda: page.evaluate("() => document.body.classList.contains('light-mode')")
                 is not dark, 10, "Agent Zero's mode applied")
        # Agent Zero's inputs move to the new colours in a 0.3 s transition: read them after it
        page.wait_for_function(TRANSITIONS_ENDED)

    def look(self, locator) -> dict:
        """The element's settled style: not under the pointer (a button that appeared where the
        last click was wears its hover colours), after every transition."""
        locator.page.mouse.move(0, 0)
        locator.page.wait_for_function(TRANSITIONS_ENDED)
        return locator.evaluate("(el, props) => Object.fromEntries(props.map(p => "
                                "[p, getComputedStyle(el)[p]]))", LOOK)

    def test_the_search_box_wears_agent_zeros_input_style_in_dark_and_light_mode(self):
        page = self.open_page()
        inspector = self.open_inspector(page)
        query = inspector.locator("[data-field=query]")
        for dark in (True, False):
            with self.subTest(mode="dark" if dark else "light"):
                self.set_dark(page, dark)
                agent_zero = page.evaluate(AGENT_ZEROS_LOOK, LOOK)
                self.assertEqual(self.look(query), agent_zero["input"])
                # the inspector's other text input, for comparison: Agent Zero's rule styles it
                self.assertEqual(self.look(inspector.locator("[data-field=remember_text]")),
                                 agent_zero["input"])
        self.set_dark(page, True)

    def assert_safe_is_primary(self, page, box, safe: str, destructive: str) -> None:
        agent_zero = page.evaluate(AGENT_ZEROS_LOOK, LOOK)
        kept = self.look(box.get_by_role("button", name=safe, exact=True))
        gone = self.look(box.get_by_role("button", name=destructive, exact=True))
        self.assertEqual(kept["backgroundColor"], agent_zero["primary"],
                         f"{safe!r}, the safe choice, is Agent Zero's primary button")
        self.assertNotEqual(gone["backgroundColor"], agent_zero["primary"],
                            f"{destructive!r} is not the primary button")
        self.assertEqual((gone["color"], gone["borderTopColor"]),
                         (agent_zero["accent"], agent_zero["accent"]),
                         f"{destructive!r} wears Agent Zero's red")

    def test_each_confirmation_makes_the_safe_choice_primary_and_the_destructive_one_red(self):
        kit.ui.set_card(["ATTRIBUTE: Keeps bees", "INSTRUCTION: Reply briefly"])
        cid = kit.ui.conclude("The user keeps bees in the garden", "chat-look01")
        page = self.open_page()
        inspector = self.open_inspector(page)
        item = inspector.locator(f"[data-testid=honcho-inspector-conclusion][data-id='{cid}']")
        item.wait_for(timeout=20_000)
        for dark in (True, False):
            with self.subTest(mode="dark" if dark else "light"):
                self.set_dark(page, dark)
                item.locator("[data-action=forget]").click()
                confirm = item.locator("[data-testid=honcho-inspector-confirm]")
                self.assert_safe_is_primary(page, confirm, "Keep", "Forget")
                confirm.get_by_role("button", name="Keep", exact=True).click()

                item.locator("[data-action=correct]").click()
                correct = item.locator("[data-testid=honcho-inspector-correct]")
                self.assert_safe_is_primary(page, correct, "Cancel", "Replace")
                correct.get_by_role("button", name="Cancel", exact=True).click()

                inspector.locator("[data-action=start_correct_fact]").click()
                fact = inspector.locator("[data-testid=honcho-inspector-correct-fact]")
                self.assert_safe_is_primary(page, fact, "Cancel", "Replace the fact")
                fact.get_by_role("button", name="Cancel", exact=True).click()

                inspector.locator("[data-action=rebuild_card]").click()
                rebuild = inspector.locator("[data-testid=honcho-inspector-rebuild]")
                self.assert_safe_is_primary(page, rebuild, "Keep", "Rebuild")
                rebuild.get_by_role("button", name="Keep", exact=True).click()

                inspector.locator("[data-action=edit_card]").click()
                card = inspector.locator("[data-testid=honcho-inspector-card]")
                self.assert_safe_is_primary(page, card, "Cancel", "Save card")
                card.get_by_role("button", name="Cancel", exact=True).click()
        self.set_dark(page, True)
        self.assertIn(cid, kit.ui.conclusions(), "nothing was forgotten")

    def test_the_remember_box_is_wider_than_its_lifetime_and_each_items_actions_share_a_row(
            self):
        kit.ui.conclude("The user keeps bees in the garden", "chat-look02")
        page = self.open_page()
        inspector = self.open_inspector(page)
        item = inspector.locator("[data-testid=honcho-inspector-conclusion]").first
        item.wait_for(timeout=20_000)
        for size in ((1440, 900), (390, 844)):
            with self.subTest(size=size):
                page.set_viewport_size({"width": size[0], "height": size[1]})
                text = inspector.locator("[data-field=remember_text]").bounding_box()
                lifetime = inspector.locator("[data-field=remember_for]").bounding_box()
                self.assertGreater(text["width"], lifetime["width"],
                                   "the fact's box is wider than the choice of its lifetime")
                boxes = {name: item.locator(f"[data-action={name}]").bounding_box()
                         for name in ("forget", "correct", "evidence")}
                # One row: every button's top is above every other's bottom (buttons one under
                # another do not overlap; on one row their tops may differ by a pixel or two).
                spans = {name: (round(b["y"]), round(b["y"] + b["height"]))
                         for name, b in boxes.items()}
                self.assertLess(max(top for top, _ in spans.values()),
                                min(bottom for _, bottom in spans.values()),
                                f"one row of actions: {spans}")

    def test_the_base_pack_is_shown_when_it_arrives_without_reopening(self):
        kit.ui.set_card(["ATTRIBUTE: Keeps bees"])
        page = self.open_page()
        # recall's cache emptied (the panel's Clear cache): the base pack is not loaded
        page.evaluate("""async () => { const api = await import('/js/api.js');
            await api.callJsonApi('/plugins/honcho/honcho_action', {action: 'clear_cache'}); }""")
        # expect_response, not a listener polled by wait_for: Playwright's sync API delivers
        # events only inside its own calls, so an answer that comes after the inspector opened
        # would never reach a listener while wait_for sleeps
        with page.expect_response(lambda r: r.url.endswith(INSPECTOR_API)
                                  and r.request.post_data is not None
                                  and json.loads(r.request.post_data)["action"] == "view",
                                  timeout=20_000) as viewed:
            inspector = self.open_inspector(page)
        self.assertEqual(viewed.value.json()["base_pack"]["state"], "loading",
                         "not loaded when the inspector opened")
        shown = inspector.locator("[data-field=base_pack]")
        wait_for(lambda: "Not loaded yet" not in shown.inner_text(), 60,
                 "the base pack shown once it arrived")
        # what reopening would show
        again = page.evaluate("""async () => { const api = await import('/js/api.js');
            return (await api.callJsonApi('/plugins/honcho/honcho_inspector',
                {action: 'view', context: globalThis.getContext()})).base_pack; }""")
        self.assertNotEqual(again["state"], "loading")
        self.assertEqual(page.evaluate("() => Alpine.store('honchoInspector').basePack"), again)
        self.assertEqual(inspector.locator("pre[data-field=base_pack]").count(),
                         1 if again["state"] == "ready" else 0)

    def test_a_base_pack_that_never_arrives_is_asked_a_bounded_number_of_times_only_while_open(
            self):
        def loading(route):
            if json.loads(route.request.post_data or "{}").get("action") != "base_pack":
                return route.continue_()
            route.fulfill(status=200, content_type="application/json", headers={
                "cache-control": "no-store"}, body=json.dumps(
                {"ok": True, "base_pack": {"state": "loading", "text": ""}}))

        def view_loading(route):
            body = json.loads(route.request.post_data or "{}")
            if body.get("action") != "view":
                return loading(route)
            shown = route.fetch().json()
            shown["base_pack"] = {"state": "loading", "text": ""}
            route.fulfill(status=200, content_type="application/json", body=json.dumps(shown))

        page = self.open_page(fake_clock=True, prepare=lambda p: p.route(
            f"**{INSPECTOR_API}", view_loading))
        page.evaluate(RECORD_ACTIONS)
        inspector = self.open_inspector(page)
        note = inspector.locator("[data-field=base_pack]")
        wait_for(lambda: "loading" in note.inner_text(), 20, "the loading note")
        page.clock.pause_at(page.evaluate("() => Date.now()") + 1000)

        def asked() -> list[str]:
            return [a for a in page.evaluate("() => globalThis.honchoTestActions")
                    if a == "base_pack"]

        for _ in range(120):  # ten minutes, five seconds at a time; each answer let in between
            page.clock.run_for(5000)
            page.evaluate("() => new Promise(r => queueMicrotask(r))")
        tries = len(asked())
        self.assertGreater(tries, 0, "asked again while open")
        self.assertLessEqual(tries, 30, "a bounded number of times")
        self.assertIn("reopen", note.inner_text())

        page.locator(".modal-close").last.click()
        wait_for(lambda: page.evaluate(
            "() => Alpine.store('honchoInspector').basePack === null"), 10, "the inspector closed")
        inspector.wait_for(state="detached", timeout=10_000)
        # opened again, then closed while loading: nothing is asked once closed
        inspector = self.open_inspector(page)
        wait_for(lambda: "loading" in inspector.locator("[data-field=base_pack]").inner_text(), 20,
                 "the loading note again")
        page.locator(".modal-close").last.click()
        inspector.wait_for(state="detached", timeout=10_000)
        before = len(asked())
        for _ in range(24):
            page.clock.run_for(5000)
        page.evaluate("() => new Promise(r => queueMicrotask(r))")
        self.assertEqual(len(asked()), before, "nothing asked while closed")


if __name__ == "__main__":
    unittest.main()
