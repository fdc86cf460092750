"""The panel's *Upgraded from 1.x* row in the real Agent Zero v1.7 web UI, in headless Chromium:
what the upgrade moved and the names it set aside (from the file 1.x left: shown as text), with
how many more there are beyond the ones status lists.

`.ci/run` runs every `tests/browser/a0_ui_*.py`, or `$A0_PYTHON tests/browser/a0_ui_upgrade.py`
with `A0_HARNESS` and `HONCHO_REAL_URL` set.
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

MARKED = "<img src=x id=honchoxss>"  # a key of the 1.x file: text, never markup
SHOWN = 20  # settings.upgrade.MAX_NAMES_SHOWN


def setUpModule():
    kit.setUpModule()


def tearDownModule():
    kit.tearDownModule()


def write_record(set_aside: list[str]) -> None:
    """The record an upgrade leaves beside the plugin's config.json (settings/upgrade.py)."""
    record = {"upgrades": [{"at": 1_900_000_000.0, "from": "honcho 1.x", "file": "config.json",
                            "moved": {"honcho_workspace_id": "workspace_id"},
                            "set_aside": dict.fromkeys(set_aside, "x"), "why": {},
                            "original": {}}]}
    path = os.path.join(kit.ui.tree, "usr", "plugins", "honcho", "config.1x.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)


class UpgradeRowTest(kit.UiCase):
    def test_the_row_names_what_moved_what_was_set_aside_and_how_many_more(self):
        names = [MARKED] + [f"honcho_key_{i:02d}" for i in range(SHOWN + 2)]
        write_record(names)
        page = self.open_page()
        page.click(".honcho-sidebar-line")
        row = page.locator("[data-testid=honcho-panel] [data-field=upgrade]")
        wait_for(lambda: row.count() and row.is_visible(), 20, "the upgrade row")
        shown = row.inner_text()
        self.assertTrue(shown.startswith("moved workspace_id · set aside "), shown)
        self.assertIn(MARKED, shown)
        self.assertIn(f" and {len(names) - SHOWN} more (in config.1x.json)", shown)
        self.assertEqual(page.locator("#honchoxss").count(), 0)


if __name__ == "__main__":
    unittest.main()
