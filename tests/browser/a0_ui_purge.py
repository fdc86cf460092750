"""The sidebar's Purge in the real Agent Zero v1.7 web UI, in headless Chromium: the confirmation
says what goes in counts, a purge with a message not yet sent is refused in the page as text, a
forced one removes the outbox, its journals and the marker, a following turn makes none of them
again, and Resume brings memory back.

Its own Agent Zero (a purge holds the plugin in the process that serves the UI, which the other
browser tests need running): `.ci/run` runs every `tests/browser/a0_ui_*.py`, or
`$A0_PYTHON tests/browser/a0_ui_purge.py` with `A0_HARNESS` and `HONCHO_REAL_URL` set.
"""

from __future__ import annotations

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

import a0_ui_browser as kit  # noqa: E402
from host_kit import ROOT, wait_for  # noqa: E402

FIRST, SECOND, THIRD = ("Noted: two sailing boats.", "Noted: after the purge.",
                        "Noted: remembered again.")
# The line says the first word of the reason; its tooltip says it all.
PURGED_REASON = "purged: uninstall the plugin now, or resume memory"
PURGED_LINE = "purged"


def setUpModule():
    global state_home
    # The per-user state folder, where the UI process journals before its outbox folder has one:
    # this run's own, so the test sees every journal file the plugin makes there.
    state_home = tempfile.mkdtemp(prefix="honcho-ui-state-")
    os.environ["XDG_STATE_HOME"] = state_home
    kit.setUpModule()  # the UI it starts inherits that folder


def tearDownModule():
    kit.tearDownModule()
    import shutil

    shutil.rmtree(state_home, ignore_errors=True)


class PurgeTest(kit.UiCase):
    def outbox(self) -> str:
        return kit.ui.env["HONCHO_OUTBOX_PATH"]

    def ours(self) -> dict[str, bool]:
        """Which of the files a purge removes are on disk: the outbox, its SQLite side files, the
        journal folder beside it, the marker, and any journal file in the state folder."""
        path = self.outbox()
        journals = os.path.join(state_home, "honcho-hub", "journal")
        return {"outbox": os.path.exists(path), "wal": os.path.exists(path + "-wal"),
                "shm": os.path.exists(path + "-shm"),
                "journal folder": os.path.exists(os.path.join(os.path.dirname(path), "journal")),
                "marker": os.path.exists(path + ".recall-epoch"),
                "state journals": any(name.endswith(".journal") for name in
                                      (os.listdir(journals) if os.path.isdir(journals) else []))}

    def queue_undeliverable(self) -> None:
        """One message for a destination no worker of this Agent Zero reaches: it stays queued."""
        sys.path.insert(0, ROOT)
        from honcho_hub.storage.outbox import NewEvent, Outbox

        box = Outbox(self.outbox())
        try:
            box.enqueue_batches([[NewEvent("ev_purge_ui_1", "http://127.0.0.1:9#elsewhere",
                                           "elsewhere", "chat-elsewhere", "user", "user",
                                           "a message not yet sent", 1_700_000_000.0)]])
        finally:
            box.close()

    def say(self, page, text: str, answer: str) -> None:
        page.fill("#chat-input", text)
        page.press("#chat-input", "Enter")
        page.get_by_text(answer).first.wait_for(timeout=60_000)

    def test_purge_refused_with_a_message_queued_then_forced_then_resumed(self):
        kit.ui.script([FIRST, SECOND, THIRD])
        page = self.open_page()
        context_id = self.new_chat(page)
        self.say(page, "I keep two sailing boats", FIRST)
        session = f"chat-{context_id}"
        wait_for(lambda: len(kit.ui.honcho_messages(session)) >= 2, 30, "the chat in Honcho")
        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        clear = panel.locator("button[data-action=clear_cache]")
        clear.click()  # moves the marker beside the outbox
        self.toast(page, "cached memory packs")
        self.queue_undeliverable()
        on_disk = self.ours()
        self.assertTrue(on_disk["outbox"] and on_disk["marker"] and on_disk["state journals"],
                        on_disk)

        panel.locator("button[data-action=purge]").click()
        confirm = panel.locator("[data-testid=honcho-purge]")
        confirm.wait_for()
        wait_for(lambda: "1 message has not reached Honcho" in confirm.inner_text(), 20,
                 "the confirmation's count of messages not yet sent")
        shown = confirm.inner_text()
        self.assertRegex(shown, r"the outbox \(\d+ delivered, 1 pending, 0 sending, 0 dead")
        self.assertIn("Memory in Honcho is kept", shown)
        self.assertNotIn(self.outbox(), shown)
        self.assertNotIn("a message not yet sent", shown)
        confirm_button = confirm.locator("button[data-action=purge_confirm]")
        wait_for(lambda: confirm_button.evaluate(kit.SEEN), 10,
                 "the confirmation scrolled into the panel's view")
        page.screenshot(path=os.path.join(kit.shots, "purge-confirm.png"))

        confirm.locator("button[data-action=purge_confirm]").click()
        refusal = confirm.locator("[data-field=purge_refusal]")
        wait_for(lambda: refusal.count() and "Not purged" in refusal.inner_text(), 30,
                 "the refusal in the page")
        self.assertIn("1 pending", refusal.inner_text())
        self.assertEqual(self.ours(), on_disk)

        confirm.locator("input[data-action=purge_force]").check()
        confirm.locator("button[data-action=purge_confirm]").click()
        banner = panel.locator("[data-testid=honcho-purged]")
        banner.wait_for(timeout=30_000)
        resume = banner.locator("button[data-action=resume]")
        wait_for(lambda: resume.evaluate(kit.SEEN), 10, "the purged note in the panel's view")
        self.assertIn("uninstall the plugin, or resume memory", banner.inner_text())
        self.assertEqual(self.ours(), dict.fromkeys(on_disk, False))
        wait_for(lambda: page.locator(".honcho-sidebar-headline").inner_text() == PURGED_LINE,
                 20, "the line saying purged")
        self.assertIn(PURGED_REASON, page.locator(".honcho-sidebar-line").get_attribute("title"))
        page.screenshot(path=os.path.join(kit.shots, "purged.png"))

        self.say(page, "a turn after the purge", SECOND)
        # the open panel's status polls (every 5 s) read what is there, and make nothing either
        wait_for(lambda: page.locator(".honcho-sidebar-headline").inner_text() == PURGED_LINE
                 and panel.locator("[data-field=queue]").inner_text().startswith("0 pending"),
                 20, "a status read after the turn")
        self.assertEqual(self.ours(), dict.fromkeys(on_disk, False))
        self.assertEqual([m.content for m in kit.ui.honcho_messages(session)][-1], FIRST)

        resume.click()
        wait_for(lambda: not banner.count() or not banner.is_visible(), 20, "the banner gone")
        self.say(page, "remembered again", THIRD)
        wait_for(lambda: [m.content for m in kit.ui.honcho_messages(session)][-2:]
                 == ["remembered again", THIRD], 30, "the turn after resume in Honcho")
        self.assertTrue(self.ours()["outbox"])


if __name__ == "__main__":
    unittest.main()
