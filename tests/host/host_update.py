"""An update through Agent Zero's plugin Hub, in the real v1.7 web UI process (run_ui.py: its file
watcher and its job loop run), against the real Honcho.

The installed plugin folder is a git clone of a local repository holding this checkout. Each test
commits a change upstream and updates as the UI's Update button does:
`POST /api/plugins/_plugin_installer/plugin_install {"action": "update_plugin"}` with the CSRF
token, which runs our `pre_update` hook, `git pull` and our `install` hook. Four kinds of change,
in this order:

1. docs only: nothing reloads, nothing needs to;
2. the core (`honcho_hub/`, the version): nothing reloads, so Agent Zero runs the old code until it
   restarts;
3. `extensions/`: nothing reloads either. Agent Zero's watcher means to follow
   `*/**/extensions/**/*`, but it matches with `PurePosixPath.match`, where `**` is one folder
   (Python 3.12), so `<plugin>/extensions/...` never matches;
4. `hooks.py`: the watcher purges the plugin's modules and the next use imports the new ones (the
   changes of 2 and 3 with them).

After each: a turn typed just before the update and one typed just after it are in the real Honcho
within 10 s of the update's answer, the worker runs, no "worker stopped with events pending" is
left, and status says whether a restart of Agent Zero is needed to run what is on disk.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import unittest
import uuid

import host_kit

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
UI_START_S = 180.0  # seconds on a busy machine
RESUMED_S = 10.0  # the bound: delivery resumed this long after the update answered
UPDATE_TIMEOUT_S = 300.0  # pre_update's drain, git pull, the install hook's pip
NEW_VERSION = "9.9.9-update-test"
PENDING_STOPPED = "worker stopped with events pending"
GIT_IDENTITY = ["-c", "user.name=host test", "-c", "user.email=host-test@example.invalid"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plugin_version(folder: str) -> str:
    """The version plugin.yaml in `folder` declares."""
    with open(os.path.join(folder, "plugin.yaml"), encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("version:"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(f"no version in {folder}/plugin.yaml")


def git(cwd: str, *args: str) -> str:
    done = subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr[-1000:]}")
    return done.stdout


# `python run_ui.py` with the harness's stubs. Not ../shared/real-agent-zero/serve-ui: its
# serve.py imports run_ui as a module, so Agent Zero's `init_a0` extensions, registered for run_ui
# as `__main__` (`_functions/__main__/init_a0/end`), never run there, and they register the file
# watcher this test is about.
RUN_UI_AS_MAIN = """import os, runpy, sys
sys.dont_write_bytecode = True
sys.path[:0] = [os.getcwd(), os.environ["A0_HARNESS"]]
import stubs
stubs.install()
sys.argv[0] = "run_ui.py"
runpy.run_path("run_ui.py", run_name="__main__")
"""


def serve_ui(tree: str, port: int, env: dict[str, str], log: str) -> subprocess.Popen:
    """Agent Zero's web UI from `tree` on 127.0.0.1:`port` (dockerized, no login), once it
    answers."""
    import httpx

    env = {k: v for k, v in env.items() if k not in ("AUTH_LOGIN", "AUTH_PASSWORD")}
    with open(log, "w", encoding="utf-8") as out:
        ui = subprocess.Popen([host_kit.required_env("A0_PYTHON"), "-c", RUN_UI_AS_MAIN,
                               "--host=127.0.0.1", f"--port={port}", "--dockerized=true"],
                              cwd=tree, env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              start_new_session=True)

    def answers() -> bool:
        if ui.poll() is not None:
            raise RuntimeError(f"the UI process ended ({ui.returncode}); log: {log}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        host_kit.wait_for(answers, UI_START_S, "Agent Zero's web UI to answer", interval_s=0.5)
    except BaseException:
        stop_ui(ui)
        raise
    return ui


def stop_ui(ui: subprocess.Popen) -> None:
    ui.terminate()
    try:
        ui.wait(30)
    except subprocess.TimeoutExpired:
        ui.kill()
        ui.wait(30)


class ServedTree:
    """A fresh Agent Zero tree whose `usr/plugins/honcho` is a git clone of `upstream` (a repository
    of this checkout's files), served by Agent Zero's own run_ui; an HTTP client with the UI's
    CSRF token."""

    def __init__(self) -> None:
        import httpx

        self.tmp = os.path.realpath(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                 "honcho-update-" + uuid.uuid4().hex[:8]))
        os.makedirs(self.tmp)
        self.workspace_id = "update-" + uuid.uuid4().hex[:12]
        self.env = {**os.environ, "HONCHO_API_URL": host_kit.required_env("HONCHO_REAL_URL"),
                    "HONCHO_WORKSPACE_ID": self.workspace_id,
                    "HONCHO_OUTBOX_PATH": os.path.join(self.tmp, "outbox.sqlite3")}
        self._honcho = None
        self._honcho_http = httpx.Client()
        self.tree = host_kit.new_tree(self.tmp)  # stages this checkout in tmp/plugin-src
        self.upstream = os.path.join(self.tmp, "plugin-src")
        git(self.upstream, "init", "-q", "-b", "main")
        git(self.upstream, "add", "-A")
        git(self.upstream, "commit", "-q", "-m", "the plugin as installed")
        self.plugin_dir = os.path.join(self.tree, "usr", "plugins", host_kit.PLUGIN)
        shutil.rmtree(self.plugin_dir)
        git(self.tree, "clone", "-q", self.upstream, self.plugin_dir)
        sys.path.insert(0, host_kit.required_env("A0_HARNESS"))
        import a0host

        a0host.write_script(self.tree, [f"Answer {n}." for n in range(1, 40)])
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = os.path.join(self.tmp, "ui.log")
        try:
            self.ui = serve_ui(self.tree, self.port, self.env, self.log)
        except BaseException:
            self._honcho_http.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.http = httpx.Client(base_url=self.url, headers={"Origin": self.url}, timeout=60)
        token = self.http.get("/api/csrf_token").json()
        if not token.get("ok"):
            self.stop()
            raise RuntimeError(f"no CSRF token: {token}")
        self.http.headers["X-CSRF-Token"] = token["token"]

    def stop(self) -> None:
        self.http.close()
        self._honcho_http.close()
        stop_ui(self.ui)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def post(self, path: str, body: dict, timeout: float = 60) -> dict:
        answer = self.http.post("/api/" + path, json=body, timeout=timeout)
        if answer.status_code != 200:
            raise AssertionError(f"{path}: {answer.status_code} {answer.text[:500]}")
        return answer.json()

    def say(self, text: str, context: str = "") -> str:
        """A message typed in the chat `context` (a new chat when empty), as the UI sends it; the
        chat's id. The scripted model answers it."""
        return self.post("message_async", {"text": text, "context": context})["context"]

    def update(self) -> dict:
        """The UI's Update of the plugin (pre_update, git pull, install); its answer."""
        return self.post("plugins/_plugin_installer/plugin_install",
                         {"action": "update_plugin", "plugin_name": host_kit.PLUGIN},
                         timeout=UPDATE_TIMEOUT_S)

    def status(self) -> dict:
        answer = self.post("plugins/honcho/honcho_status", {"light": True})
        if not answer.get("ok"):
            raise AssertionError(f"status: {answer}")
        return answer["status"]

    def delivered(self, context: str) -> list[str]:
        """The chat's messages in the real Honcho, oldest first."""
        from honcho import Honcho

        if self._honcho is None:
            # Its HTTP client is ours, so that stop() closes its sockets.
            self._honcho = Honcho(base_url=self.env["HONCHO_API_URL"],
                                  workspace_id=self.workspace_id,
                                  api_key=os.environ.get("HONCHO_REAL_ADMIN_KEY") or None,
                                  max_retries=0, timeout=15, http_client=self._honcho_http)
        return [m.content for m in self._honcho.session(f"chat-{context}").messages()]

    def sidebar(self) -> tuple[str, str, str]:
        """What the sidebar shows, in a fresh page of the real UI: the line's headline (why, in a
        few words), the line's tooltip (every reason in full), and the open panel's Version row."""
        page = browser().new_page(viewport={"width": 1440, "height": 1000})
        try:
            page.goto(self.url, wait_until="domcontentloaded")
            if page.locator("#left-panel.hidden").count():
                page.click("#toggle-sidebar")
            headline = page.locator("[data-testid=honcho-sidebar] .honcho-sidebar-headline")
            page.wait_for_function(
                "(el) => el.textContent && el.textContent !== 'Checking…'",
                arg=headline.element_handle(), timeout=30_000)
            line = headline.text_content() or ""
            tooltip = page.get_attribute("[data-testid=honcho-sidebar] .honcho-sidebar-line",
                                         "title") or ""
            page.click("[data-testid=honcho-sidebar] .honcho-sidebar-line")
            version = page.locator("[data-testid=honcho-panel] [data-field=version]")
            version.wait_for(timeout=30_000)
            return line, tooltip, version.text_content() or ""
        finally:
            page.close()

    def commit_upstream(self, path: str, edit, message: str) -> None:
        """Change one file of the upstream repository (`edit(text) -> text`) and commit it."""
        full = os.path.join(self.upstream, path)
        with open(full, encoding="utf-8") as handle:
            text = handle.read()
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(edit(text))
        git(self.upstream, "commit", "-q", "-am", message)


_browser: list = []  # (playwright, browser) once a test asked for the page


def browser():
    """One headless Chromium for the module (Debian's; no browser download)."""
    if not _browser:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        _browser.extend([playwright, playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])])
    return _browser[1]


served: ServedTree
installed_version = ""
chat = ""
turns = 0  # turns typed into `chat` so far (each is the user's message and the model's answer)


def setUpModule() -> None:
    global served, installed_version, chat, turns
    served = ServedTree()
    try:
        installed_version = plugin_version(served.plugin_dir)
        chat = served.say("Before any update.")
        turns = 1
        host_kit.wait_for(lambda: len(served.delivered(chat)) >= 2, 60,
                          "the first turn delivered before any update")
    except BaseException:
        served.stop()
        raise


def tearDownModule() -> None:
    if _browser:
        _browser[1].close()
        _browser[0].stop()
    served.stop()


class UpdateTest(unittest.TestCase):
    def update_and_measure(self, kind: str) -> dict:
        """A turn typed just before the update and one just after it; returns the status once both
        are in Honcho (failing when that takes longer than RESUMED_S after the update answered)."""
        global turns
        served.say(f"Just before the {kind} update.", chat)
        answer = served.update()
        finished = time.monotonic()
        self.assertTrue(answer.get("success"), answer)
        served.say(f"Just after the {kind} update.", chat)
        turns += 2
        expected = 2 * turns
        try:
            host_kit.wait_for(lambda: len(served.delivered(chat)) >= expected,
                              RESUMED_S - (time.monotonic() - finished),
                              f"both turns around the {kind} update delivered")
        except AssertionError as exc:
            status = served.status()
            raise AssertionError(
                f"{exc}; {len(served.delivered(chat))} of {expected} messages in Honcho; worker"
                f" {status['worker']['state']}, health {status['health']}"
                f" {status['health_reasons']}") from None
        self.assertEqual(served.delivered(chat)[-4:],
                         [f"Just before the {kind} update.", f"Answer {turns - 1}.",
                          f"Just after the {kind} update.", f"Answer {turns}."])
        status = served.status()
        self.assertNotIn(PENDING_STOPPED, status["health_reasons"])
        self.assertNotEqual(status["worker"]["state"], "stopped")
        return status

    def assert_code(self, status: dict, restart_needed: bool, running: str, on_disk: str) -> None:
        code = status.get("code")
        self.assertIsNotNone(code, "status says nothing of the code running and the code on disk")
        self.assertEqual((code["restart_needed"], code["running_version"], code["disk_version"]),
                         (restart_needed, running, on_disk), code)
        said = [r for r in status["health_reasons"] if "restart Agent Zero" in r]
        if restart_needed:
            self.assertEqual(len(said), 1, status["health_reasons"])
            self.assertIn(on_disk, said[0])
            self.assertNotEqual(status["health"], "green")
        else:
            self.assertEqual(said, [], status["health_reasons"])

    def test_1_a_docs_change_resumes_delivery_and_needs_no_restart(self) -> None:
        served.commit_upstream("docs/architecture.md", lambda text: text + "\nA docs change.\n",
                               "A docs change")
        status = self.update_and_measure("docs")
        self.assert_code(status, False, installed_version, installed_version)

    def test_2_a_core_change_resumes_the_old_code_and_asks_for_a_restart(self) -> None:
        for path in ("plugin.yaml", "honcho_hub/__init__.py"):
            served.commit_upstream(path, lambda text: text.replace(installed_version, NEW_VERSION),
                                   f"Version {NEW_VERSION} in {path}")
        status = self.update_and_measure("core")
        self.assert_code(status, True, installed_version, NEW_VERSION)
        sentence = status["code"]["restart"]
        # The line says why in a few words (the sentence up to its detail), the tooltip all of it.
        self.assertEqual(served.sidebar(), (sentence.split(";")[0],
                                            f"Honcho memory degraded: {sentence}", sentence))

    def test_3_an_extensions_change_is_not_reloaded_and_still_needs_a_restart(self) -> None:
        served.commit_upstream("extensions/honcho_bridge/host.py",
                               lambda text: text + "\n# An extensions change.\n",
                               "An extensions change")
        status = self.update_and_measure("extensions")
        self.assert_code(status, True, installed_version, NEW_VERSION)

    def test_4_a_hooks_change_is_reloaded_and_needs_no_restart(self) -> None:
        served.commit_upstream("hooks.py", lambda text: text + "\n# A hooks change.\n",
                               "A hooks change")
        status = self.update_and_measure("hooks")
        # The watcher's reload imported the whole plugin again: the changes of tests 2 and 3 too.
        self.assert_code(status, False, NEW_VERSION, NEW_VERSION)
        line, tooltip, version = served.sidebar()
        self.assertNotIn("restart", line)
        self.assertNotIn("restart", tooltip)
        self.assertEqual(version, f"{NEW_VERSION} (the code on disk is running)")


if __name__ == "__main__":
    unittest.main()
