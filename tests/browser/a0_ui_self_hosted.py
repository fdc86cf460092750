"""A self-hosted setup as a user makes it in the real Agent Zero v1.7 web UI: only HONCHO_API_URL,
kept in Agent Zero's secrets (Settings → Secrets), names the real local Honcho; the endpoint mode is
left at its default (hosted) and no MCP URL is set. The sidebar shows the deployment in effect
(self-hosted) and no MCP server, *Test API + MCP* says the MCP server is not configured in a neutral
toast, and the settings page's URL fields show the value in effect and where it comes from.

Runs under Agent Zero's Python with `A0_HARNESS` and `HONCHO_REAL_URL` set: `.ci/run` runs every
`tests/browser/a0_ui_*.py`, or `$A0_PYTHON tests/browser/a0_ui_self_hosted.py`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

import a0_ui_browser as kit  # noqa: E402
from host_kit import required_env, wait_for  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

SOURCE = "from HONCHO_API_URL (secrets)"
NO_MCP = "self-hosted, no MCP URL set"
# Run in the tree before the UI starts: the URL saved as Settings → Secrets saves it, and a
# workspace and outbox of the test's own as plugin settings (not HONCHO_* variables).
SETUP = """
import json, os
from helpers.secrets import get_default_secrets_manager
manager = get_default_secrets_manager()
manager.save_secrets_with_merge(manager.read_secrets_raw() + "\\nHONCHO_API_URL={url}\\n")
with open(os.path.join(host.tree, "usr", "plugins", "honcho", "config.json"), "w") as out:
    json.dump({{"workspace_id": {workspace!r}, "outbox_path": {outbox!r}}}, out)
"""

ui: kit.AgentZeroUi


def setUpModule():
    global ui
    kit.shots = tempfile.mkdtemp(prefix="honcho-shots-")
    tmp = tempfile.mkdtemp(prefix="honcho-self-hosted-")
    setup = SETUP.format(url=required_env("HONCHO_REAL_URL"), workspace="ui-self-hosted",
                         outbox=os.path.join(tmp, "outbox.sqlite3"))
    ui = kit.AgentZeroUi(None, honcho_env={}, setup=f"exec({setup!r})")
    ui.outbox_folder = tmp
    kit._pw = sync_playwright().start()
    kit.browser = kit._pw.chromium.launch(executable_path=kit.CHROMIUM, headless=True,
                                          args=kit.CHROMIUM_ARGS)


def tearDownModule():
    kit.browser.close()
    kit._pw.stop()
    ui.stop()
    shutil.rmtree(ui.outbox_folder, ignore_errors=True)
    target = os.environ.get("HONCHO_HUB_SCREENSHOTS")
    if target and os.path.isdir(target):
        for name in os.listdir(kit.shots):
            shutil.copy(os.path.join(kit.shots, name), os.path.join(target, name))
    shutil.rmtree(kit.shots, ignore_errors=True)


class SelfHostedTest(kit.UiCase):
    def test_the_sidebar_shows_self_hosted_and_the_check_says_mcp_not_configured(self):
        page = self.open_page(at=ui)
        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        mode = panel.locator("[data-field=mode]")
        mode.wait_for()
        self.assertEqual(mode.inner_text(), "self-hosted")
        self.assertEqual(mode.get_attribute("title"), SOURCE)
        self.assertEqual(panel.locator("[data-field=api_url]").inner_text(),
                         required_env("HONCHO_REAL_URL"))
        self.assertEqual(panel.locator("[data-field=mcp_url]").inner_text(), "not configured")
        self.assertEqual(panel.locator("[data-field=mcp_url]").get_attribute("title"), NO_MCP)
        kit.shoot(page, "sidebar-self-hosted")

        panel.locator("button[data-action=check]").click()
        toast = page.locator(".toast-item", has_text="API ok in").first
        toast.wait_for(timeout=20_000)
        self.assertIn(f"MCP not configured ({NO_MCP})", toast.inner_text())
        self.assertIn("notification-info", toast.get_attribute("class"))  # neutral: no warning

    def test_the_settings_page_shows_each_url_in_effect_and_where_it_comes_from(self):
        page = self.open_page(at=ui)
        self.open_settings(page, kit.TITLE)
        body = page.locator(".plugin-settings-body")
        api, mcp = (body.locator(f'[x-model="config.{name}"]') for name in ("api_url", "mcp_url"))
        expected = f"{required_env('HONCHO_REAL_URL')} — {SOURCE}"
        wait_for(lambda: api.get_attribute("placeholder") == expected, 15,
                 "the API URL in effect as the placeholder")
        self.assertEqual(api.input_value(), "")  # nothing saved: the placeholder is what is seen
        self.assertEqual(mcp.get_attribute("placeholder"), f"not configured — {NO_MCP}")
        # also beside each field, whole (a placeholder is cut at the field's width)
        self.assertEqual(body.locator("[data-field=mode_in_effect]").inner_text(),
                         f"In effect: self-hosted, {SOURCE}")
        self.assertEqual(body.locator("[data-field=api_url_in_effect]").inner_text(),
                         f"In effect: {expected}")
        self.assertEqual(body.locator("[data-field=mcp_url_in_effect]").inner_text(),
                         f"In effect: not configured — {NO_MCP}")
        kit.shoot(page, "settings-self-hosted")


if __name__ == "__main__":
    unittest.main()
