"""The sidebar in headless Chromium: real webui files, real API handler classes, Alpine from npm.

Run by .ci/run (`python -m pytest -q tests/browser/sidebar_browser.py`), not by unittest discovery.
A loopback server serves the plugin's `webui/` and `extensions/webui/` files, small doubles of Agent
Zero's `/js/api.js`, `/js/AlpineStore.js` and toast module at their real paths, and answers
`/api/plugins/honcho/...` with the plugin's own ApiHandler classes over a stub host whose Honcho is a
loopback fake. Playwright drives Debian's Chromium. The panel's screenshot goes to docs/.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from fake_honcho import FakeHoncho  # noqa: E402
from hub_testkit import ROOT, StubApiHandler, classes_in, import_by_path, stub_agent_zero  # noqa: E402
from loopback import serve  # noqa: E402

from playwright.sync_api import sync_playwright  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SECRET = "hch-live-SUPERSECRETKEY-0123456789"
SCREENSHOT = os.path.join(ROOT, "docs", "sidebar.png")
EXTENSION = "extensions/webui/sidebar-bottom-wrapper-start/honcho-sidebar.html"
DOUBLES = os.path.join(HERE, "doubles")


def alpine_path() -> str:
    """Alpine.js from the npm registry, installed at test time into a cache folder (never committed)."""
    folder = os.path.join(tempfile.gettempdir(), "honcho-hub-alpine")
    script = os.path.join(folder, "node_modules", "alpinejs", "dist", "cdn.min.js")
    if not os.path.exists(script):
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", folder, "alpinejs@3"],
                       check=True, timeout=300)
    return script


class Site:
    """The loopback web server: static files, doubles, and the real API handlers."""

    def __init__(self, handlers: dict[str, type]) -> None:
        self.handlers, self.fail_next = handlers, 0
        self.alpine = alpine_path()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _file(self, path: str) -> str | None:
        if path == "/vendor/alpine.js":
            return self.alpine
        if path in ("/", "/index.html"):
            return os.path.join(DOUBLES, "index.html")
        if path.startswith(("/js/", "/components/")):
            return os.path.join(DOUBLES, os.path.basename(path))
        if path.startswith("/plugins/honcho/"):
            rel = path[len("/plugins/honcho/"):]
            if rel.startswith(("webui/", "extensions/webui/")) and ".." not in rel:
                return os.path.join(ROOT, rel)
        return None

    def _handler(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = site._file(self.path.split("?")[0])
                if not path or not os.path.isfile(path):
                    return self._send(404, b"not found", "text/plain")
                kind = "text/html" if path.endswith(".html") else "text/javascript"
                with open(path, "rb") as handle:
                    self._send(200, handle.read(), kind)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                name = self.path.rsplit("/", 1)[-1]
                if site.fail_next:
                    site.fail_next -= 1
                    return self._send(500, b"Internal Server Error", "text/plain")
                handler = site.handlers.get(name)
                if handler is None:
                    return self._send(404, b"no such handler", "text/plain")
                answer = asyncio.run(handler().process(body, None))
                self._send(200, json.dumps(answer).encode(), "application/json")

            def _send(self, status, data, kind):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class SidebarTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("npm") or not os.path.exists(CHROMIUM):
            raise RuntimeError("the browser test needs npm and Chromium (.ci/run installs them)")
        cls.fake = FakeHoncho(api_key=SECRET)
        cls.honcho = serve(cls.fake)
        cls.stub = stub_agent_zero()
        host = cls.stub.__enter__()
        host.config.update(api_url=cls.honcho.url, mcp_url=cls.honcho.url, workspace_id="browser-ws")
        host.secrets = {"HONCHO_API_KEY": SECRET}
        cls.start_agent_zero_side()
        handlers = {}
        for name in ("honcho_status", "honcho_action"):
            module = import_by_path(os.path.join(host.plugin_dir, "api", f"{name}.py"))
            handlers[name] = classes_in(module, StubApiHandler)[0]
        cls.site = Site(handlers)
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])

    @classmethod
    def start_agent_zero_side(cls):
        """As in a running Agent Zero: the worker started and a short conversation captured."""
        from usr.plugins.honcho.extensions.honcho_bridge.worker import ensure_worker, global_settings
        from usr.plugins.honcho.honcho_hub import runtime
        from usr.plugins.honcho.honcho_hub.capture import CaptureRequest, Role

        settings = global_settings()
        for n, text in enumerate(("I prefer green tea", "Noted: green tea.", "And short answers, please")):
            role = Role.USER if n % 2 == 0 else Role.AGENT
            runtime.capture_service(settings).capture(CaptureRequest("Br0wser1", role, f"b{n}", text), settings)
        worker = ensure_worker() or runtime.current_worker()
        worker.drain(30)

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()
        cls.playwright.stop()
        cls.site.close()
        cls.stub.__exit__(None, None, None)
        cls.honcho.close()

    def setUp(self):
        self.page = self.browser.new_page(viewport={"width": 420, "height": 900})
        self.addCleanup(self.page.close)
        self.page.goto(f"{self.site.url}/?extension=/plugins/honcho/{EXTENSION}")
        self.page.wait_for_selector(".honcho-line", timeout=15_000)

    def open_panel(self):
        self.page.click(".honcho-line")
        self.page.wait_for_selector("[data-field=workspace]", timeout=15_000)

    def last_toast(self, count: int) -> dict:
        self.page.wait_for_function(f"window.__toasts.length >= {count}", timeout=30_000)
        return self.page.evaluate("window.__toasts[window.__toasts.length - 1]")

    def test_the_panel_renders_real_status_and_every_action_answers(self):
        self.open_panel()
        self.assertEqual(self.page.inner_text("[data-field=workspace]"), "browser-ws")
        self.assertEqual(self.page.inner_text("[data-field=key]"), "set")
        self.assertIn("0 pending", self.page.inner_text("[data-field=queue]"))
        self.assertEqual(self.page.inner_text("[data-field=worker]"), "idle")
        self.assertEqual(len(self.fake.messages), 3)
        expected = {"check": "API ok", "wake": "orker", "drain": "Delivered 0", "retry_dead": "Requeued 0",
                    "clear_cache": "Cleared"}
        for n, (action, text) in enumerate(expected.items(), start=1):
            with self.subTest(action=action):
                self.page.click(f"button[data-action={action}]")
                toast = self.last_toast(n)
                self.assertEqual(toast["kind"], "success", toast)
                self.assertIn(text, toast["message"])
        self.page.wait_for_function("!document.querySelector('button[data-action=check]').disabled")
        os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
        self.page.locator(".honcho-hub").screenshot(path=SCREENSHOT)
        self.assertNotIn(SECRET, self.page.content())

    def test_a_server_error_shows_an_error_toast(self):
        self.open_panel()
        self.site.fail_next = 1
        self.page.click("button[data-action=drain]")
        toast = self.last_toast(1)
        self.assertEqual(toast["kind"], "error")
        self.assertNotIn("Traceback", toast["message"])

    def test_buttons_are_disabled_while_an_action_runs(self):
        self.open_panel()
        self.page.evaluate("Alpine.store('honchoHub').running = 'drain'")
        self.page.wait_for_function("document.querySelector('button[data-action=check]').disabled")
        self.assertEqual(self.page.inner_text("button[data-action=drain]"), "Working…")

    def test_nothing_in_the_dom_contains_a_secret(self):
        self.open_panel()
        self.page.click("button[data-action=check]")
        self.last_toast(1)
        html = self.page.content()
        for forbidden in (SECRET, SECRET[-12:], "outbox.sqlite3"):
            self.assertNotIn(forbidden, html)


if __name__ == "__main__":
    unittest.main()
