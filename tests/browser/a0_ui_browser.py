"""The plugin in the real Agent Zero v1.7 web UI, in headless Chromium: the sidebar line and panel,
each action and its toast, the memory inspector, the settings page in global and project scope, that
none of it restyles Agent Zero or another plugin, and that markup from outside (Honcho, the MCP
server, a chat id, an error) is shown as text. Layout is asserted from computed styles and element
boxes. The MCP URL is a loopback fake MCP server (tests/mcp_fake.py), whose name a test may set.

Runs under Agent Zero's Python (`$A0_PYTHON`, which has Playwright) with `A0_HARNESS` and
`HONCHO_REAL_URL` set: `.ci/run` runs it, or `$A0_PYTHON tests/browser/a0_ui_browser.py`. The UI is
served from a fresh tree holding a copy of this checkout. Screenshots go to a temporary folder; they
are copied into `HONCHO_HUB_SCREENSHOTS` only when that variable names a folder (docs/ on purpose).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
import uuid
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.dirname(HERE))

from host_kit import REAL_AGENT_ZERO, new_tree, required_env, wait_for  # noqa: E402
from mcp_fake import McpFake  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROJECT = "alpha"
TITLE = "Honcho Memory Hub"
SCRIPTED_ANSWER = "Noted: you keep two sailing boats."
OUR_FILES = "**/plugins/honcho/**"
PX = 1.5  # tolerance for sub-pixel layout

# Computed styles that give an element its place and look; compared with our extension present
# and absent. (A backslash at a line's end inside these scripts joins it to the next line.)
STYLE_PROBE = """(selectors) => selectors.flatMap(sel => [...document.querySelectorAll(sel)]\
.slice(0, 60).map((el, i) => {
  const c = getComputedStyle(el), b = el.getBoundingClientRect();
  return [sel + '#' + i, c.display, c.gridTemplateColumns, c.marginLeft, c.marginRight, \
c.paddingLeft,
          c.paddingRight, c.fontSize, c.fontWeight, c.color, Math.round(b.left), \
Math.round(b.width)].join(' | ');
}))"""
# Logs the fake time and `light` flag of each status request as the page sends it (its fetch call,
# in the page's own clock), so intervals are measured in fake time, whatever the network's real
# delay.
RECORD_STATUS_POLLS = """() => {
  globalThis.honchoTestPolls = [];
  const send = globalThis.fetch;
  globalThis.fetch = function (url, request) {
    if (String(url).endsWith('/plugins/honcho/honcho_status')) {
      globalThis.honchoTestPolls.push({at: Date.now(), light: JSON.parse(request.body).light});
    }
    return send.apply(this, arguments);
  };
}"""
# What Agent Zero's chat list and state sync hold, for a chat that was not selected.
SYNC_STATE = """() => { const c = Alpine.store('chats'), s = Alpine.store('sync');
  return {selected: c.selected, contexts: (c.contexts || []).length, sync_mode: s && s.mode}; }"""
# Whether a user sees the element and can click it: its centre hits it, not something drawn over it,
# and it is not clipped away (a zero-height box, or a point outside the overflow box that holds it).
SEEN = """(el) => { const b = el.getBoundingClientRect(); \
if (b.width < 1 || b.height < 1) return false;
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2); \
return !!hit && el.contains(hit); }"""
# Records every element our markup would create, from now on, wherever it is added (a toast is gone
# seconds after it showed; its image's onerror would already have run).
WATCH_MARKUP = """() => { globalThis.honchoMarkupSeen = [];
  new MutationObserver(records => { for (const r of records) for (const n of r.addedNodes) {
    if (n.nodeType !== 1) continue;
    for (const el of [n, ...n.querySelectorAll('*')]) {
      if (el.id === 'honchoxss' || (el.tagName === 'IMG' && el.getAttribute('src') === 'x')) {
        globalThis.honchoMarkupSeen.push(el.outerHTML.slice(0, 120)); } } } })
    .observe(document, {subtree: true, childList: true}); }"""
BOX = ("(el) => { const b = el.getBoundingClientRect();"
       " return {left: b.left, right: b.right, width: b.width}; }")


# Agent Zero's chats store, where v1.7 keeps it, and where the test moves it (v2.x may move it).
CHATS_STORE = "/components/sidebar/chats/chats-store.js"
MOVED_CHATS_STORE = "/components/sidebar/chats/chats-store-moved.js"


def wait_on_page(page, predicate, timeout_s: float, what: str):
    """`wait_for` for lists that Playwright's event and route handlers fill: its sync API runs
    those handlers only inside its own calls, so each try first makes one."""
    def after_events():
        page.wait_for_timeout(1)
        return predicate()
    return wait_for(after_events, timeout_s, what)


def move_chats_store(page) -> None:
    """As if Agent Zero had moved its chats store: its own files import it from another path, and
    the old one answers 404 (the files are rewritten on their way to the page, not on disk)."""
    def agent_zeros_source(url: str) -> bool:
        path = urlsplit(url).path
        return (url.startswith(ui.url + "/") and path.endswith((".js", ".html"))
                and "/plugins/honcho/" not in path)

    def import_moved(route) -> None:
        response = route.fetch()
        route.fulfill(response=response, body=response.text().replace(
            os.path.basename(CHATS_STORE), os.path.basename(MOVED_CHATS_STORE)))

    def serve_moved(route) -> None:
        route.fulfill(response=route.fetch(
            url=route.request.url.replace(MOVED_CHATS_STORE, CHATS_STORE)))

    # The route added last is tried first.
    page.route(agent_zeros_source, import_moved)
    page.route("**" + MOVED_CHATS_STORE, serve_moved)
    page.route("**" + CHATS_STORE, lambda route: route.fulfill(status=404, body="Not Found"))


def theme(page) -> str:
    """"dark" or "light": the theme Agent Zero shows the page in, for a picture's name."""
    dark = page.evaluate("() => document.body.classList.contains('dark-mode')")
    return "dark" if dark else "light"


def shoot(page, name: str) -> str:
    """A picture of the page in the screenshots folder, its name ending in the theme it shows
    (`name-dark.png`); the file's name."""
    file_name = f"{name}-{theme(page)}.png"
    page.screenshot(path=os.path.join(shots, file_name))
    return file_name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AgentZeroUi:
    """A tree with the plugin copied in and a project, served by Agent Zero's own run_ui."""

    def __init__(self, mcp_url: str | None, env: dict[str, str] | None = None,
                 api_key: str | None = None, honcho_env: dict[str, str] | None = None,
                 setup: str = "") -> None:
        """`env`: variables for Agent Zero beyond (or over) the plugin's URLs, workspace and
        outbox; `honcho_env`: the only HONCHO_* variables Agent Zero gets, instead of those;
        `api_key`: the Honcho key, stored as Settings → Secrets stores it; `setup`: Python run in
        the tree (`host` is a0host's) before the UI starts."""
        self.tmp = tempfile.mkdtemp(prefix="honcho-ui-")
        self._honcho = None
        self._http = None
        self.api_key = api_key
        if honcho_env is None:
            base = {**os.environ, "HONCHO_API_URL": required_env("HONCHO_REAL_URL"),
                    "HONCHO_WORKSPACE_ID": "ui-" + uuid.uuid4().hex[:12],
                    "HONCHO_MCP_URL": mcp_url or "",
                    "HONCHO_OUTBOX_PATH": os.path.join(self.tmp, "outbox.sqlite3")}
        else:
            base = {**{name: value for name, value in os.environ.items()
                       if not name.startswith("HONCHO_")}, **honcho_env}
        self.env = {**base, **(env or {})}
        self.workspace_id = self.env.get("HONCHO_WORKSPACE_ID") or "ui-" + uuid.uuid4().hex[:12]
        self.tree = new_tree(self.tmp)
        secret = (f"host_kit.save_secret('HONCHO_API_KEY', {api_key!r}); " if api_key else "")
        self._run_in_agent_zero(f"{secret}host.create_project({PROJECT!r}); "
                                f"a0host.write_script(host.tree, [{SCRIPTED_ANSWER!r}]); {setup}")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        started = subprocess.run(
            [os.path.join(REAL_AGENT_ZERO, "serve-ui"), self.tree, "--port", str(self.port)],
            env=self.env, capture_output=True, text=True, timeout=180)
        if started.returncode != 0:
            raise RuntimeError(f"serve-ui failed: {started.stderr[-2000:]}")

    def _run_in_agent_zero(self, code: str) -> None:
        script = f"import a0host, host_kit; host = a0host.start({self.tree!r}); {code}"
        done = subprocess.run([sys.executable, "-c", script],
                              env={**self.env, "PYTHONPATH": os.pathsep.join(
                                  [required_env("A0_HARNESS"), os.path.join(HERE, "..", "host")])},
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"preparing the tree failed: {done.stderr[-2000:]}")

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        subprocess.run([os.path.join(REAL_AGENT_ZERO, "stop-ui"), "--port", str(self.port)],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def honcho(self):
        """One client of the real Honcho for the whole run (a client per call left its sockets
        unclosed)."""
        import httpx
        from honcho import Honcho

        if self._honcho is None:
            # Its HTTP client is ours, so that stop() closes its sockets.
            self._http = httpx.Client()
            self._honcho = Honcho(base_url=self.env["HONCHO_API_URL"],
                                  workspace_id=self.workspace_id, api_key=self.api_key,
                                  max_retries=0, timeout=10,
                                  http_client=self._http)
        return self._honcho

    def honcho_messages(self, session_id: str) -> list:
        return list(self.honcho().session(session_id).messages())

    def post_turns(self, session_id: str, texts: list[str]) -> None:
        """Messages straight into the real Honcho's session, the user's and the agent's in turn."""
        honcho = self.honcho()
        peers = [honcho.peer("user"), honcho.peer("agent-zero")]
        session = honcho.session(session_id)
        session.add_peers(peers)
        session.add_messages([peers[i % 2].message(text) for i, text in enumerate(texts)])

    def short_summary(self, session_id: str) -> str | None:
        """The session's short summary in the real Honcho (its fake LLM writes it every 4
        messages)."""
        found = self.honcho().session(session_id).summaries().short_summary
        return found.content if found else None

    def script(self, replies: list[str]) -> None:
        """What the served Agent Zero's scripted chat model answers next, in order."""
        sys.path.insert(0, required_env("A0_HARNESS"))
        import a0host

        a0host.write_script(self.tree, replies)

    def set_card(self, facts: list[str]) -> None:
        """The agent's card of the user, set straight in the real Honcho (the plugin's default peer
        ids)."""
        self.honcho().peer("agent-zero").set_card(facts, target="user")

    def conclude(self, content: str, session_id: str) -> str:
        """A conclusion of the agent about the user, made straight in the real Honcho in
        `session_id`; its id."""
        honcho = self.honcho()
        agent, user = honcho.peer("agent-zero"), honcho.peer("user")
        honcho.session(session_id).add_peers([agent, user])
        return agent.conclusions_of("user").create(
            [{"content": content, "session_id": session_id}])[0].id

    def conclusions(self) -> dict[str, str]:
        """The agent's conclusions about the user in the real Honcho: id -> text."""
        return {c.id: c.content for c in self.honcho().peer("agent-zero").conclusions_of("user")
                .list(size=100).items}


ui: AgentZeroUi
# The MCP server the plugin's check reaches: a loopback fake whose serverInfo a test may set.
mcp: McpFake
shots: str


def setUpModule():
    global ui, mcp, shots, _pw, browser
    shots = tempfile.mkdtemp(prefix="honcho-shots-")
    mcp = McpFake()
    ui = AgentZeroUi(mcp.url)
    _pw = sync_playwright().start()
    browser = _pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def tearDownModule():
    browser.close()
    _pw.stop()
    ui.stop()
    mcp.close()
    target = os.environ.get("HONCHO_HUB_SCREENSHOTS")
    if target and os.path.isdir(target):
        for name in os.listdir(shots):
            shutil.copy(os.path.join(shots, name), os.path.join(target, name))
    shutil.rmtree(shots, ignore_errors=True)


class UiCase(unittest.TestCase):
    def open_page(self, block_ours: bool = False, fake_clock: bool = False, prepare=None,
                  at: AgentZeroUi | None = None, viewport: dict | None = None):
        """Agent Zero's home page with the sidebar open; `prepare(page)` runs before it loads (the
        test's own routes). Agent Zero's own page sometimes fails to build its sidebar at load: its
        quick-actions component teleports (Alpine `x-teleport`) into a slot that does not exist yet,
        and Alpine's `appendChild` on null stops the sidebar (seen in 3 of 6 CI runs on fresh target
        state, never in 55 loads in a row outside CI; twice in a row once, on a loaded machine).
        When no page error comes from our files, the page is loaded again, twice at most, and the
        test says so. `at`: another Agent Zero than the
        module's; `viewport`: the page's size (1440×1000 unless given)."""
        for attempt in (1, 2, 3):
            page, errors = self._load(block_ours, fake_clock, prepare, at or ui, viewport)
            try:
                page.locator(".pref-section .pref-header").wait_for(timeout=30_000)
                return page
            except Exception as exc:
                shown = page.evaluate("() => document.body.innerText.slice(0, 300)")
                page.screenshot(path=os.path.join(shots, f"failed-load-{uuid.uuid4().hex[:6]}.png"))
                if attempt == 3 or any("/plugins/honcho/" in error for error in errors):
                    raise AssertionError(f"Agent Zero's sidebar did not render: {shown!r}; "
                                         f"page errors: {errors}") from exc
                print(f"browser: Agent Zero's page did not render (page errors: {errors}); "
                      "loading it again", file=sys.stderr)
                page.close()

    def _load(self, block_ours: bool, fake_clock: bool, prepare, at: AgentZeroUi,
              viewport: dict | None):
        page = browser.new_page(viewport=viewport or {"width": 1440, "height": 1000})
        self.addCleanup(page.close)
        if prepare is not None:
            prepare(page)
        # Fake timers; they run with real time until the test pauses them (clock.pause_at).
        if fake_clock:
            page.clock.install()
        if block_ours:
            page.route(OUR_FILES, lambda route: route.abort())
        errors = self.page_errors = []
        page.on("pageerror", lambda error: errors.append(f"{error} @ {(error.stack or '')[:400]}"))
        page.goto(at.url, wait_until="networkidle")
        if page.locator("#left-panel.hidden").count():
            page.click("#toggle-sidebar")
        return page, errors

    def open_settings(self, page, plugin_title: str):
        page.click("#header-settings")
        page.locator(".settings-tab", has_text="Agent Settings").click()
        page.locator(".plugin-card", has_text=plugin_title).get_by_role(
            "button", name="Config").click()
        page.locator(".plugin-settings-body").wait_for()
        page.wait_for_function(
            "() => !document.querySelector('.plugin-settings-loading')?.offsetParent")
        # Agent Zero moves a modal's footer out of its scrolling body one animation frame after the
        # content loads (webui/js/modals.js); measured before that, the buttons sit 16 px to the
        # left (the CI failure of c9bb7eb: Save at 852 instead of 868).
        page.wait_for_function("() => [...document.querySelectorAll('[data-modal-footer]')]"
                               ".every(footer => footer.parentElement.classList"
                               ".contains('modal-footer-slot'))")
        # Modals slide in: measure once every finite animation has ended (spinners run forever).
        page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running'"
                               " || a.effect.getComputedTiming().endTime === Infinity)")

    def new_chat(self, page) -> str:
        """Click New Chat and wait until Agent Zero selected it (a message sent before that is
        lost). The selection needs a state snapshot from Agent Zero's own sync (a websocket, polling
        as its fallback), which took over 30 s in 1 of 5 runs right after the host suites, while the
        real Honcho's deriver still worked through their messages on both cores; twice in CI and
        once under load here no snapshot came at all (the chat list stayed empty: `contexts: 0`).
        The sync mode is recorded, and when no snapshot came the page is loaded once more (a user's
        remedy), which says so; Agent Zero reopens the chat it created from its session storage."""
        page.locator("h3.welcome-action-title", has_text="New Chat").click()
        reloaded = False
        while True:
            try:
                page.wait_for_function("() => !!Alpine.store('chats').selectedContext",
                                       timeout=60_000)
                return page.evaluate("() => globalThis.getContext()")
            except Exception as exc:  # say what the chats and sync stores held instead
                held = page.evaluate(SYNC_STATE)
                if reloaded or held["contexts"] or not held["selected"]:
                    raise AssertionError(f"the new chat was not selected: {held}; "
                                         f"page errors: {self.page_errors}") from exc
                print(f"browser: no state snapshot from Agent Zero within 60 s ({held}); "
                      "loading the page again", file=sys.stderr)
                page.reload(wait_until="networkidle")
                if page.locator("#left-panel.hidden").count():
                    page.click("#toggle-sidebar")
                reloaded = True

    def box(self, locator) -> dict:
        return locator.evaluate(BOX)

    def toast(self, page, text: str) -> None:
        page.locator(".toast-item", has_text=text).first.wait_for(timeout=20_000)


class SidebarTest(UiCase):
    def test_the_line_sits_aligned_with_preferences_and_is_live_while_collapsed(self):
        page = self.open_page()
        line, header = (page.locator(".honcho-sidebar-line"),
                        page.locator(".pref-section .pref-header"))
        self.assertAlmostEqual(self.box(line)["left"], self.box(header)["left"], delta=PX)
        self.assertAlmostEqual(self.box(line)["right"], self.box(header)["right"], delta=PX)
        self.assertEqual(page.locator("[data-testid=honcho-panel]").count(), 0)  # collapsed
        headline = page.locator(".honcho-sidebar-headline")
        wait_for(lambda: headline.inner_text() not in ("", "Checking…"), 15,
                 "the collapsed line's first status")
        self.assertRegex(headline.inner_text(),
                         r"^(Honcho not yet reached|\d+ queued · worker \w+)$")

    def test_the_line_polls_light_status_every_30_s_and_the_open_panel_full_status_every_5_s(self):
        page = self.open_page(fake_clock=True)
        # The fake clock ran with real time through the load: stop it, then move it only by steps
        # (Playwright's Python API: seconds).
        page.clock.pause_at((page.evaluate("Date.now()") + 2_000) / 1000)
        page.evaluate(RECORD_STATUS_POLLS)
        # The `light` flag of each status request that reached Agent Zero, in order.
        asked: list[bool] = []
        page.on("request", lambda r: asked.append(json.loads(r.post_data or "{}").get("light"))
                if r.url.endswith("/plugins/honcho/honcho_status") else None)

        # (fake time, light) of each status request the page sent.
        def polls() -> list[tuple[int, bool]]:
            return [(poll["at"], poll["light"])
                    for poll in page.evaluate("() => globalThis.honchoTestPolls")]

        def step_to(at: int) -> None:
            page.clock.run_for(at - page.evaluate("Date.now()"))

        for _ in range(31):  # the first light poll comes within 30 s of any moment
            if polls():
                break
            page.clock.run_for(1_000)
        self.assertEqual([light for _, light in polls()], [True], "one light poll")
        first = polls()[0][0]
        step_to(first + 29_000)
        self.assertEqual(len(polls()), 1, "no poll within 29 s of the last")
        step_to(first + 30_000)
        self.assertEqual(polls(), [(first, True), (first + 30_000, True)],
                         "the next light poll 30 s after it")
        wait_on_page(page, lambda: asked == [True, True], 10, "both light requests at Agent Zero")

        page.click(".honcho-sidebar-line")
        wait_for(lambda: len(polls()) == 3, 10, "a status request when the panel opens")
        opened = polls()[2]
        self.assertEqual(opened, (first + 30_000, False), "a full one, at once")
        step_to(opened[0] + 4_999)
        self.assertEqual(len(polls()), 3, "no poll within 5 s of opening")
        step_to(opened[0] + 5_000)
        self.assertEqual(polls()[3:], [(opened[0] + 5_000, False)], "a full poll 5 s after opening")
        page.click(".honcho-sidebar-line")
        wait_for(lambda: len(polls()) == 5, 10, "a status request when the panel closes")
        self.assertEqual(polls()[4], (opened[0] + 5_000, True),
                         "back to light when the panel closes")
        wait_on_page(page, lambda: asked == [True, True, False, False, True], 10,
                 "every request at Agent Zero")

    def test_no_status_poll_starts_while_the_last_one_is_still_running(self):
        page = self.open_page(fake_clock=True)
        # The fake clock stopped, then moved only by steps.
        page.clock.pause_at((page.evaluate("Date.now()") + 2_000) / 1000)
        page.evaluate(RECORD_STATUS_POLLS)
        # Status requests Agent Zero has not answered yet: a slow Honcho behind them.
        held: list = []
        page.route("**/plugins/honcho/honcho_status", lambda route: held.append(route))

        def polls() -> list[tuple[int, bool]]:
            return [(poll["at"], poll["light"])
                    for poll in page.evaluate("() => globalThis.honchoTestPolls")]

        page.click(".honcho-sidebar-line")
        wait_for(lambda: len(polls()) == 1 and len(held) == 1, 10,
                 "the open panel's full status, unanswered")
        for _ in range(3):  # three 5 s polls come due while it runs
            page.clock.run_for(5_000)
        self.assertEqual(len(polls()), 1, "no status request while the last one runs")
        answered_at = page.evaluate("Date.now()")
        held.pop().continue_()
        wait_for(lambda: not page.evaluate("() => Alpine.store('honchoHub')._statusLoading"), 20,
                 "the slow status answered")
        page.clock.run_for(5_000)
        wait_for(lambda: len(polls()) == 2, 10, "the next poll once it answered")
        self.assertEqual(polls()[1][1], False)
        self.assertLessEqual(polls()[1][0], answered_at + 5_000)
        page.unroute("**/plugins/honcho/honcho_status")
        for route in held:
            route.continue_()

    def test_a_chat_is_delivered_and_each_action_answers_with_a_toast(self):
        # The only test that sends a chat: before it, nothing of this tree has reached Honcho.
        page = self.open_page()
        headline = page.locator(".honcho-sidebar-headline")
        wait_for(lambda: headline.inner_text() == "Honcho not yet reached", 15,
                 "the neutral line before any chat")
        self.assertIn("honcho-sidebar-neutral",
                      page.locator(".honcho-sidebar-dot").get_attribute("class"))
        context_id = self.new_chat(page)
        page.fill("#chat-input", "I keep two sailing boats at the marina")
        page.press("#chat-input", "Enter")
        page.get_by_text(SCRIPTED_ANSWER).first.wait_for(timeout=60_000)
        messages = wait_for(lambda: len(ui.honcho_messages(f"chat-{context_id}")) >= 2
                            and ui.honcho_messages(f"chat-{context_id}"), 30, "the chat in Honcho")
        self.assertEqual([m.content for m in messages],
                         ["I keep two sailing boats at the marina", SCRIPTED_ANSWER])

        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        panel.locator("[data-field=api_reach]").wait_for()
        # The panel first shows the line's last status; the full one follows within a refresh.
        wait_for(lambda: panel.locator("[data-field=api_reach]").inner_text().startswith("yes, "),
                 15, "the panel showing Honcho reached")
        self.assertRegex(panel.locator("[data-field=queue]").inner_text(),
                         r"^0 pending · 0 sending · 0 dead")
        # the real Honcho's local URL is a self-hosted deployment (endpoint_mode is left hosted)
        self.assertEqual(panel.locator("[data-field=mode]").inner_text(), "self-hosted")
        self.assertRegex(panel.locator("[data-field=cache]").inner_text(),
                         r"^\d+ packs · \d+ hits · \d+ loads")
        self.assertEqual(panel.locator("[data-field=recall_mode]").inner_text(), "on · hybrid")
        # a chat typed in the web UI: the owner's, no sender
        self.assertEqual(panel.locator("[data-field=chat]").inner_text(), "web ui")
        self.assertRegex(panel.locator("[data-field=chats_seen]").inner_text(), r"\d+ web ui")
        memory = panel.locator("[data-field=memory]")
        self.assertRegex(memory.inner_text(), r"^(fresh|deriving \((not checked yet"
                                              r"|\d+ pending\) · last checked \d+ s ago))$")
        self.assertTrue(memory.get_attribute("title"), "the memory row has no tooltip")
        wait_for(lambda: "(this process)" in panel.locator("[data-field=processes]").inner_text(),
                 15, "this Agent Zero's delivery worker among the processes")
        self.assertEqual(panel.locator("[data-field=shared_circuit]").inner_text(), "closed")
        self.assertEqual(page.locator(".honcho-sidebar-headline").inner_text(),
                         "0 queued · worker idle")
        # The open panel keeps Agent Zero's own sidebar usable: the chat list and the tasks heading
        # stay seen.
        for neighbour in ("#chats-section .chat-selected", "#tasks-section .section-header"):
            self.assertTrue(page.locator(neighbour).first.evaluate(SEEN),
                            f"{neighbour} hidden by the open panel")

        expected = {"check": "API ok in", "wake": "Worker woken",
                    "drain": "Delivered 0, 0 still pending",
                    "retry_dead": "Requeued 0 dead letters", "clear_cache": "cached memory packs"}
        for action, text in expected.items():
            with self.subTest(action=action):
                button = panel.locator(f"button[data-action={action}]")
                button.click()
                self.toast(page, text)
                wait_for(button.is_enabled, 20, f"{action} to finish")

    def test_existing_sessions_are_checked_then_set_to_the_saved_preset_on_confirmation(self):
        # A chat of this Agent Zero delivered under the saved preset (seed); its agent's flags then
        # changed on the server, as a session made under another preset holds them.
        ui.script(["Noted, three hives."])
        page = self.open_page()
        context_id = self.new_chat(page)
        page.fill("#chat-input", "I keep three beehives")
        page.press("#chat-input", "Enter")
        session_id = f"chat-{context_id}"
        wait_for(lambda: len(ui.honcho_messages(session_id)) >= 2, 60, "the chat in Honcho")
        from honcho.api_types import SessionPeerConfig

        session = ui.honcho().session(session_id)
        session.set_peer_configuration("agent-zero", SessionPeerConfig(observe_me=True,
                                                                       observe_others=True))
        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        panel.locator("button[data-action=observation_check]").click()
        presets = panel.locator("[data-testid=honcho-presets]")
        report = presets.locator("[data-field=presets_report]")
        wait_for(lambda: "sessions this install made" in report.inner_text(), 30, "the check")
        text = report.inner_text()
        self.assertIn("Observation seed: user me on, others on; agent me off, others on", text)
        self.assertRegex(text, r"1 of \d+ sessions this install made hold other flags")
        self.assertIn("agent observe_me: on → off in 1 session", text)
        self.assertIn(f"{session_id} holds: user me on, others on; agent me on, others on", text)
        self.assertEqual(session.get_peer_configuration("agent-zero").observe_me, True)
        page.screenshot(path=os.path.join(shots, "existing-sessions.png"))
        presets.locator("button[data-action=observation_apply]").click()
        wait_for(lambda: "Applied the flags to 1 session." in report.inner_text(), 30,
                 "the apply")
        config = session.get_peer_configuration("agent-zero")
        self.assertEqual((config.observe_me, config.observe_others), (False, True))
        presets.locator("button[data-action=observation_close]").click()
        self.assertEqual(panel.locator("[data-testid=honcho-presets]").count(), 0)

    def open_card(self):
        """A fresh page with the panel opened: the page, its card element and the card requests it
        made."""
        page = self.open_page()
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url)
                if r.url.endswith("/plugins/honcho/honcho_card") else None)
        page.click(".honcho-sidebar-line")
        return page, page.locator("[data-testid=honcho-card]"), asked

    def test_the_open_panel_shows_the_users_card_read_once_a_minute_at_most(self):
        ui.set_card([])
        _, card, _ = self.open_card()
        wait_for(lambda: card.inner_text() == "User card\nNo card yet", 20, "the empty card")

        fact = "ATTRIBUTE: Keeps two sailing boats at the marina"
        ui.set_card([fact, "INSTRUCTION: <b>Reply</b> in English"])
        page, card, asked = self.open_card()
        facts = card.locator(".honcho-sidebar-card-fact")
        wait_for(lambda: facts.count() == 2, 20, "the card's two facts")
        self.assertEqual(facts.all_inner_texts(),
                         [fact, "INSTRUCTION: \u2039b\u203aReply\u2039/b\u203a in English"])
        self.assertEqual(card.locator("b").count(), 0)  # text, never markup
        self.assertEqual(len(asked), 1)
        # Closed and opened again within the minute: no second request.
        page.click(".honcho-sidebar-line")
        page.click(".honcho-sidebar-line")
        wait_for(lambda: facts.count() == 2, 10, "the card shown again")
        self.assertEqual(len(asked), 1)

        page = self.open_page()
        page.route("**/plugins/honcho/honcho_card", lambda route: route.fulfill(
            status=200, content_type="application/json",
            body=json.dumps({"ok": False, "error": "auth_401"})))
        page.click(".honcho-sidebar-line")
        note = page.locator("[data-testid=honcho-card] [data-field=card_note]")
        wait_for(lambda: (note.count() == 1
                          and note.inner_text() == "Card unavailable (auth_401)"), 20,
                 "the neutral error line")

    def test_agent_zero_and_another_plugin_keep_their_styles_with_ours_loaded(self):
        selectors = [".pref-section", ".pref-section .pref-header", ".pref-section li",
                     "#tasks-section", ".section-header", ".version-info",
                     ".plugin-settings-body *", ".modal-footer .btn"]
        seen = {}
        for blocked in (True, False):
            page = self.open_page(block_ours=blocked)
            if not blocked:
                page.locator(".honcho-sidebar-line").wait_for()
            self.open_settings(page, "Error Retry")
            seen[blocked] = page.evaluate(STYLE_PROBE, selectors)
            page.close()
        self.assertGreater(len(seen[True]), 20)
        self.maxDiff = None  # a difference is only diagnosable in full
        self.assertEqual(seen[False], seen[True])


class DontRememberChatTest(UiCase):
    """The panel's "Don't remember this chat" for the chat Agent Zero shows: its state read from
    Agent Zero, switched with the two checkboxes, counted in status and still there after a reload.
    It sends no message, so SidebarTest (sorted after it) still finds a tree that never sent one."""

    def test_the_selected_chat_is_switched_from_the_panel_and_stays_switched(self):
        page = self.open_page()
        context_id = self.new_chat(page)
        page.click(".honcho-sidebar-line")
        control = page.locator("[data-testid=honcho-chat-memory]")
        state = control.locator("[data-field=chat_memory]")
        wait_for(lambda: state.inner_text() == f"Chat {context_id}: remembered", 15,
                 "the selected chat's state in the panel")
        recall_box = control.locator("input[data-action=dont_recall]")
        self.assertTrue(recall_box.is_disabled())  # "also don't recall" needs "don't remember"
        control.locator("input[data-action=dont_remember]").check()
        wait_for(lambda: state.inner_text().endswith("not remembered (memory still recalled)"), 15,
                 "the chat not captured")
        wait_for(recall_box.is_enabled, 15, "also don't recall offered")
        recall_box.check()
        wait_for(lambda: state.inner_text().endswith("not remembered, nothing recalled"), 15,
                 "the chat neither captured nor recalled")
        count = page.locator("[data-testid=honcho-panel] [data-field=not_remembered]")
        wait_for(lambda: count.inner_text() == "0 chats not captured · 1 not recalled either", 15,
                 "status counting the chat")
        page.screenshot(path=os.path.join(shots, "dont-remember.png"))

        page.reload(wait_until="networkidle")  # what the panel shows now comes from Agent Zero
        if page.locator("#left-panel.hidden").count():
            page.click("#toggle-sidebar")
        page.wait_for_function(f"() => Alpine.store('chats').selected === {context_id!r}")
        page.click(".honcho-sidebar-line")
        wait_for(lambda: state.inner_text() == f"Chat {context_id}: not remembered, nothing"
                 " recalled", 15, "the state read back after a reload")
        self.assertTrue(control.locator("input[data-action=dont_remember]").is_checked())
        self.assertTrue(recall_box.is_checked())
        control.locator("input[data-action=dont_remember]").uncheck()
        wait_for(lambda: state.inner_text() == f"Chat {context_id}: remembered", 15,
                 "the chat remembered again")
        self.assertFalse(recall_box.is_checked())
        self.assertEqual(control.locator("[data-testid=honcho-this-is-me]").count(), 0)

    def test_a_chat_from_an_unmapped_sender_offers_this_is_me_shown_as_text(self):
        # Agent Zero's integrations need their services to make such a chat: the answer of our API
        # for it is made here (tests/host/host_dont_remember.py takes the path through Agent Zero).
        sender = "email:<img src=x id=honchoxss>@example.org"
        page = self.open_page()
        context_id = self.new_chat(page)
        asked: list[dict] = []

        def answer(route):
            body = json.loads(route.request.post_data or "{}")
            asked.append(body)
            route.fulfill(status=200, content_type="application/json", body=json.dumps(
                {"ok": True, "chat": context_id, "state": "remember", "sender": sender,
                 "this_is_me": body.get("action") == "get"}))
        page.route("**/plugins/honcho/honcho_remember", answer)
        page.on("dialog", lambda dialog: dialog.accept())  # the confirm step
        page.click(".honcho-sidebar-line")
        offer = page.locator("[data-testid=honcho-this-is-me]")
        offer.wait_for(timeout=15_000)
        self.assertEqual(offer.locator("[data-field=sender_offer]").inner_text(),
                         f"From {sender}, not known to be you: is it?")
        self.assertEqual(page.locator("#honchoxss").count(), 0)
        page.evaluate(WATCH_MARKUP)  # the toast is gone seconds after it showed
        offer.locator("button[data-action=this_is_me]").click()
        self.toast(page, "is now you")
        self.assertIn({"action": "this_is_me", "chat": context_id}, asked)
        self.assertEqual(page.evaluate("() => [document.querySelector('#honchoxss'),"
                                       " globalThis.honchoMarkupSeen]"), [None, []])

    def test_the_panel_works_when_agent_zeros_chats_store_has_moved(self):
        page = self.open_page(prepare=move_chats_store)
        context_id = self.new_chat(page)  # Agent Zero's own files found the store where it moved
        headline = page.locator(".honcho-sidebar-headline")
        wait_for(lambda: headline.count() == 1 and headline.inner_text() not in ("", "Checking…"),
                 15, "the line's status")
        page.click(".honcho-sidebar-line")
        state = page.locator("[data-testid=honcho-chat-memory] [data-field=chat_memory]")
        wait_for(lambda: state.inner_text() == f"Chat {context_id}: remembered", 15,
                 "the selected chat's state in the panel")
        page.locator("[data-testid=honcho-panel] [data-field=health]").wait_for(timeout=15_000)
        self.assertEqual([e for e in self.page_errors if "/plugins/honcho/" in e], [])

    def test_no_chat_state_read_starts_while_the_last_one_is_still_running(self):
        page = self.open_page(fake_clock=True)
        context_id = self.new_chat(page)  # Agent Zero's sync runs on the clock: before it stops
        # The fake clock stopped, then moved only by steps.
        page.clock.pause_at((page.evaluate("Date.now()") + 2_000) / 1000)
        # Reads Agent Zero has not answered yet (a busy event loop behind them).
        held: list = []
        page.route("**/plugins/honcho/honcho_remember", lambda route: held.append(route))
        page.click(".honcho-sidebar-line")
        wait_on_page(page, lambda: len(held) == 1, 10,
                     "the selected chat's state asked, unanswered")
        for _ in range(3):  # three 5 s polls come due while it runs
            page.clock.run_for(5_000)
        self.assertEqual(len(held), 1, "no read while the last one runs")
        held.pop().continue_()
        state = page.locator("[data-testid=honcho-chat-memory] [data-field=chat_memory]")
        wait_for(lambda: state.inner_text() == f"Chat {context_id}: remembered", 15,
                 "the slow read answered")
        page.clock.run_for(5_000)
        wait_on_page(page, lambda: len(held) == 1, 10, "the next poll once it answered")
        page.unroute("**/plugins/honcho/honcho_remember")
        for route in held:
            route.continue_()


class InspectorTest(UiCase):
    SECRET = "ghp_" + "K8j7H6g5F4" * 4  # a real-looking GitHub token inside a conclusion

    def test_inspector_shows_card_conclusions_redacted_forgets_on_confirm_undoes_edits_card(self):
        ui.set_card(["ATTRIBUTE: Keeps two sailing boats at the marina",
                     "INSTRUCTION: Reply briefly"])
        ui.conclude("The user sails on weekends", "chat-inspect01")
        cid = ui.conclude(f"The user deploys with {self.SECRET}", "chat-inspect01")
        shown_text = "The user deploys with [REDACTED:github_token]"
        page = self.open_page()
        answers = []
        page.on("response", lambda r: answers.append(r)
                if r.url.endswith("/plugins/honcho/honcho_inspector") else None)
        sidebar = page.evaluate(STYLE_PROBE, [".pref-section", ".pref-section .pref-header",
                                              ".pref-section li", ".honcho-sidebar-line"])
        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        facts = inspector.locator(".honcho-inspector-fact")
        wait_for(lambda: facts.count() == 2, 30, "the card in the inspector")
        self.assertEqual(facts.all_inner_texts(),
                         ["ATTRIBUTE: Keeps two sailing boats at the marina",
                          "INSTRUCTION: Reply briefly"])
        item = inspector.locator(f"[data-testid=honcho-inspector-conclusion][data-id='{cid}']")
        item.wait_for(timeout=20_000)
        self.assertEqual(item.locator(".honcho-inspector-text").inner_text(), shown_text)
        self.assertIn("session chat-inspect01", item.locator(".honcho-inspector-meta").inner_text())
        self.assertTrue(inspector.locator("[data-field=label]").inner_text()
                        .startswith("[Recalled from Honcho"))
        self.assertNotIn(self.SECRET, page.content())
        self.assertEqual(page.evaluate(STYLE_PROBE, [".pref-section", ".pref-section .pref-header",
                                                     ".pref-section li", ".honcho-sidebar-line"]),
                         sidebar)

        item.locator("[data-action=forget]").click()  # the confirm step: nothing is deleted yet
        confirm = item.locator("[data-testid=honcho-inspector-confirm]")
        confirm.wait_for()
        self.assertIn(cid, ui.conclusions())
        confirm.locator("[data-action=confirm_forget]").click()
        self.toast(page, f"Forgot conclusion {cid}.")
        item.wait_for(state="detached", timeout=20_000)
        self.assertNotIn(cid, ui.conclusions())

        forgotten = inspector.locator(
            f"[data-testid=honcho-inspector-write][data-kind=forget][data-id='{cid}']")
        self.assertEqual(forgotten.locator(".honcho-inspector-text").inner_text(), shown_text)
        forgotten.locator("[data-action=undo]").click()
        self.toast(page, f"Restored conclusion {cid} as ")
        restored = wait_for(lambda: [i for i, text in ui.conclusions().items()
                                     if text == shown_text],
                            20, "the conclusion created again in Honcho")
        self.assertNotEqual(restored, [cid])
        inspector.locator("[data-testid=honcho-inspector-conclusion]"
                          f"[data-id='{restored[0]}']").wait_for(timeout=20_000)
        wait_for(lambda: forgotten.locator("[data-action=undo]").count() == 0, 20,
                 "the undo offer gone once used")
        inspector.locator("[data-field=base_pack]").wait_for()

        inspector.locator("[data-action=edit_card]").click()
        inspector.locator("[data-field=card_draft]").fill(
            f"ATTRIBUTE: Keeps three boats\nATTRIBUTE: key {self.SECRET}")
        inspector.locator("[data-action=save_card]").click()
        self.toast(page, "Replaced the agent's card of the user: 2 facts (it had 2).")
        wait_for(lambda: facts.all_inner_texts() == ["ATTRIBUTE: Keeps three boats",
                                                     "ATTRIBUTE: key [REDACTED:github_token]"],
                 20, "the new card shown")
        self.assertEqual(ui.honcho().peer("agent-zero").get_card(target="user"),
                         ["ATTRIBUTE: Keeps three boats", "ATTRIBUTE: key [REDACTED:github_token]"])

        self.assertGreaterEqual(len(answers), 7)  # view; forget, view; undo, view; edit_card, view
        self.assertEqual({r.headers.get("cache-control") for r in answers}, {"no-store"})
        kept = page.evaluate("() => JSON.stringify([Object.entries(localStorage),"
                             " Object.entries(sessionStorage)])")
        for text in ("deploys", "sailing", "sails"):
            self.assertNotIn(text, kept)
        page.locator(".modal-close").last.click()
        wait_for(lambda: page.evaluate(
            "() => Alpine.store('honchoInspector').conclusions === null"), 10,
            "the inspector's store emptied when it closed")


class ExportTest(UiCase):
    """The memory file from the inspector: exported from the module's Agent Zero as a download, then
    imported into a second Agent Zero with a fresh workspace, where a second run creates nothing."""

    fresh: AgentZeroUi

    @classmethod
    def setUpClass(cls):
        cls.fresh = AgentZeroUi(mcp.url)

    @classmethod
    def tearDownClass(cls):
        cls.fresh.stop()

    def open_inspector(self, at: AgentZeroUi):
        page = self.open_page(at=at)
        page.click(".honcho-sidebar-line")
        page.locator("[data-testid=honcho-open-inspector]").click()
        section = page.locator("[data-testid=honcho-inspector-file]")
        section.wait_for(timeout=20_000)
        return page, section

    def test_an_export_downloads_and_imports_once_into_a_fresh_workspace(self):
        ui.set_card(["IDENTITY: Ada", "ATTRIBUTE: <b>Keeps</b> bees"])
        ui.conclude("The user keeps three <i>beehives</i>", "chat-export01")
        ui.conclude(f"The user deploys with {InspectorTest.SECRET}", "chat-export01")
        page, section = self.open_inspector(ui)
        page.evaluate(WATCH_MARKUP)
        with page.expect_download(timeout=60_000) as download:
            section.locator("[data-action=export_json]").click()
        path = os.path.join(tempfile.mkdtemp(prefix="honcho-export-"), "memory.json")
        self.addCleanup(shutil.rmtree, os.path.dirname(path), True)
        download.value.save_as(path)
        self.assertRegex(download.value.suggested_filename,
                         rf"^honcho-memory-{ui.workspace_id}-\d{{8}}-\d{{6}}\.json$")
        with open(path, encoding="utf-8") as handle:
            exported = json.load(handle)
        texts = {c["text"] for c in exported["conclusions"]}
        self.assertLessEqual({"The user keeps three <i>beehives</i>",
                              "The user deploys with [REDACTED:github_token]"}, texts)
        self.assertNotIn(InspectorTest.SECRET, json.dumps(exported))
        self.assertEqual(exported["card"], ["IDENTITY: Ada", "ATTRIBUTE: <b>Keeps</b> bees"])
        self.toast(page, "Exported ")
        with page.expect_download(timeout=60_000) as markdown:
            section.locator("[data-action=export_markdown]").click()
        self.assertTrue(markdown.value.suggested_filename.endswith(".md"))
        section.scroll_into_view_if_needed()
        shoot(page, "export-inspector")

        page, section = self.open_inspector(self.fresh)
        page.evaluate(WATCH_MARKUP)
        self.assertEqual(self.fresh.conclusions(), {})
        section.locator("[data-field=import_file]").set_input_files(path)
        report = section.locator("[data-field=import_report]")
        wait_for(lambda: report.count() and report.inner_text().startswith("Dry run"), 30,
                 "the dry run's report")
        self.assertIn(f"Dry run: would create {len(texts)} conclusions and add 2 facts to the"
                      " card", report.inner_text())
        self.assertEqual(self.fresh.conclusions(), {})
        section.scroll_into_view_if_needed()
        shoot(page, "export-import-dry-run")

        section.locator("[data-action=run_import]").click()
        wait_for(lambda: report.inner_text().startswith("Imported: created"), 60,
                 "the import's report")
        self.assertIn(f"created {len(texts)} conclusions and added 2 facts", report.inner_text())
        created = self.fresh.conclusions()
        self.assertEqual(set(created.values()), texts)
        self.assertEqual(self.fresh.honcho().peer("agent-zero").get_card(target="user"),
                         ["IDENTITY: Ada", "ATTRIBUTE: <b>Keeps</b> bees"])
        item = page.locator("[data-testid=honcho-inspector-conclusion]", has_text="beehives")
        item.wait_for(timeout=20_000)
        # the inspector shows recalled text made inert
        self.assertEqual(item.locator(".honcho-inspector-text").inner_text(),
                         "The user keeps three \u2039i\u203abeehives\u2039/i\u203a")
        self.assertIn("session memory-import", item.locator(".honcho-inspector-meta").inner_text())

        section.locator("[data-action=run_import]").click()
        wait_for(lambda: "created nothing" in report.inner_text(), 60,
                 "the second import's report")
        self.assertEqual(self.fresh.conclusions(), created)
        self.assertEqual(page.evaluate("() => globalThis.honchoMarkupSeen"), [])
        section.scroll_into_view_if_needed()
        shoot(page, "export-import-second-run")


class SettingsPageTest(UiCase):
    @staticmethod
    def field_selector(name: str) -> str:
        return f'[x-model\\.number="config.{name}"], [x-model="config.{name}"]'

    def field_input(self, page, name: str):
        return page.locator(".plugin-settings-body").locator(self.field_selector(name))

    def save_button(self, page):
        # The plugin modal's Save, not the Settings modal's beneath it.
        return page.locator('.modal-footer .btn-ok[\\@click="context.save()"]')

    def assert_laid_out(self, page):
        """Every section and field spans the modal's content; labels and inputs form two aligned
        columns. Measured on Agent Zero's own classes (section-title, field…), so a rule of anyone's
        that squeezes the page shows."""
        body = page.locator(".plugin-settings-body")
        content = body.evaluate("(el) => { const c = getComputedStyle(el),"
                                " b = el.getBoundingClientRect();"
                                " return b.width - parseFloat(c.paddingLeft)"
                                " - parseFloat(c.paddingRight); }")
        self.assertEqual(page.locator(".honcho-config-group").count(), 11)
        for kind in (".section-title", ".section-description", ".field"):
            boxes = page.locator(f".plugin-settings-body {kind}")
            self.assertGreater(boxes.count(), 7, kind)
            for i in range(boxes.count()):
                with self.subTest(element=kind, index=i):
                    self.assertAlmostEqual(self.box(boxes.nth(i))["width"], content, delta=PX)
        labels = {round(self.box(page.locator(".plugin-settings-body .field-label").nth(i))["left"])
                  for i in range(page.locator(".plugin-settings-body .field-label").count())}
        controls = {round(self.box(page.locator(".plugin-settings-body .field-control")
                                   .nth(i))["left"])
                    for i in range(page.locator(".plugin-settings-body .field-control").count())}
        self.assertEqual((len(labels), len(controls)), (1, 1), (labels, controls))
        field = self.box(page.locator(".plugin-settings-body .field").first)
        # The label column, then the control.
        self.assertGreater(controls.pop() - field["left"], 0.5 * field["width"])

    def test_global_scope_lays_out_and_refuses_an_out_of_range_value(self):
        page = self.open_page()
        self.open_settings(page, TITLE)
        self.assert_laid_out(page)
        self.assertEqual(page.locator(".honcho-config-global-note:visible").count(), 0)
        self.field_input(page, "batch_size").fill("999")
        self.save_button(page).click()
        error = page.locator(".plugin-settings-error")
        error.wait_for()
        self.assertIn("batch_size: out of range 1–100", error.inner_text())
        self.field_input(page, "batch_size").fill("30")
        self.save_button(page).click()
        page.locator(".plugin-settings-body").wait_for(state="detached")  # saved: the modal closed

    # Non-default values saved globally: global-only fields (a number, a text, a select whose value
    # is not its first option) and a field a project may change; the project then saves its own
    # value of that field.
    GLOBAL_ONLY = {"batch_size": "42", "workspace_id": "ws-saved-globally",
                   "endpoint_mode": "self_hosted"}
    GLOBAL_CACHE_TTL, PROJECT_CACHE_TTL = "300", "30"

    def keep_config_file(self, *parts: str) -> None:
        """Put a config file of the served tree back as it was when the test ends (removed if it was
        not there), so later tests see the settings they would have seen without this one."""
        path = os.path.join(ui.tree, *parts)
        before = None
        if os.path.exists(path):
            with open(path, "rb") as handle:
                before = handle.read()

        def restore() -> None:
            if before is None:
                if os.path.exists(path):
                    os.remove(path)
                return
            spare = path + ".restore"
            with open(spare, "wb") as handle:
                handle.write(before)
            os.replace(spare, path)  # a new file: the plugin's settings cache sees the change

        self.addCleanup(restore)

    def save_and_close(self, page) -> None:
        """Save the plugin's form, wait until Agent Zero closed it, then close the Settings modal
        beneath."""
        self.save_button(page).click()
        page.locator(".plugin-settings-body").wait_for(state="detached")  # saved: the modal closed
        page.locator(".modal-close").last.click()

    def select_project(self, page) -> None:
        page.locator(".plugin-settings-toolbar-item", has_text="Project").locator(
            "select").select_option(PROJECT)
        wait_for(lambda: page.locator(".honcho-config-global-note:visible").count() == 6, 15,
                 "the project form")

    def test_in_project_scope_each_global_note_sits_under_its_groups_heading(self):
        page = self.open_page()
        self.open_settings(page, TITLE)
        self.select_project(page)
        noted = page.locator(".plugin-settings-body .honcho-config-group").filter(
            has=page.locator(".honcho-config-global-note:visible"))
        self.assertEqual(noted.count(), 6)
        for i in range(noted.count()):
            group = noted.nth(i)
            with self.subTest(group=group.get_attribute("data-group")):
                title, note, description = (
                    group.locator(kind).bounding_box() for kind in (
                        ".section-title", ".honcho-config-global-note", ".section-description"))
                # Read top to bottom: the heading, its note, the group's description.
                self.assertGreaterEqual(note["y"], title["y"] + title["height"] - PX)
                self.assertLessEqual(note["y"] + note["height"], description["y"] + PX)

    def test_project_scope_shows_global_settings_read_only_and_its_own_editable(self):
        self.keep_config_file("usr", "plugins", "honcho", "config.json")
        self.keep_config_file("usr", "projects", PROJECT, ".a0proj", "plugins", "honcho",
                              "config.json")
        page = self.open_page()
        self.open_settings(page, TITLE)  # global scope
        for name, value in self.GLOBAL_ONLY.items():
            field = self.field_input(page, name)
            if name == "endpoint_mode":
                field.select_option(value)
            else:
                field.fill(value)
        self.field_input(page, "cache_ttl_s").fill(self.GLOBAL_CACHE_TTL)
        self.save_and_close(page)
        self.open_settings(page, TITLE)
        self.select_project(page)
        self.field_input(page, "cache_ttl_s").fill(self.PROJECT_CACHE_TTL)
        self.save_and_close(page)

        # Reopened after the project's save: Agent Zero reads the project's own file (project keys
        # only).
        self.open_settings(page, TITLE)
        self.select_project(page)
        cache_ttl = self.field_input(page, "cache_ttl_s")
        wait_for(lambda: cache_ttl.input_value() == self.PROJECT_CACHE_TTL, 15,
                 "the project's own cache_ttl_s")
        self.assert_laid_out(page)
        self.assertTrue(cache_ttl.is_enabled())
        for name, value in self.GLOBAL_ONLY.items():
            with self.subTest(field=name):
                field = self.field_input(page, name)
                self.assertEqual(field.input_value(), value)
                self.assertTrue(field.is_disabled())
                group = page.locator(".plugin-settings-body .honcho-config-group").filter(
                    has=page.locator(self.field_selector(name)))
                note = group.locator(".honcho-config-global-note")
                self.assertTrue(note.is_visible())
                self.assertEqual(note.inner_text(),
                                 "Global setting, shown as saved globally: "
                                 "change it with Project: Global above.")


# Markup as a hostile server, chat or person writes it; recalled text (card, conclusions, summaries)
# reaches the page as the plugin neutralises it for the agent (`<` and `>` as `‹` and `›`).
MARKUP = '<img src=x onerror="window.__pwned=1"><b id=honchoxss>b</b>'
INERT = MARKUP.translate({ord("<"): "\u2039", ord(">"): "\u203a"})
SUMMARY_PREFIX = "Summary of the conversation (fake LLM): "


class UntrustedTextTest(UiCase):
    """Every string the plugin shows that came from Honcho, an endpoint, a chat or a user, with
    markup in it. Agent Zero renders a toast's message and its notification history as HTML
    (x-html): the text must reach the page as text, and no element of it may be created. Sorted
    after SidebarTest on purpose: it sends a chat, and SidebarTest's first assertion is about a tree
    that never sent one."""

    def toast_text(self, page, marker: str) -> str:
        toast = page.locator(".toast-item", has_text=marker).first
        toast.wait_for(timeout=30_000)
        return toast.locator(".toast-message").inner_text()

    def refuse(self, page, api: str, answer: dict, action: str | None = None) -> None:
        """Answer our API `api` (its `action` only, when named) with `answer` until the test
        ends."""
        def fulfil(route):
            if (action is None
                    or json.loads(route.request.post_data or "{}").get("action") == action):
                route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))
            else:
                route.continue_()
        page.route(f"**/plugins/honcho/{api}", fulfil)

    def test_markup_from_every_source_is_shown_as_text_and_creates_no_element(self):
        ui.script(["Noted your notes."])
        page = self.open_page()
        session = f"chat-{self.new_chat(page)}"
        page.evaluate(WATCH_MARKUP)
        page.on("dialog", lambda dialog: dialog.accept())  # the forget offer's confirm step
        # The summary reaches the base pack through a turn's recall, once Honcho wrote it.
        ui.post_turns(session, [f"I wrote {MARKUP} in my notes", "Noted.", "Anything else?", "No."])
        wait_for(lambda: MARKUP in (ui.short_summary(session) or ""), 90,
                 "the chat's summary in Honcho")
        page.fill("#chat-input", "What did I write in my notes?")
        page.press("#chat-input", "Enter")
        page.get_by_text("Noted your notes.").first.wait_for(timeout=60_000)
        ui.set_card([f"ATTRIBUTE: Writes {MARKUP}"])
        cid = ui.conclude(f"The user wrote {MARKUP}", session)
        self.addCleanup(setattr, mcp, "server_info", mcp.server_info)
        mcp.server_info = {"name": "Evil " + MARKUP, "version": "<b id=honchoxss>9</b>"}

        # where -> (the text it must show, the text it shows)
        found: dict[str, tuple[str, str]] = {}
        page.click(".honcho-sidebar-line")
        panel = page.locator("[data-testid=honcho-panel]")
        fact = panel.locator(".honcho-sidebar-card-fact").first
        fact.wait_for(timeout=20_000)
        found["sidebar card fact"] = (INERT, fact.inner_text())
        panel.locator("[data-testid=honcho-open-inspector]").click()
        inspector = page.locator("[data-testid=honcho-inspector]")
        fact = inspector.locator(".honcho-inspector-fact").first
        fact.wait_for(timeout=30_000)
        found["inspector card fact"] = (INERT, fact.inner_text())
        item = inspector.locator(f"[data-testid=honcho-inspector-conclusion][data-id='{cid}']")
        item.wait_for(timeout=20_000)
        found["inspector conclusion"] = (INERT, item.locator(".honcho-inspector-text").inner_text())

        # Loaded in the background when first asked for: reopen to see it.
        def summary_line() -> str | None:
            block = inspector.locator("pre[data-field=base_pack]")
            lines = block.inner_text().splitlines() if block.count() else []
            if any(SUMMARY_PREFIX in line for line in lines):
                return next(line for line in lines if SUMMARY_PREFIX in line)
            page.locator(".modal-close").last.click()
            panel.locator("[data-testid=honcho-open-inspector]").click()
            inspector.locator("[data-field=base_pack]").wait_for(timeout=30_000)
            return None

        found["inspector base pack (summary)"] = (
            INERT, wait_for(summary_line, 60, "the summary in the base pack", 1))
        self.refuse(page, "honcho_inspector",
                    {"ok": False, "message": "Search refused: " + MARKUP}, "search")
        inspector.locator("[data-field=query]").fill("notes")
        inspector.locator("[data-action=search]").click()
        found["inspector error toast"] = (MARKUP, self.toast_text(page, "Search refused:"))
        page.locator(".modal-close").last.click()

        # A chat id is free text. Forgetting a chat empties every cache of recalled data (the
        # summary with it): after the inspector.
        page.evaluate("""async (id) => { const api = await import('/js/api.js');
            await api.callJsonApi('/chat_create', {new_context: id});
            await api.callJsonApi('/chat_remove', {context: id}); }""", MARKUP)
        offer = panel.locator(".honcho-sidebar-offer").first
        offer.wait_for(timeout=20_000)
        found["sidebar forget offer"] = (MARKUP, offer.inner_text())
        offer.locator("[data-action=forget_chat]").click()
        found["forget toast (chat id)"] = (
            MARKUP, self.toast_text(page, "queued or kept messages deleted"))
        check = panel.locator("button[data-action=check]")
        wait_for(check.is_enabled, 30, "the forget to finish")
        check.click()
        found["check toast (MCP server)"] = (MARKUP, self.toast_text(page, "MCP ok: Evil"))
        wait_for(check.is_enabled, 30, "the check to finish")
        self.refuse(page, "honcho_action", {"ok": False, "error": "Action refused: " + MARKUP})
        panel.locator("button[data-action=wake]").click()
        found["action error toast"] = (MARKUP, self.toast_text(page, "Action refused:"))
        wait_for(check.is_enabled, 30, "the refused action to finish")

        self.refuse(page, "honcho_status", {"ok": False, "error": "Status refused: " + MARKUP})
        page.click(".honcho-sidebar-line")  # closing the panel asks for the status at once
        headline = page.locator(".honcho-sidebar-headline")
        wait_for(lambda: "Status refused" in headline.inner_text(), 20,
                 "the refused status on the line")
        found["status error line"] = (MARKUP, headline.inner_text())

        page.locator(".notification-toggle").click()  # Agent Zero's notification history
        messages = page.locator(".notification-item .notification-message")
        markers = {"forget": "queued or kept", "check": "MCP ok: Evil",
                   "action error": "Action refused:", "search error": "Search refused:"}
        wait_for(lambda: all(any(m in t for t in messages.all_inner_texts())
                             for m in markers.values()), 30,
                 "our toasts in the notification history")
        for name, marker in markers.items():
            found[f"history: {name}"] = (
                MARKUP, next(t for t in messages.all_inner_texts() if marker in t))
        page.screenshot(path=os.path.join(shots, "untrusted-text.png"))

        self.maxDiff = None  # every place shown as markup, in full
        self.assertEqual({where: shown for where, (text, shown) in found.items()
                          if text not in shown}, {},
                         "shown as markup, not as text")
        self.assertEqual(page.evaluate("() => [document.querySelector('#honchoxss'),"
                                       " window.__pwned, globalThis.honchoMarkupSeen]"),
                         [None, None, []])


if __name__ == "__main__":
    unittest.main()
