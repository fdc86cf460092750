"""Agent Zero's config files for this plugin: read merged over the defaults, saved without secrets.

The `hooks.py` config hooks get one merged view and a clean dict to save; the settings built from
the files are reused (`SettingsCache`) while none of them changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, TypeVar

import yaml

from ..bounded import BoundedMap
from ..errors import ConfigFileError, FileRefused, InvalidValue
from .config import apply_project_settings, log_once, relation_problems
from .spec import FIELDS_BY_NAME, PROJECT_GROUPS, defaults, with_current_names
from .values import coerce

log = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 1_000_000
# libyaml's loader when PyYAML was built with it: the same safe subset of YAML, about ten times
# faster (Agent Zero asks for the config several times per turn).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Read-only, never waiting for a FIFO's writer, never becoming a terminal's controlling process.
_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))


def load_config_file(path: str) -> dict[str, Any]:
    """A YAML or JSON (by the `.json` suffix) file of settings as a dict; raises ConfigFileError.

    An empty file holds no settings; a setting saved under a former name is read under its name.
    Read by `read_regular_file`: a regular file only, bounded.
    """
    return with_current_names(load_saved_names(path))


def load_saved_names(path: str) -> dict[str, Any]:
    """`load_config_file` with every key as saved (a former name kept as it is)."""
    try:
        raw = read_regular_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise ConfigFileError("no such file", missing=True) from None
    except FileRefused as exc:
        raise ConfigFileError(str(exc)) from None
    except OSError as exc:
        raise ConfigFileError(f"cannot be read ({type(exc).__name__})") from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=_YAML_LOADER)
    except (ValueError, yaml.YAMLError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ConfigFileError("not valid YAML or JSON") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigFileError("not a mapping of settings")
    return dict(data)


def read_regular_file(path: str, max_bytes: int, within: str | None = None) -> bytes:
    """The content of the regular file at `path`, at most `max_bytes`; raises FileRefused or
    OSError.

    Opened without blocking (a FIFO would wait for a writer) and judged by the open file, not by
    its name: a regular file only (a device never ends and its size reads 0), its size as the open
    file has it, and at most max_bytes + 1 bytes read, so a file that grows meanwhile is refused
    too. With `within`, a path that leads out of that folder (through a link) is refused before it
    is opened.
    """
    if within is not None and not _inside(path, within):
        raise FileRefused("linked_outside", "a link leads outside its folder")
    descriptor = os.open(path, _READ_FLAGS)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("not_a_file", "not a regular file")
        if info.st_size > max_bytes:
            raise FileRefused("too_large", f"larger than {max_bytes:,} bytes")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            raw = handle.read(max_bytes + 1)
    finally:
        os.close(descriptor)
    if len(raw) > max_bytes:
        raise FileRefused("too_large", f"larger than {max_bytes:,} bytes")
    return raw


def _inside(path: str, folder: str) -> bool:
    """Whether `path`, every link on the way followed, is in `folder` (itself followed too)."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real != base and os.path.commonpath([real, base]) == base


def read_config_file(path: str) -> dict[str, Any]:
    """`load_config_file` for Agent Zero's files: {} when missing (a file not saved yet is normal)
    or unusable, the latter with one warning naming the file and the problem."""
    try:
        return load_config_file(path)
    except ConfigFileError as exc:
        if not exc.missing:
            log_once([f"config file {os.path.basename(path)} ignored: {exc}; using defaults"])
        return {}


T = TypeVar("T")
_ABSENT = "absent"


class SettingsCache:
    """Values (Settings) built once per key and reused while nothing they were built from changed.

    An entry stays valid while every file it was built from has the same modification time, change
    time, size and inode (or is still absent, or still fails to stat the same way) and the HONCHO_*
    environment variables are the same as when `build` last ran for that key. Both are looked at
    before `build` runs, so a file saved while it was being read counts as changed at the next
    `get`. A hit costs one `stat` per file and no parsing. Thread-safe; `build` runs outside the
    lock, so a slow build holds up no other key (two threads missing the same key at once may both
    build). Bounded: the least recently used key goes first.
    """

    def __init__(self, max_entries: int = 64, stat: Callable[[str], Any] = os.stat,
                 environ: Mapping[str, str] = os.environ) -> None:
        self._stat, self._environ = stat, environ
        self._lock = threading.Lock()
        self._entries: BoundedMap[Hashable, tuple[tuple, Any]] = BoundedMap(int(max_entries))

    def get(self, key: Hashable, files: tuple[str, ...], build: Callable[[], T]) -> T:
        """The value built for `key`, built again first if a file or HONCHO_* variable changed."""
        signature = (tuple(self._file_state(path) for path in files), self._environ_digest())
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == signature:
                self._entries.move_to_end(key)
                return entry[1]
        value = build()
        with self._lock:
            self._entries.put(key, (signature, value))
        return value

    def drop(self, key: Hashable) -> bool:
        """Forget the value built for `key` (what it was built from is gone); whether there was
        one."""
        with self._lock:
            return self._entries.pop(key, None) is not None

    def _file_state(self, path: str) -> tuple:
        try:
            info = self._stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return (path, _ABSENT)
        except OSError as exc:  # e.g. a folder we may not search: its own state until it changes
            return (path, type(exc).__name__, exc.errno)
        # The inode catches a file replaced by a rename (how editors save) that kept its size and
        # time; the change time catches a restored modification time.
        return (path, info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)

    def _environ_digest(self) -> bytes:
        """A digest of the HONCHO_* variables (as `build_settings` reads them), not a copy of the
        key."""
        # Names first, then each value with .get: a variable another thread removes meanwhile reads
        # as None instead of raising on the event loop.
        names = [name for name in list(self._environ) if str(name).upper().startswith("HONCHO_")]
        found = sorted((str(name).upper(), str(self._environ.get(name))) for name in names)
        return hashlib.blake2b(repr(found).encode("utf-8", "surrogatepass"),
                               digest_size=16).digest()


def merged_config(
    default_config: Mapping[str, Any] | None,
    global_saved: Mapping[str, Any] | None,
    project_saved: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Defaults < global saved config < the project's capture/recall/scope settings."""
    merged = defaults()
    for layer in (default_config, global_saved):
        merged.update(_known(layer))
    warnings: list[str] = []
    merged = apply_project_settings(merged, project_saved, warnings)
    log_once(warnings)  # Agent Zero reads the config on every turn: warn once, not every time
    return merged


def config_to_save(settings: Mapping[str, Any] | None, is_project: bool) -> dict[str, Any]:
    """What may be written to config.json: known settings only, never a credential.

    A project's file keeps only the settings a project may change, so it never pins a copy of the
    global connection or identity that would go stale when those change.
    """
    known = _known(settings)
    if is_project:
        known = {k: v for k, v in known.items() if FIELDS_BY_NAME[k].group in PROJECT_GROUPS}
    return known


def write_config_file(path: str, settings: Mapping[str, Any], is_project: bool = False) -> None:
    """Replace the JSON config file at `path` (through a link, its target) with what
    `config_to_save` keeps of `settings`; raises ConfigFileError.

    Agent Zero reads the file at any moment, so it is written whole to a temporary file beside it
    and renamed over it: a reader sees the old file or the new one, never half of one. The file
    keeps its permissions; a new one gets the usual ones (the umask applies).
    """
    write_json_file(path, config_to_save(settings, is_project))


def write_json_file(path: str, content: Any) -> None:
    """Replace the file at `path` (through a link, its target) with `content` as JSON, whole or
    not at all (`write_config_file`); raises ConfigFileError."""
    target = os.path.realpath(path)
    # a name no other writer (or crashed one) has taken
    temp = f"{target}.{os.urandom(6).hex()}.tmp"
    try:
        try:
            mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
        descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
                handle.write(json.dumps(content, indent=2) + "\n")
                handle.flush()
                os.fsync(handle.fileno())  # the rename must not land before the content does
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise ConfigFileError(f"cannot be written ({type(exc).__name__})") from None


@contextlib.contextmanager
def config_write_lock(path: str) -> Iterator[None]:
    """Hold the lock of the config file at `path` (through a link, its target) while a
    read-modify-write of it runs; raises ConfigFileError when the lock file cannot be opened.

    The lock is an exclusive `flock` on `<file>.lock` beside it, which stays there: removing it
    would let a writer waiting on the old one and a writer creating a new one both go ahead. The
    kernel releases the lock when its holder exits, killed or not, so a crashed writer holds up no
    one. It blocks while another writer holds it (for one file read and write): never take it on an
    event loop.
    """
    try:
        descriptor = os.open(os.path.realpath(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise ConfigFileError(f"cannot be written ({type(exc).__name__})") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def save_problems(submitted: Any, is_project: bool, saved_global: Mapping[str, Any]) -> list[str]:
    """Why the settings page's values cannot be saved, each naming the setting and what it accepts.

    The same validation as the settings model (`coerce` per field, then the relations between
    fields), applied to what would be written; the rest comes from the saved global settings.
    """
    if not isinstance(submitted, Mapping):
        return ["settings must be an object"]
    values = {name: _valid_or_default(name, raw)
              for name, raw in {**defaults(), **_known(saved_global)}.items()}
    problems = []
    for name, raw in config_to_save(submitted, is_project).items():
        try:
            values[name] = coerce(FIELDS_BY_NAME[name], raw)
        except InvalidValue as exc:
            problems.append(f"{name}: {exc}")
    return problems + [broken.problem for broken in relation_problems(values)]


def _valid_or_default(name: str, raw: Any) -> Any:
    try:
        return coerce(FIELDS_BY_NAME[name], raw)
    except InvalidValue:
        return FIELDS_BY_NAME[name].default


def _known(layer: Mapping[str, Any] | None) -> dict[str, Any]:
    if not isinstance(layer, Mapping):
        return {}
    return {k: v for k, v in with_current_names(layer).items() if k in FIELDS_BY_NAME}
