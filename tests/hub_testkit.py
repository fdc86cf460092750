"""Shared test support: the repo on sys.path, and a stub Agent Zero host shaped like AGENT_ZERO.md.

The stub installs small `helpers.*` modules and a `usr/plugins/honcho` folder in a temporary Agent
Zero tree, so plugin files load exactly as Agent Zero loads them: by file path, with the file stem
as module name, importing the core as `usr.plugins.honcho.honcho_hub`. That folder is a real
directory whose entries link to this checkout's files: whatever Agent Zero writes into a plugin
folder (`config.json`, `.toggle-*`, `execute_record.json`) lands in the temporary tree, never in the
checkout, and a `config.json` saved in the checkout is not seen by the tests.
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)



def checkout_text(*parts: str) -> str:
    """The text of a file of this checkout (a path relative to its root), read and closed."""
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return handle.read()


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_real_getaddrinfo = socket.getaddrinfo


def _loopback_only(host, *args, **kwargs):
    """Tests may only reach this machine: any other name fails before a packet leaves."""
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name not in LOOPBACK_HOSTS and not name.startswith("127."):
        raise OSError(f"tests may not resolve {name!r}: loopback only")
    return _real_getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_only  # a guard on the standard library, not on our code

# The per-user state folder (where a capture journals while no outbox folder of its own exists
# yet, and where it replays what dead processes left) is a temporary one of this test process and
# its children: no test replays what another test run, one killed midway or the user's own Agent
# Zero left there. A child process (which may end by os._exit or a kill) keeps its parent's.
STATE_HOME_VARIABLE = "HONCHO_HUB_TESTS_STATE_HOME"
if STATE_HOME_VARIABLE not in os.environ:
    os.environ[STATE_HOME_VARIABLE] = tempfile.mkdtemp(prefix="honcho-hub-tests-state-")
    atexit.register(shutil.rmtree, os.environ[STATE_HOME_VARIABLE], True)
os.environ["XDG_STATE_HOME"] = os.environ[STATE_HOME_VARIABLE]


class StubExtension:
    """helpers.extension.Extension as Agent Zero defines it."""

    def __init__(self, agent: Any, **kwargs: Any) -> None:
        self.agent = agent
        self.kwargs = kwargs

    def execute(self, **kwargs: Any) -> Any:  # pragma: no cover - overridden
        return None


class StubResponse:
    """helpers.tool.Response."""

    def __init__(self, message: str, break_loop: bool, additional: dict | None = None) -> None:
        self.message = message
        self.break_loop = break_loop
        self.additional = additional


class StubTool:
    """helpers.tool.Tool: arguments in `self.args`, `async execute(**kwargs) -> Response`."""

    def __init__(self, agent: Any, name: str, method: str | None, args: dict, message: str,
                 loop_data: Any, **kwargs: Any) -> None:
        self.agent, self.name, self.method = agent, name, method
        self.args, self.message, self.loop_data = args, message, loop_data


class StubApiHandler:
    """helpers.api.ApiHandler: `async process(input, request) -> dict`."""

    def __init__(self, app: Any = None, thread_lock: Any = None) -> None:
        self.app, self.thread_lock = app, thread_lock

    @classmethod
    def requires_auth(cls) -> bool:
        return True

    @classmethod
    def requires_csrf(cls) -> bool:
        return cls.requires_auth()


class _Saved(dict):
    """A dict that writes itself to a file on every change, as Agent Zero's settings and secrets
    live in files: the plugin caches what it built from them until a file changes."""

    def __init__(self, data: dict, path: str) -> None:
        super().__init__(data)
        self._path = path  # written at the first change: a host nobody configured has no file

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        spare = self._path + ".new"
        with open(spare, "w", encoding="utf-8") as handle:
            json.dump(dict(self), handle)
        # a new file each time: a change is seen even within one clock tick
        os.replace(spare, self._path)

    def _changing(method):
        def changed(self, *args, **kwargs):
            result = method(self, *args, **kwargs)
            self._save()
            return result
        return changed

    __setitem__ = _changing(dict.__setitem__)
    __delitem__ = _changing(dict.__delitem__)
    update = _changing(dict.update)
    pop = _changing(dict.pop)
    clear = _changing(dict.clear)
    setdefault = _changing(dict.setdefault)


class StubHost:
    """What a test can tune about the stub Agent Zero: config, secrets, scheduled chats, plugins."""

    def __init__(self, root: str, saved: bool = True) -> None:
        self.root = root
        self.secrets = {}  # usr/secrets.env
        # a project's .a0proj/secrets.env (wins when merged)
        self.project_secrets: dict[str, str] = {}
        self.enabled_plugins: list[str] = ["honcho"]
        self.scheduled_context_ids: set[str] = set()
        # Saved (unless `saved` is False: an Agent Zero whose settings were never saved), as the
        # plugin reads its config files itself. Port 9 (discard) on loopback: nothing listens, so a
        # stray delivery fails fast and stays local.
        self._configured = saved
        self.config = {"outbox_path": os.path.join(root, "usr", "honcho", "outbox.sqlite3"),
                       "api_url": "http://127.0.0.1:9", "mcp_url": "http://127.0.0.1:9"}
        self._configured = True  # from here on, a change is a save

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    @config.setter
    def config(self, values: dict[str, Any]) -> None:
        # saved where Agent Zero saves global settings
        self._config = _Saved(values, self.global_config)
        if getattr(self, "_configured", False):
            self._config._save()

    @property
    def secrets(self) -> dict[str, str]:
        return self._secrets

    @secrets.setter
    def secrets(self, values: dict[str, str]) -> None:
        self._secrets = _Saved(values, self.abs_path("usr", "secrets.env"))
        if getattr(self, "_configured", False):
            self._secrets._save()

    def abs_path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def plugin_dir(self) -> str:
        return os.path.join(self.root, "usr", "plugins", "honcho")

    @property
    def global_config(self) -> str:
        """Where Agent Zero saves the plugin's global settings: `config.json` in the plugin
        folder."""
        return os.path.join(self.plugin_dir, "config.json")

    def project_meta(self, name: str, *sub: str) -> str:
        return os.path.join(self.root, "usr", "projects", name, ".a0proj", *sub)


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


# Files Agent Zero writes into a plugin folder (AGENT_ZERO.md): never linked from the checkout.
HOST_WRITTEN = ("config.json", "execute_record.json")


def link_plugin_folder(source: str, plugin_dir: str) -> None:
    """A plugin folder of links to `source`'s entries, leaving out dot-entries (.git, .venv,
    .toggle-*, caches) and the files Agent Zero writes there, so the folder's own state starts
    empty."""
    os.makedirs(plugin_dir, exist_ok=True)
    for entry in sorted(os.listdir(source)):
        if not entry.startswith(".") and entry not in HOST_WRITTEN:
            os.symlink(os.path.join(source, entry), os.path.join(plugin_dir, entry))


@contextmanager
def stub_agent_zero(source: str = ROOT, saved: bool = True) -> Iterator[StubHost]:
    """Install the stub host for the duration of a `with` block, then restore sys.modules/sys.path.

    `source` is the plugin checkout the temporary plugin folder links to (a test may pass a copy);
    `saved` False starts without the plugin's config.json (no settings saved yet)."""
    # each stub host is a fresh Agent Zero process
    outer_state = sys.modules.pop(STATE_MODULE, None)
    saved_modules = dict(sys.modules)
    saved_path = list(sys.path)
    with tempfile.TemporaryDirectory() as root:
        host = StubHost(root, saved)
        link_plugin_folder(source, host.plugin_dir)
        helpers = _module("helpers", __path__=[])
        stubs = {
            "helpers": helpers,
            "helpers.extension": _module("helpers.extension", Extension=StubExtension),
            "helpers.tool": _module("helpers.tool", Tool=StubTool, Response=StubResponse),
            "helpers.api": _module("helpers.api", ApiHandler=StubApiHandler, Request=object),
            "helpers.files": _module("helpers.files", get_abs_path=host.abs_path),
            "helpers.projects": _module(
                "helpers.projects", get_project_meta=host.project_meta,
                get_context_project_name=lambda context: getattr(context, "project", None)),
            "helpers.plugins": _module(
                "helpers.plugins",
                get_enabled_plugins=lambda agent=None: list(host.enabled_plugins),
                get_plugin_config=lambda name, agent=None, **kw: dict(host.config)),
            "helpers.task_scheduler": _module("helpers.task_scheduler",
                                              TaskScheduler=_scheduler_for(host)),
            "helpers.secrets": _module(
                "helpers.secrets",
                get_secrets_manager=lambda context=None: _Secrets(host, with_project=True),
                get_default_secrets_manager=lambda: _Secrets(host)),
        }
        for name, module in stubs.items():
            if name != "helpers":
                setattr(helpers, name.split(".")[1], module)
        sys.modules.update(stubs)
        sys.path.insert(0, root)
        try:
            yield host
        finally:
            _stop_plugin_workers()
            _forget_host_modules(saved_modules)
            if outer_state is not None:
                sys.modules[STATE_MODULE] = outer_state
            sys.path[:] = saved_path


STATE_MODULE = "_honcho_hub_process_state"
HOST_MODULE_ROOTS = ("helpers", "usr", STATE_MODULE)


def _forget_host_modules(saved: dict) -> None:
    """Drop what the stub host and the plugin-as-Agent-Zero-loads-it added; keep everything else.

    Restoring a whole snapshot of sys.modules would also drop third-party modules first imported
    inside the block (httpcore's backends, say), and their re-import later makes new exception
    classes that no longer match the ones their callers already hold.
    """
    for name in list(sys.modules):
        if name.split(".")[0] in HOST_MODULE_ROOTS and name not in saved:
            del sys.modules[name]
    for name in HOST_MODULE_ROOTS:
        if name in saved:
            sys.modules[name] = saved[name]


def release_restart() -> None:
    """Lift the hold on starting workers that an uninstall or pre_update left in the process state
    the test runs in (the stub host's, inside `stub_agent_zero`): the next test starts them
    again."""
    from honcho_hub.runtime import process_state

    state = process_state()
    with state.lock:
        state.restart_hold = None


def hub_threads() -> list[threading.Thread]:
    """The plugin's live threads, of any module generation: each one is named honcho-hub-..."""
    return [t for t in threading.enumerate() if t.name.startswith("honcho-hub-") and t.is_alive()]


def _stop_plugin_workers() -> None:
    """Threads a test started through the adapters must not outlive the stub host."""
    from honcho_hub.delivery import lifecycle

    for worker in lifecycle.plugin_workers():  # of any module generation
        worker.stop(10)
    hooked_hub = sys.modules.get("usr.plugins.honcho.honcho_hub.hub")
    if hooked_hub is not None:
        hooked_hub.shutdown()  # every thread its Hub started (the process's capture writer too)
    # runtime.ProcessState, of any generation
    state = getattr(sys.modules.get(STATE_MODULE), "state", None)
    if getattr(state, "writer", None) is not None:  # started through another generation's Hub
        state.writer.stop(10)
    if getattr(state, "journal", None) is not None:
        state.journal.close()


def _scheduler_for(host: StubHost) -> type:
    class TaskScheduler:
        @classmethod
        def get(cls) -> TaskScheduler:
            return cls()

        def get_tasks_by_context_id(self, context_id: str, only_running: bool = False) -> list:
            return ["task"] if context_id in host.scheduled_context_ids else []
    return TaskScheduler


class ContextType(Enum):
    """AgentContextType of Agent Zero v1.7."""

    USER = "user"
    TASK = "task"
    BACKGROUND = "background"


NUDGE_TEXT = "You seem stuck. Continue with the task."


class StubContext:
    def __init__(self, id: str = "Ab3dE6gH", type: ContextType = ContextType.USER,
                 project: str | None = None, created_at: Any = None):
        self.id, self.type, self.project = id, type, project
        # AgentContext sets it (timezone-aware) when the chat is made or loaded
        self.created_at = created_at


class StubHistoryMessage:
    def __init__(self, ai: bool, id: str) -> None:
        self.ai, self.id = ai, id


class StubAgent:
    """Agent fields the adapters read: number, context, history.current.messages, read_prompt."""

    def __init__(self, number: int = 0, context: StubContext | None = None) -> None:
        self.number = number
        self.context = context or StubContext()
        self.history = types.SimpleNamespace(current=types.SimpleNamespace(messages=[]))
        self.data: dict[str, Any] = {}

    def read_prompt(self, name: str, **kwargs: Any) -> str:
        assert name == "fw.msg_nudge.md", name
        return NUDGE_TEXT


class _Secrets:
    def __init__(self, host: StubHost, with_project: bool = False) -> None:
        self._host, self._with_project = host, with_project

    def load_secrets(self) -> dict[str, str]:
        merged = {**self._host.secrets,
                  **(self._host.project_secrets if self._with_project else {})}
        return {k.upper(): v for k, v in merged.items()}

    def mask_values(self, text: str) -> str:
        for name, value in self.load_secrets().items():
            if value:
                text = text.replace(value, f"§§secret({name})")
        return text


def import_by_path(path: str) -> types.ModuleType:
    """Agent Zero's helpers.modules.import_module: the file stem becomes the module name."""
    name = os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def classes_in(module: types.ModuleType, base: type) -> list[type]:
    """Agent Zero's rule: the last-defined subclass of `base` in the file is the one used."""
    found = [c for _, c in inspect.getmembers(module, inspect.isclass)
             if c is not base and issubclass(c, base)]
    return found[-1:]
