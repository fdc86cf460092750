"""Correct, with what evidence there is, in the real Agent Zero v1.7 web UI, in headless Chromium,
against the real Honcho: each conclusion in the inspector shows its level and session; its evidence
shows what rests on it, the chat's messages before it was made, and for a derived one that this
server does not say what it rests on; conclusions list by level (contradiction included); a wrong
conclusion is corrected in one step (its forget undoable), and a card fact in place. Every text
from Honcho is shown as text.

Its own Agent Zero: `.ci/run` runs every `tests/browser/a0_ui_*.py`, or
`$A0_PYTHON tests/browser/a0_ui_correct.py` with `A0_HARNESS` and `HONCHO_REAL_URL` set.
Screenshots go to `HONCHO_HUB_SCREENSHOTS` when it names a folder (docs/correct*.png).
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

SESSION = "chat-correct01"
WRONG = "The user lives in Bergen"
MARKED = "The user rows on <b id=honchoxss>Sundays</b>"
INERT = MARKED.replace("<", "\u2039").replace(">", "\u203a")
RIGHT = "The user lives in Oslo"


def setUpModule():
    kit.setUpModule()


def tearDownModule():
    kit.tearDownModule()


def levels() -> dict[str, str]:
    """The agent's conclusions about the user in the real Honcho: id -> level."""
    return {c.id: c.level for c in kit.ui.honcho().peer("agent-zero").conclusions_of("user")
            .list(size=100).items}


class CorrectTest(kit.UiCase):
    def test_a_correction_shows_level_session_and_premises_or_what_the_server_cannot(self):
        ui = kit.ui
        ui.post_turns(SESSION, ["I live in Bergen", "Noted.", "I row on Sundays", "Nice."])
        wrong = ui.conclude(WRONG, SESSION)
        ui.conclude(MARKED, SESSION)
        ui.honcho().schedule_dream(observer="agent-zero", observed="user")
        derived = wait_for(lambda: [cid for cid, level in levels().items()
                                    if level == "deductive"], 180, "the dream's deduction")[0]
        ui.set_card(["IDENTITY: user", "ATTRIBUTE: Lives in Bergen"])

        page = self.open_page()
        page.evaluate(kit.WATCH_MARKUP)
        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        item = inspector.locator(f"[data-testid=honcho-inspector-conclusion][data-id='{wrong}']")
        item.wait_for(timeout=30_000)
        self.assertEqual(item.locator("[data-field=level]").inner_text(), "explicit")
        self.assertIn(f"session {SESSION}", item.locator(".honcho-inspector-meta").inner_text())

        item.locator("[data-action=evidence]").click()
        evidence = item.locator("[data-testid=honcho-inspector-evidence]")
        rested = evidence.locator("[data-field=rested_on_by] li")
        wait_for(lambda: rested.count() >= 1, 30, "what rests on the wrong conclusion")
        self.assertIn("fake deduction", " ".join(rested.all_inner_texts()))
        self.assertIn("Honcho does not say which", evidence.locator("[data-field=premises]")
                      .inner_text())
        evidence.locator("[data-action=messages]").click()
        said = evidence.locator("[data-field=messages] li")
        wait_for(lambda: said.count() >= 1, 30, "the chat's messages")
        self.assertIn("I live in Bergen", " ".join(said.all_inner_texts()))

        up = inspector.locator(f"[data-testid=honcho-inspector-conclusion][data-id='{derived}']")
        self.assertEqual(up.locator("[data-field=level]").inner_text(), "deductive")
        up.locator("[data-action=evidence]").click()
        premises = up.locator("[data-testid=honcho-inspector-evidence] [data-field=premises]")
        premises.wait_for(timeout=30_000)
        self.assertIn("does not say which conclusions", premises.inner_text())
        up.scroll_into_view_if_needed()
        kit.shoot(page, "correct-evidence-premises")

        chooser = inspector.locator("[data-field=level_filter]")
        chooser.select_option("contradiction")
        inspector.locator("[data-field=no_level_match]").wait_for(timeout=30_000)
        chooser.select_option("deductive")
        wait_for(lambda: inspector.locator("[data-testid=honcho-inspector-conclusion]")
                 .all() and {e.get_attribute("data-id") for e in inspector.locator(
                     "[data-testid=honcho-inspector-conclusion]").all()} == {derived},
                 30, "only the deduction listed")
        chooser.select_option("")

        item.wait_for(timeout=30_000)
        item.locator("[data-action=correct]").click()
        form = item.locator("[data-testid=honcho-inspector-correct]")
        self.assertEqual(form.locator("[data-field=correction]").input_value(), WRONG)
        form.locator("[data-field=correction]").fill(RIGHT)
        self.assertIn(wrong, ui.conclusions(), "nothing changes before the confirm")
        form.locator("[data-action=confirm_correct]").click()
        self.toast(page, f"Corrected conclusion {wrong}")
        item.wait_for(state="detached", timeout=30_000)
        kept = ui.conclusions()
        self.assertNotIn(wrong, kept)
        self.assertIn(RIGHT, kept.values())
        forgotten = inspector.locator(
            f"[data-testid=honcho-inspector-write][data-kind=forget][data-id='{wrong}']")
        forgotten.locator("[data-action=undo]").wait_for(timeout=30_000)
        self.assertIn(INERT, inspector.inner_text())
        forgotten.scroll_into_view_if_needed()
        kit.shoot(page, "correct-replaced-with-undo")

        inspector.locator("[data-action=start_correct_fact]").click()
        fix = inspector.locator("[data-testid=honcho-inspector-correct-fact]")
        fix.locator("[data-field=fact_choice]").select_option("ATTRIBUTE: Lives in Bergen")
        fix.locator("[data-field=fact_correction]").fill("ATTRIBUTE: Lives in Oslo")
        fix.locator("[data-action=confirm_correct_fact]").click()
        self.toast(page, "Corrected a fact of the agent's card of the user.")
        self.assertEqual(ui.honcho().peer("agent-zero").get_card(target="user"),
                         ["IDENTITY: user", "ATTRIBUTE: Lives in Oslo"])
        self.assertEqual(page.evaluate("() => globalThis.honchoMarkupSeen"), [])


class LevelListingTest(kit.UiCase):
    def test_a_search_ends_the_listing_by_level(self):
        kit.ui.post_turns("chat-level01", ["I sail on Saturdays", "Noted."])
        kit.ui.conclude("The user sails on Saturdays", "chat-level01")
        page = self.open_page()
        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        inspector.locator("[data-testid=honcho-inspector-conclusion]").first.wait_for(
            timeout=30_000)
        chooser = inspector.locator("[data-field=level_filter]")
        chooser.select_option("contradiction")
        inspector.locator("[data-field=no_level_match]").wait_for(timeout=30_000)
        inspector.locator("[data-field=query]").fill("sailing")
        inspector.locator("[data-field=query]").press("Enter")
        wait_for(lambda: chooser.input_value() == "", 30,
                 "the level chooser back at 'all' for a search's results")
        self.assertEqual(inspector.locator("[data-field=no_level_match]").count(), 0)

    def test_a_listing_by_level_pages_past_its_first_page(self):
        honcho = kit.ui.honcho()
        kit.ui.conclude("The user sails on Saturdays", "chat-level02")
        honcho.peer("agent-zero").conclusions_of("user").create(
            [{"content": f"The user owns boat number {n}", "session_id": "chat-level02"}
             for n in range(55)])
        page = self.open_page()
        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        shown = inspector.locator("[data-testid=honcho-inspector-conclusion]")
        shown.first.wait_for(timeout=30_000)
        inspector.locator("[data-field=level_filter]").select_option("explicit")
        pager = inspector.locator("[data-testid=honcho-inspector-level-pages]")
        pager.wait_for(timeout=30_000)
        first = set(shown.evaluate_all("items => items.map(i => i.dataset.id)"))
        pager.locator("[data-action=older]").click()
        wait_for(lambda: "page 2 of" in pager.inner_text(), 30, "the level's second page")
        second = set(shown.evaluate_all("items => items.map(i => i.dataset.id)"))
        self.assertTrue(second and not first & second, "another page of the level")


if __name__ == "__main__":
    unittest.main()
