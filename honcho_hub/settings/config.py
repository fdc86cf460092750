"""The one `Settings` value, built by `build_settings` from secrets, environment and settings.

Precedence per setting: Agent Zero secrets > process environment > plugin settings > defaults; a
value that does not fit falls through, with one warning that never names the value.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import InvalidValue
from ..runtime import warn_once
from .hosts import is_hosted_url
from .spec import (
    DEFAULT_OUTBOX_PATH,
    FIELDS,
    FIELDS_BY_NAME,
    HOSTED_MCP_URL,
    MODE_API_URLS,
    OBSERVATION_PRESETS,
    PROJECT_GROUPS,
    Field,
    defaults,
    with_current_names,
)
from .values import coerce

log = logging.getLogger(__name__)

API_KEY_VAR = "HONCHO_API_KEY"
AGENT_ZERO_USR = "/a0/usr"
MAX_KEY_CHARS = 4_096
# A tool verb, the card, an inspector action: this many SDK timeouts in all.
OPERATION_SDK_TIMEOUTS = 2
# What a URL setting holds when the URL the user gave cannot be used. Its scheme is one no HTTP
# client speaks, so a consumer that does not look at `api_url_problem` fails on this machine instead
# of sending the key somewhere: an empty URL would not do, since the SDK reads an empty base URL as
# "the hosted default".
UNUSABLE_URL = "unusable://configured-url"
# Where the MCP URL comes from when a self-hosted deployment has none (`mcp_url` is then "").
NO_MCP_URL = "self-hosted, no MCP URL set"
# What each unusable URL stops, for its warning.
_UNUSABLE_EFFECT = {"api_url": "nothing is sent to or recalled from Honcho until it is fixed",
                    "mcp_url": "no MCP URL is shown and its check fails until it is fixed"}


class KeyProvider:
    """Returns the current API key, re-reading secrets and environment on every call."""

    def __init__(self, load_secrets: Callable[[], Mapping[str, Any]], environ: Mapping[str, str]):
        self._load_secrets = load_secrets
        self._environ = environ

    def __call__(self) -> str:
        try:
            secrets = self._load_secrets() or {}
        except Exception:  # a broken secrets store must not hide the environment's key
            log.warning("could not read secrets; using the environment for %s", API_KEY_VAR)
            secrets = {}
        for source in (secrets, self._environ):
            key = _clean_key(source.get(API_KEY_VAR))
            if key:
                return key
        return ""

    def __repr__(self) -> str:
        return "KeyProvider(<hidden>)"


def _clean_key(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    key = raw.strip()
    if not key or len(key) > MAX_KEY_CHARS or any(c.isspace() or ord(c) < 32 for c in key):
        return ""
    return key


@dataclass(frozen=True)
class Settings:
    """Effective, validated settings of one process (or one project's view of it)."""

    endpoint_mode: str
    api_url: str
    mcp_url: str
    sdk_timeout_s: float
    check_timeout_s: float
    mcp_auth: str
    workspace_id: str
    user_peer_id: str
    agent_peer_id: str
    human_peer_id: str
    profile_peers: str
    unmapped_chats: str
    sender_peers: str
    outside_chats: str
    capture_enabled: bool
    capture_scheduler_chats: bool
    outbox_path: str
    outbox_synchronous: str
    max_queued_rows: int
    capture_wait_ms: int
    journal_capacity: int
    delivered_retention_h: float
    dead_retention_days: float
    batch_size: int
    concurrency: int
    max_attempts: int
    retry_base_s: float
    retry_max_s: float
    retry_after_cap_s: float
    circuit_base_s: float
    circuit_max_s: float
    auth_probe_interval_s: float
    lease_s: float
    poll_interval_s: float
    expiry_sweep_s: float
    recall_enabled: bool
    recall_mode: str
    context_cadence: int
    include_agent_representation: bool
    agent_representation_share: float
    cache_ttl_s: float
    cache_max_entries: int
    max_context_tokens: int
    search_top_k: int
    max_conclusions: int
    recall_timeout_s: float
    recall_wait_ms: int
    recall_min_query_chars: int
    recall_include_messages: bool
    recall_limit_to_session: bool
    recall_receipts: bool
    ask_timeout_s: float
    dialectic_enabled: bool
    dialectic_cadence: int
    dialectic_depth: int
    dialectic_max_chars: int
    dialectic_reasoning_level: str
    dialectic_pass_levels: str
    reasoning_level_heuristic: bool
    reasoning_level_cap: str
    dialectic_prewarm: bool
    observation: str
    observe_user_me: bool
    observe_user_others: bool
    observe_agent_me: bool
    observe_agent_others: bool
    session_strategy: str
    scope_strategy: str
    scope_prefix: str
    scope_custom: str
    debug: bool
    notifications: bool
    warnings: tuple[str, ...] = ()
    # "<variable or setting>: why" when the URL given there cannot be used; never the value itself.
    # The URL field then holds UNUSABLE_URL, and delivery pauses while `api_url_problem` is set.
    api_url_problem: str | None = None
    mcp_url_problem: str | None = None
    # Where each URL in effect comes from ("from HONCHO_API_URL (secrets)", "default of
    # endpoint_mode hosted", ...): shown beside the URL; it names places, never a value.
    api_url_source: str = ""
    mcp_url_source: str = ""
    # The deployment the API URL in effect points at: hosted (Plastic Labs' domain) or self_hosted,
    # whatever endpoint_mode says (it only picks the default URL), and where that comes from.
    deployment: str = "hosted"
    deployment_source: str = ""
    key_provider: KeyProvider = field(
        default_factory=lambda: KeyProvider(dict, {}), repr=False, compare=False
    )

    def api_key(self) -> str:
        """The API key as of now ('' when none is set)."""
        return self.key_provider()

    @property
    def recall_wait_s(self) -> float:
        """How long the recall hook waits for the query-aware recall, seconds: recall_wait_ms (-1
        meaning the whole recall_timeout_s), never past recall_timeout_s."""
        if self.recall_wait_ms < 0:
            return self.recall_timeout_s
        return min(self.recall_wait_ms / 1000, self.recall_timeout_s)

    @property
    def operation_deadline_s(self) -> float:
        """The deadline of one memory-tool verb (but ask, bounded by ask_timeout_s), the sidebar's
        card and one memory-inspector action: two SDK timeouts, every request and read of it counted
        together."""
        return OPERATION_SDK_TIMEOUTS * self.sdk_timeout_s

    @property
    def injects_recall(self) -> bool:
        """Whether a memory pack is injected before user turns (recall_mode hybrid or context)."""
        return self.recall_mode != "tools"

    @property
    def offers_tool(self) -> bool:
        """Whether the agent has the honcho_memory tool (every mode but context)."""
        return self.recall_mode != "context"

    def observation_of(self, role: str) -> dict[str, bool]:
        """The peer configuration of the human (`user`) or the agent (`agent`) under
        `observation`."""
        if self.observation == "custom":
            me, others = ((self.observe_user_me, self.observe_user_others) if role == "user"
                          else (self.observe_agent_me, self.observe_agent_others))
        else:
            me, others = OBSERVATION_PRESETS[self.observation][
                "agent" if role == "agent" else "user"]
        return {"observe_me": me, "observe_others": others}

    @property
    def profile_peer_map(self) -> dict[str, str]:
        """profile_peers as {agent profile: human peer id}."""
        return _pair_map(self.profile_peers)

    @property
    def sender_peer_map(self) -> dict[str, str]:
        """sender_peers as {`channel:id`: human peer id}."""
        return _pair_map(self.sender_peers)

    @property
    def pass_levels(self) -> tuple[str, ...]:
        """dialectic_pass_levels as a tuple (empty: every pass at the turn's level)."""
        return tuple(self.dialectic_pass_levels.split(",")) if self.dialectic_pass_levels else ()

    @property
    def mcp_configured(self) -> bool:
        """Whether the deployment has an MCP server to show and check (a self-hosted one has none
        until the user sets its URL)."""
        return bool(self.mcp_url)

    @property
    def has_api_key(self) -> bool:
        """Whether a key is configured, without revealing it."""
        return bool(self.api_key())

    def destination(self) -> str:
        """Where events go: API URL and workspace, never the key. While the API URL is unusable this
        is `unusable_url_destination()`, which no worker can reach: events are still captured, and
        wait."""
        return f"{self.api_url}#{self.workspace_id}"

    def unusable_url_destination(self) -> str:
        """The destination of this workspace's events captured while the API URL was unusable. They
        were meant for whatever URL the user fixes it to, and were never sent (so Honcho holds none
        of them): once `api_url_problem` is gone, they may be moved to `destination()`."""
        return f"{UNUSABLE_URL}#{self.workspace_id}"


def build_settings(
    plugin_settings: Mapping[str, Any] | None,
    secrets: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None,
    *,
    project_settings: Mapping[str, Any] | None = None,
    load_secrets: Callable[[], Mapping[str, Any]] | None = None,
    agent_zero_usr: str = AGENT_ZERO_USR,
) -> Settings:
    """Build the effective Settings; never raises on bad input, warns once per problem instead."""
    warnings: list[str] = []
    env = _mapping(environ, "environment", warnings)
    plugin = with_current_names(_mapping(plugin_settings, "plugin settings", warnings))
    warnings.extend(unknown_setting_warnings(plugin))
    plugin = apply_project_settings(plugin, project_settings, warnings)
    from_env = _honcho_vars(env)
    from_secrets = _honcho_vars(_mapping(secrets, "secrets", warnings))
    overrides = {**from_env, **from_secrets}  # secrets win
    # where each variable came from, named beside the URL it sets
    origins = {**dict.fromkeys(from_env, "environment"), **dict.fromkeys(from_secrets, "secrets")}
    values: dict[str, Any] = {}  # Settings' fields, of their several types
    problems: dict[str, Any] = {}  # <url field>_problem: str | None
    given: dict[str, str | None] = {}  # <url field>: where the URL was given, None: nowhere
    for spec in FIELDS:
        if spec.kind == "url":
            values[spec.name], problems[f"{spec.name}_problem"], given[spec.name] = _resolve_url(
                spec, plugin, overrides, warnings)
        else:
            values[spec.name] = _resolve(spec, plugin, overrides, warnings)
    for broken in relation_problems(values):
        if broken.repair is None:
            warnings.append(f"{broken.problem} (kept: {broken.effect})")
        else:
            values.update(broken.repair(values))
            warnings.append(f"{broken.problem} (used instead: {broken.effect})")
    # One switch, two names: recall_enabled false is recall_mode tools, and code may read either.
    if not values["recall_enabled"]:
        values["recall_mode"] = "tools"
    values["recall_enabled"] = values["recall_mode"] != "tools"
    endpoints = _endpoints_in_effect(values, given, origins, problems["api_url_problem"])
    if values["outbox_path"] == DEFAULT_OUTBOX_PATH and not os.path.isdir(agent_zero_usr):
        values["outbox_path"] = state_dir_outbox(env)
    static_secrets = dict(_mapping(secrets, "secrets", []))
    provider = KeyProvider(load_secrets or (lambda: static_secrets), dict(env))
    log_once(warnings)
    return Settings(**values, **problems, **endpoints, warnings=tuple(warnings),
                    key_provider=provider)


def apply_project_settings(
    plugin: Mapping[str, Any], project: Mapping[str, Any] | None, warnings: list[str]
) -> dict[str, Any]:
    """Layer a project's settings over the global ones; only capture, recall and scopes may
    change."""
    merged = dict(plugin)
    if not isinstance(project, Mapping):
        return merged
    for name, value in with_current_names(project).items():
        spec = FIELDS_BY_NAME.get(name)
        if spec is not None and spec.group in PROJECT_GROUPS:
            merged[name] = value
        elif name in merged and merged[name] == value:
            continue  # the settings page saves every field; an unchanged global value is harmless
        else:
            warnings.append(f"project setting '{name}' ignored: it can only be set globally")
    return merged


class Relation(NamedTuple):
    """A rule between settings that each fit their own bounds."""

    names: tuple[str, ...]
    holds: Callable[[Mapping[str, Any]], bool]
    problem: str
    effect: str  # what a config that breaks it does anyway
    # the values used instead, when breaking the relation is harmful
    repair: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None


def _lease_covering_requests(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"lease_s": max(FIELDS_BY_NAME["lease_s"].default, 3 * values["sdk_timeout_s"])}


# The settings page refuses to save a value that breaks a relation. A config that breaks one anyway
# (edited by hand, or saved before the rule) is kept when that is harmless, with a warning saying
# what it does; otherwise the relation's repair gives the values used instead, with a warning saying
# so.
RELATIONS = (
    # A lease must outlast any single request (renewals happen between them), or another worker
    # could take over a batch that is still on the wire and send it again.
    Relation(("lease_s", "sdk_timeout_s"), lambda v: v["lease_s"] >= 3 * v["sdk_timeout_s"],
             "lease_s must be at least 3 × sdk_timeout_s",
             "the default lease_s, or 3 × sdk_timeout_s when that is longer",
             _lease_covering_requests),
    Relation(("retry_base_s", "retry_max_s"), lambda v: v["retry_base_s"] <= v["retry_max_s"],
             "retry_base_s must not exceed retry_max_s", "every backoff waits up to retry_max_s"),
    Relation(("circuit_base_s", "circuit_max_s"),
             lambda v: v["circuit_base_s"] <= v["circuit_max_s"],
             "circuit_base_s must not exceed circuit_max_s",
             "every circuit wait is up to circuit_max_s"),
    Relation(("recall_wait_ms", "recall_timeout_s"),
             lambda v: v["recall_wait_ms"] <= 1000 * v["recall_timeout_s"],
             "recall_wait_ms must not exceed recall_timeout_s",
             "the recall hook waits at most recall_timeout_s"),
    Relation(("scope_strategy", "scope_custom"),
             lambda v: v["scope_strategy"] != "custom" or bool(v["scope_custom"].strip()),
             "scope_strategy custom needs a scope_custom name", "chats get no scope"),
)


def relation_problems(values: Mapping[str, Any]) -> list[Relation]:
    """The RELATIONS that valid, coerced `values` break."""
    return [relation for relation in RELATIONS if not relation.holds(values)]


def state_dir_outbox(environ: Mapping[str, str]) -> str:
    """The outbox location outside Agent Zero: a per-user state folder."""
    base = environ.get("XDG_STATE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(os.path.abspath(base), "honcho-hub", "outbox.sqlite3")


def _mapping(value: Any, what: str, warnings: list[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    warnings.append(f"{what} ignored: expected a mapping")
    return {}


def _honcho_vars(source: Mapping[str, Any]) -> dict[str, Any]:
    """HONCHO_* entries that are set (an empty value counts as unset)."""
    found = {}
    for name, value in source.items():
        key = str(name).upper()
        if key.startswith("HONCHO_") and not (isinstance(value, str) and not value.strip()):
            found[key] = value
    return found


def _candidates(spec: Field, plugin: Mapping[str, Any],
                overrides: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(source name, raw value) of every place the field is given, strongest first."""
    candidates = [(var, overrides[var]) for var in spec.env if var in overrides]
    if spec.name in plugin:
        candidates.append((f"setting '{spec.name}'", plugin[spec.name]))
    return candidates


def _resolve(spec: Field, plugin: Mapping[str, Any], overrides: Mapping[str, Any],
             warnings: list[str]) -> Any:
    """First valid value of: the field's variables, the plugin setting, the default."""
    for source, raw in _candidates(spec, plugin, overrides):
        try:
            return coerce(spec, raw)
        except InvalidValue as exc:
            warnings.append(f"{source} ignored: {exc}")
    return spec.default


def _resolve_url(spec: Field, plugin: Mapping[str, Any], overrides: Mapping[str, Any],
                 warnings: list[str]) -> tuple[str, str | None, str | None]:
    """The strongest URL given ('' for none: the deployment's default), else UNUSABLE_URL and why;
    with where it was given (a variable or `setting '<name>'`; None: nowhere).

    Unlike other settings, a URL that cannot be used does not fall through to a weaker source or
    the default: either would send the key to a server the user did not choose for it.
    """
    given = [(source, raw) for source, raw in _candidates(spec, plugin, overrides)
             if raw is not None]
    if not given:
        return "", None, None
    source, raw = given[0]
    try:
        url = coerce(spec, raw)
        return url, None, source if url else None  # an empty setting gives none
    except InvalidValue as exc:
        problem = f"{source}: not a usable URL ({exc})"
        warnings.append(f"{problem}; {_UNUSABLE_EFFECT[spec.name]}")
        return UNUSABLE_URL, problem, source


def _endpoints_in_effect(values: dict[str, Any], given: Mapping[str, str | None],
                         origins: Mapping[str, str], api_url_problem: str | None) -> dict[str, Any]:
    """Fill in the URLs given nowhere, and say where each comes from and which deployment they
    make: the API URL's (a URL outside the hosted domain is self-hosted, whatever endpoint_mode
    says), else endpoint_mode's. The MCP URL defaults to the hosted one only for the hosted
    deployment: a self-hosted one has none unless it is set."""
    def shown(name: str) -> str:
        where = given[name] or ""
        return (f"from {where} ({origins[where]})" if where in origins
                else f"from the {name} setting")

    mode = values["endpoint_mode"]
    if given["api_url"] is None:
        values["api_url"] = MODE_API_URLS[mode]
        api_source = f"default of endpoint_mode {mode}"
    else:
        api_source = shown("api_url")
    if given["api_url"] is None or api_url_problem:
        deployment, deployment_source = mode, "from the endpoint_mode setting"
    else:
        deployment = "hosted" if is_hosted_url(values["api_url"]) else "self_hosted"
        deployment_source = api_source
    if given["mcp_url"] is not None:
        mcp_source = shown("mcp_url")
    elif deployment == "hosted":
        values["mcp_url"], mcp_source = HOSTED_MCP_URL, "default of the hosted deployment"
    else:
        mcp_source = NO_MCP_URL
    return {"api_url_source": api_source, "mcp_url_source": mcp_source,
            "deployment": deployment, "deployment_source": deployment_source}


def unknown_setting_warnings(plugin: Mapping[str, Any]) -> list[str]:
    """Warnings for keys that are not settings (an API key in config.json among them)."""
    return [
        f"setting '{name}' is not a setting of this plugin"
        + ("; set HONCHO_API_KEY under Settings → Secrets" if "key" in str(name).lower() else "")
        for name in plugin
        if name not in FIELDS_BY_NAME
    ]


def log_once(warnings: list[str]) -> None:
    """Log each distinct settings warning once per process (settings are rebuilt on every turn)."""
    for text in warnings:
        warn_once(f"settings: {text}", "honcho settings: %s", text, logger=log)


__all__ = [
    "KeyProvider",
    "Settings",
    "UNUSABLE_URL",
    "apply_project_settings",
    "build_settings",
    "defaults",
    "log_once",
    "relation_problems",
    "state_dir_outbox",
    "unknown_setting_warnings",
]


def _pair_map(pairs: str) -> dict[str, str]:
    """`a=x,b=y` (a validated peer map: no spaces, each key once) as {a: x, b: y}."""
    return dict(pair.split("=", 1) for pair in pairs.split(",")) if pairs else {}
