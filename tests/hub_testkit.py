"""Shared test support: the repo on sys.path, and a stub Agent Zero host shaped like AGENT_ZERO.md.

The stub installs small `helpers.*` modules and a `usr/plugins/honcho` folder that points at this
checkout, so plugin files load exactly as Agent Zero loads them: by file path, with the file stem as
module name, importing the core as `usr.plugins.honcho.honcho_hub`.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import tempfile
import types
from contextlib import contextmanager
from typing import Any, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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


class StubHost:
    """What a test can tune about the stub Agent Zero: projects folder, secrets, enabled plugins."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.secrets: dict[str, str] = {}
        self.enabled_plugins: list[str] = ["honcho"]

    @property
    def plugin_dir(self) -> str:
        return os.path.join(self.root, "usr", "plugins", "honcho")

    def project_meta(self, name: str, *sub: str) -> str:
        return os.path.join(self.root, "usr", "projects", name, ".a0proj", *sub)


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@contextmanager
def stub_agent_zero() -> Iterator[StubHost]:
    """Install the stub host for the duration of a `with` block, then restore sys.modules/sys.path."""
    saved_modules = dict(sys.modules)
    saved_path = list(sys.path)
    with tempfile.TemporaryDirectory() as root:
        host = StubHost(root)
        os.makedirs(os.path.join(root, "usr", "plugins"))
        os.symlink(ROOT, host.plugin_dir)
        helpers = _module("helpers", __path__=[])
        stubs = {
            "helpers": helpers,
            "helpers.extension": _module("helpers.extension", Extension=StubExtension),
            "helpers.tool": _module("helpers.tool", Tool=StubTool, Response=StubResponse),
            "helpers.api": _module("helpers.api", ApiHandler=StubApiHandler, Request=object),
            "helpers.projects": _module(
                "helpers.projects", get_project_meta=host.project_meta,
                get_context_project_name=lambda context: getattr(context, "project", None)),
            "helpers.plugins": _module(
                "helpers.plugins", get_enabled_plugins=lambda agent=None: list(host.enabled_plugins)),
            "helpers.secrets": _module(
                "helpers.secrets", get_secrets_manager=lambda context=None: _Secrets(host)),
        }
        for name, module in stubs.items():
            if name != "helpers":
                setattr(helpers, name.split(".")[1], module)
        sys.modules.update(stubs)
        sys.path.insert(0, root)
        try:
            yield host
        finally:
            sys.modules.clear()
            sys.modules.update(saved_modules)
            sys.path[:] = saved_path


class _Secrets:
    def __init__(self, host: StubHost) -> None:
        self._host = host

    def load_secrets(self) -> dict[str, str]:
        return {k.upper(): v for k, v in self._host.secrets.items()}

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
    found = [c for _, c in inspect.getmembers(module, inspect.isclass) if c is not base and issubclass(c, base)]
    return found[-1:]
