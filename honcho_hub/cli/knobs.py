"""The memory controls viewed and set from the command line, in the plugin's global settings file.

Each verb shows its controls' effective values and where each comes from, and changes them in
config.json as the settings page's save would; each returns a report (docs/architecture.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import ConfigFileError, InvalidValue
from ..settings.config import Settings
from ..settings.effective import ConfigLayers, effective_settings
from ..settings.files import (
    config_write_lock,
    load_config_file,
    read_config_file,
    save_problems,
    write_config_file,
)
from ..settings.spec import FIELDS_BY_NAME, PROJECT_GROUPS
from ..settings.upgrade import upgrade_config_locked
from ..settings.values import coerce
from ..storage import chats as chat_rows
from ..storage.db import with_existing

GLOBAL_CONFIG_NAME = "config.json"
DEFAULT_CONFIG_NAME = "default_config.yaml"
DEFAULT = "default"
API_KEY_VAR = "HONCHO_API_KEY"

# The observation flags by setting name: whose peer configuration, and which of its two flags.
OBSERVE_FLAGS = {"observe_user_me": ("user", "observe_me"),
                 "observe_user_others": ("user", "observe_others"),
                 "observe_agent_me": ("agent", "observe_me"),
                 "observe_agent_others": ("agent", "observe_others")}

STRATEGY_COSTS = {
    "per-project": "one session per project serialises delivery of the project's chats (delivery"
                   " runs in parallel per session) and one failing message holds every chat of the"
                   " project; the session's summary and messages span all its chats; a project"
                   " attached after a chat's first message splits that chat over two sessions",
    "global": "one shared session serialises delivery (delivery runs in parallel per session) and"
              " one failing message holds every chat; its summary and messages span all the chats"
              " it holds, so project scopes stop isolating them",
}
STRATEGY_ALWAYS = ("messages already captured keep the session they were queued for; events"
                   " already delivered are never re-sent")
PEER_RENAMED = ("messages already captured keep the peer id they were captured with; what Honcho"
                " holds under the old id is not recalled under the new one")
OBSERVATION_KEPT = ("sessions Honcho already holds keep the peer configuration they have (the"
                    " server's wins); new sessions get this one (--apply-existing sets it on the"
                    " sessions this install made)")
SECRETS_UNSEEN = ("the command line does not read Agent Zero's Settings → Secrets, where the key"
                  " usually is: it may be set there")


def default_plugin_dir() -> str:
    """The folder holding this package: the plugin's own folder once Agent Zero installed it."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Snapshot(NamedTuple):
    """The plugin's global settings as read at one moment."""

    saved: dict[str, Any]  # config.json as saved ({} when missing or unusable)
    shipped: dict[str, Any]  # default_config.yaml
    problem: str | None  # why config.json cannot be used, if it cannot
    settings: Settings


class Saved(NamedTuple):
    """What a change did to config.json."""

    written: bool  # False: the file already held these values
    # entries of the file that are not settings, left out as the settings page's save does
    dropped: int
    after: Snapshot  # the settings read back before another writer could change them


@dataclass(frozen=True)
class GlobalSettings:
    """The plugin's global settings in `plugin_dir`, as a process with `environ` sees them."""

    plugin_dir: str
    environ: Mapping[str, str]

    @property
    def path(self) -> str:
        """The global config.json (it may not exist yet)."""
        return os.path.join(self.plugin_dir, GLOBAL_CONFIG_NAME)

    def snapshot(self) -> Snapshot:
        """Both files read now, and the Settings Agent Zero would build from them in this
        environment."""
        try:
            saved, problem = load_config_file(self.path), None
        except ConfigFileError as exc:
            saved, problem = {}, None if exc.missing else str(exc)
        shipped = read_config_file(os.path.join(self.plugin_dir, DEFAULT_CONFIG_NAME))
        layers = ConfigLayers(global_config=saved, default_config=shipped)
        return Snapshot(saved, shipped, problem,
                        effective_settings(layers, secrets={}, environ=self.environ))

    def resolve(self, snap: Snapshot, name: str, warnings: list[str]) -> tuple[Any, str]:
        """(value, source) of one setting by the settings' precedence: a valid HONCHO_* variable,
        else what the files give (`saved_value`)."""
        field = FIELDS_BY_NAME[name]
        variables = {str(var).upper(): raw for var, raw in self.environ.items()}
        for var in field.env:
            raw = variables.get(var)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue  # an empty variable counts as unset
            try:
                return coerce(field, raw), var
            except InvalidValue as exc:
                warnings.append(f"{var} is set but ignored: {exc}")
        return self.saved_value(snap, name, warnings)

    def saved_value(self, snap: Snapshot, name: str, warnings: list[str]) -> tuple[Any, str]:
        """(value, source) of one setting from the files alone: the stronger file holding it (its
        value, or the default when that value is invalid), else the default."""
        field = FIELDS_BY_NAME[name]
        # The files are merged before validation, so only the stronger one holding a setting
        # counts.
        for source, layer in ((GLOBAL_CONFIG_NAME, snap.saved), (DEFAULT, snap.shipped)):
            if name in layer:
                try:
                    return coerce(field, layer[name]), source
                except InvalidValue as exc:
                    if source != DEFAULT:
                        warnings.append(f"{name} in {source} is ignored: {exc}")
                    return field.default, DEFAULT
        return field.default, DEFAULT

    def control(self, snap: Snapshot, name: str, warnings: list[str]) -> dict[str, Any]:
        """One control as shown: its effective value and where it comes from."""
        value, source = getattr(snap.settings, name), self.resolve(snap, name, warnings)[1]
        if name in OBSERVE_FLAGS and snap.settings.observation != "custom":
            role, flag = OBSERVE_FLAGS[name]
            value = snap.settings.observation_of(role)[flag]
            source = f"preset {snap.settings.observation}"
        elif name == "recall_mode" and value != self.resolve(snap, name, [])[0]:
            source = f"recall_enabled false in {self.resolve(snap, 'recall_enabled', [])[1]}"
        elif source in FIELDS_BY_NAME[name].env:
            warnings.append(f"{source} is set in this environment and wins over the setting:"
                            f" a saved {name} has no effect until {source} is removed")
        return {"name": name, "value": value, "source": source}

    def change(self, changes: Mapping[str, Any]) -> Saved:
        """Save `changes` (raw values by setting name) in config.json; raises InvalidValue or
        ConfigFileError, having changed nothing.

        Validated as the settings page's save is, against the file as saved; a rule between settings
        the file already broke does not refuse a change that does not break it. The read, the write
        and the read back run under the file's lock, so writers at once (the command line run twice)
        each keep the others' changes. Agent Zero's own settings page saves without it."""
        with config_write_lock(self.path):
            upgrade_config_locked(self.path)  # 1.x's unknown keys set aside, not dropped
            written, dropped = self._merge(changes)
            return Saved(written, dropped, self.snapshot())

    def _merge(self, changes: Mapping[str, Any]) -> tuple[bool, int]:
        """(written, dropped) of saving `changes` over config.json as it is now."""
        try:
            saved = load_config_file(self.path)
        except ConfigFileError as exc:
            if not exc.missing:  # rewriting it would lose what it holds
                raise ConfigFileError(f"{exc}: fix or remove it") from None
            saved = {}
        already = set(save_problems({}, False, saved))
        problems = [problem for problem in save_problems(changes, False, saved)
                    if problem not in already]
        if problems:
            raise InvalidValue("; ".join(problems))
        values = {name: coerce(FIELDS_BY_NAME[name], raw) for name, raw in changes.items()}
        if all(name in saved and _same(saved[name], value) for name, value in values.items()):
            return False, 0
        write_config_file(self.path, {**saved, **values})
        return True, sum(1 for name in saved if name not in FIELDS_BY_NAME)


def mode(plugin: GlobalSettings, value: str | None = None) -> dict[str, Any]:
    """recall_mode: hybrid (pack and tool), context (pack only) or tools (tool only)."""
    before, notes = plugin.snapshot(), []
    changes: dict[str, Any] = {}
    if value is not None:
        changes["recall_mode"] = value
        recall_enabled = plugin.resolve(before, "recall_enabled", [])[0]
        if _valid("recall_mode", value) != "tools" and not recall_enabled:
            changes["recall_enabled"] = True  # false would still read as tools
            notes.append("recall_enabled was false, which reads as recall_mode tools:"
                         " it is now true")
    return _run(plugin, ("recall_mode",), before, changes, notes)


def strategy(plugin: GlobalSettings, value: str | None = None) -> dict[str, Any]:
    """session_strategy: per-chat, per-project or global; a change prints what a shared session
    costs."""
    before, notes = plugin.snapshot(), []
    if value is not None:
        chosen = _valid("session_strategy", value)
        notes.extend([STRATEGY_COSTS[chosen]] if chosen in STRATEGY_COSTS else [])
        notes.append(STRATEGY_ALWAYS)
    return _run(plugin, ("session_strategy",), before, _given(session_strategy=value), notes)


def tokens(plugin: GlobalSettings, value: str | None = None,
           agent_share: str | None = None) -> dict[str, Any]:
    """max_context_tokens, the pack's token budget, and agent_representation_share, the agent's part
    of it."""
    before, notes = plugin.snapshot(), []
    if agent_share is not None and not before.settings.include_agent_representation:
        notes.append("agent_representation_share only counts while include_agent_representation is"
                     " on (it is off)")
    return _run(plugin, ("max_context_tokens", "agent_representation_share"), before,
                _given(max_context_tokens=value, agent_representation_share=agent_share), notes)


def peer(plugin: GlobalSettings, user: str | None = None, agent: str | None = None,
         reasoning: str | None = None) -> dict[str, Any]:
    """The human's and the agent's peer ids, and the dialectic's base reasoning level."""
    before = plugin.snapshot()
    changes = _given(user_peer_id=user, agent_peer_id=agent, dialectic_reasoning_level=reasoning)
    renamed = [name for name in ("user_peer_id", "agent_peer_id")
               if name in changes
               and _valid(name, changes[name]) != getattr(before.settings, name)]
    return _run(plugin, ("user_peer_id", "agent_peer_id", "dialectic_reasoning_level"), before,
                changes, [PEER_RENAMED] if renamed else [])


def observation(plugin: GlobalSettings, preset: str | None = None,
                flags: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """The observation preset; flags (observe_* by name) make it custom, starting from what is
    observed now."""
    before = plugin.snapshot()
    given = _given(**dict(flags or {}))
    chosen = None if preset is None else _valid("observation", preset)
    if given and chosen not in (None, "custom"):
        raise InvalidValue("observation: the --user-me, --user-others, --agent-me and"
                           " --agent-others flags go with custom (or no preset)")
    changes: dict[str, Any] = {}
    if given or chosen == "custom":
        # Custom starts from the flags in effect, so switching to it changes nothing not asked for.
        in_effect = {name: before.settings.observation_of(role)[flag]
                     for name, (role, flag) in OBSERVE_FLAGS.items()}
        changes = {"observation": "custom", **in_effect, **given}
    elif chosen is not None:
        changes = {"observation": chosen}
    return _run(plugin, ("observation", *OBSERVE_FLAGS), before, changes,
                [OBSERVATION_KEPT] if changes else [])


def identity(plugin: GlobalSettings) -> dict[str, Any]:
    """Workspace, peers, endpoint mode, API URL (never with credentials) and whether a key is set
    (never the key)."""
    snap = plugin.snapshot()
    warnings: list[str] = []
    controls = [plugin.control(snap, name, warnings)
                for name in ("workspace_id", "user_peer_id", "agent_peer_id", "endpoint_mode")]
    settings = snap.settings
    # Names where the URL was given and why it cannot be used, not the URL.
    if settings.api_url_problem:
        controls.append({"name": "api_url", "value": None, "source": settings.api_url_problem})
    else:
        url = plugin.control(snap, "api_url", warnings)
        if not plugin.resolve(snap, "api_url", [])[0]:
            url["source"] = f"default of endpoint_mode {settings.endpoint_mode}"
        controls.append(url)
    controls.append({"name": "api_key", "value": "set" if settings.has_api_key else "not set",
                     "source": API_KEY_VAR})
    notes = [] if settings.has_api_key else [SECRETS_UNSEEN]
    return _report(controls, notes, _file_warnings(snap) + warnings)


def sessions(plugin: GlobalSettings, limit: int = 100) -> dict[str, Any]:
    """The strategy in effect and the known chat -> Honcho session mappings, most recently captured
    first (no content); raises OutboxError. Reading never creates an outbox."""
    snap = plugin.snapshot()
    warnings: list[str] = []
    strategy_now = plugin.control(snap, "session_strategy", warnings)
    mappings: list[dict] = with_existing(
        snap.settings, lambda db: chat_rows.known_sessions(db, limit), [])
    # The outbox records a mapping when a chat's message is captured, from the version that added
    # them on.
    notes = [] if mappings else ["no chat -> session mapping recorded yet (one is recorded as a"
                                 " chat's message is captured)"]
    return {**_report([strategy_now], notes, _file_warnings(snap) + warnings), "sessions": mappings}


def _run(plugin: GlobalSettings, names: tuple[str, ...], before: Snapshot,
         changes: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """Save `changes` (if any), then show `names` as they are now."""
    after, changed, overridden = before, [], []
    if changes:
        saved = plugin.change(changes)
        after = saved.after
        overridden = [name for name in changes
                      if plugin.resolve(after, name, [])[1] in FIELDS_BY_NAME[name].env]
        if saved.written:
            changed = _changed(plugin, before, after, changes, overridden)
            notes = [_where_saved(changes), *notes]
            notes += [f"{saved.dropped} entries that are not settings of this plugin were dropped"
                      f" from {GLOBAL_CONFIG_NAME}, as the settings page's save drops them"
                      ] if saved.dropped else []
        else:
            held = ", ".join(f"{name} {value_text(after.saved[name])}" for name in changes)
            notes = [f"unchanged: {GLOBAL_CONFIG_NAME} already holds {held}"]
    warnings: list[str] = []
    controls = [plugin.control(after, name, warnings) for name in names]
    return {**_report(controls, notes, _file_warnings(after) + warnings), "changed": changed,
            "overridden": overridden}


def _changed(plugin: GlobalSettings, before: Snapshot, after: Snapshot,
             changes: Mapping[str, Any], overridden: list[str]) -> list[dict[str, Any]]:
    """Each saved setting whose value differs from before: from what was in effect or, for a
    setting a variable overrides, from what the files gave."""
    was = {name: plugin.saved_value(before, name, [])[0] if name in overridden
           else getattr(before.settings, name)
           for name in changes}
    return [{"name": name, "from": was[name], "to": after.saved[name]}
            for name in changes if not _same(was[name], after.saved[name])]


def _report(controls: list[dict[str, Any]], notes: list[str],
            warnings: list[str]) -> dict[str, Any]:
    return {"controls": controls, "changed": [], "notes": notes,
            "warnings": list(dict.fromkeys(warnings)), "overridden": []}


def _where_saved(changes: Mapping[str, Any]) -> str:
    """Which file changed, and that a project's own settings still win for the project
    settings."""
    local = [name for name in changes if FIELDS_BY_NAME[name].group in PROJECT_GROUPS]
    shared = [name for name in changes if name not in local]
    text = f"saved in the plugin's global settings ({GLOBAL_CONFIG_NAME})"
    if local:
        text += (f"; a project's own {', '.join(local)}"
                 f" still {'wins' if len(local) == 1 else 'win'} in its chats")
    if shared:
        text += f"; {', '.join(shared)} {'is' if len(shared) == 1 else 'are'} global only"
    return text


def _file_warnings(snap: Snapshot) -> list[str]:
    if snap.problem is None:
        return []
    return [f"{GLOBAL_CONFIG_NAME} cannot be used ({snap.problem}):"
            " Agent Zero ignores it and uses the defaults"]


def _given(**values: str | None) -> dict[str, str]:
    """The values the user gave (None: not given)."""
    return {name: value for name, value in values.items() if value is not None}


def _valid(name: str, raw: Any) -> Any:
    """`raw` as setting `name` takes it; raises InvalidValue worded as the settings page's save
    words it."""
    try:
        return coerce(FIELDS_BY_NAME[name], raw)
    except InvalidValue as exc:
        raise InvalidValue(f"{name}: {exc}") from None


def _same(saved: Any, value: Any) -> bool:
    """Equal and of the same type: a saved 1 is not the setting true."""
    return type(saved) is type(value) and saved == value


def value_text(value: Any) -> str:
    """A value as the command line prints it (true/false as in the settings files)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)
