"""Every plugin setting in one table: default, bounds, group and environment variables.

`default_config.yaml`, the settings table of `docs/reference.md`, `config.Settings` and the settings
page are all checked against this table by the tests, so a setting is added here first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Groups a per-project configuration may change. Everything else (connection, identity, the outbox,
# delivery) is process-wide: one worker drains one outbox to one destination.
PROJECT_GROUPS = frozenset({"capture", "recall", "dialectic", "scopes", "humans"})

DEFAULT_OUTBOX_PATH = "/a0/usr/honcho/outbox.sqlite3"

# The API URL by endpoint mode when none is given; an explicit URL always wins over these.
MODE_API_URLS = {"hosted": "https://api.honcho.dev", "self_hosted": "http://localhost:8000"}
# The MCP URL of the hosted deployment when none is given. A self-hosted deployment has no default:
# Honcho's own compose file runs no MCP server, so its MCP URL is only what the user sets.
HOSTED_MCP_URL = "https://mcp.honcho.dev"

# The settings a Honcho gateway is built from, beside its timeout (HonchoGateway.for_settings): a
# gateway cached by settings is rebuilt when one of them changes, since it creates sessions with its
# peers' flags.
OBSERVATION_FIELDS = ("observation", "observe_user_me", "observe_user_others", "observe_agent_me",
                      "observe_agent_others")
GATEWAY_FIELDS = ("api_url", "workspace_id", "user_peer_id", "agent_peer_id", *OBSERVATION_FIELDS)

# Where a chat that is not the owner's comes from (`sender_peers` keys: `<channel>:<id>`).
SENDER_CHANNELS = ("telegram", "whatsapp", "email", "api")

# Honcho's dialectic reasoning levels, cheapest first.
REASONING_LEVELS = ("minimal", "low", "medium", "high", "max")
MAX_PASS_LEVELS = 3  # one per dialectic pass

# What Honcho derives, by preset: (observe_me, observe_others) of the human and of the agent. A peer
# whose observe_me is false is not modelled at all; observe_others lets it form its own view of the
# others.
OBSERVATION_PRESETS = {
    "seed": {"user": (True, True), "agent": (False, True)},
    "directional": {"user": (True, True), "agent": (True, True)},
    "unified": {"user": (True, False), "agent": (False, True)},
}


@dataclass(frozen=True)
class Field:
    """One setting: how to validate it and where it may come from."""

    name: str
    kind: str  # bool, int, float, enum, url, id, optional_id, peer_map, sender_map, path, prefix,
    # text, levels
    default: Any
    group: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # environment variables, strongest first
    doc: str = ""
    formerly: tuple[str, ...] = ()  # names it had: a saved config that uses one still sets it

    def bounds_text(self) -> str:
        """The accepted values in words, for warnings and the reference."""
        if self.kind in ("int", "float"):
            return f"{_num(self.lo)}–{_num(self.hi)}"
        if self.kind == "enum":
            return ", ".join(self.choices)
        return _KIND_BOUNDS[self.kind]

    def hint(self) -> str:
        """The settings page's hint: the accepted values, then the default in their spelling
        (true and false as YAML and the JSON of the form write them, numbers as the bounds)."""
        if isinstance(self.default, bool):
            default = "true" if self.default else "false"
        elif isinstance(self.default, (int, float)):
            default = _num(self.default)
        else:
            default = self.default or "empty"
        return f"{self.bounds_text()}; default {default}"


def _num(value: float | None) -> str:
    number = float(value or 0)
    return f"{int(number):,}" if number.is_integer() else f"{number:g}"


_KIND_BOUNDS = {
    "bool": "true, false",
    "url": "http(s) URL without credentials; empty = the deployment's default",
    "id": "1–512 of A-Z a-z 0-9 _ -",
    "optional_id": "empty, or 1–512 of A-Z a-z 0-9 _ -",
    "peer_map": "empty, or profile=peer pairs separated by commas (ids of A-Z a-z 0-9 _ -)",
    "sender_map": "empty, or channel:id=peer pairs separated by commas (channel telegram, whatsapp,"
                  " email or api; the id without spaces, commas or =; peers of A-Z a-z 0-9 _ -)",
    "path": "absolute path",
    "prefix": "0–64 of A-Z a-z 0-9 _ -",
    "text": "0–200 characters, no control characters",
    "levels": f"up to {MAX_PASS_LEVELS} of {', '.join(REASONING_LEVELS)}, comma-separated;"
              " empty = every pass at the turn's level",
}


def _f(name: str, kind: str, default: Any, group: str, doc: str, **kw: Any) -> Field:
    return Field(name=name, kind=kind, default=default, group=group, doc=doc, **kw)


FIELDS: tuple[Field, ...] = (
    # connection
    _f("endpoint_mode", "enum", "hosted", "connection",
       "Picks the default URLs; explicit URLs win.", choices=("hosted", "self_hosted")),
    _f("api_url", "url", "", "connection", "Honcho API base URL.",
       env=("HONCHO_API_URL", "HONCHO_BASE_URL")),
    _f("mcp_url", "url", "", "connection", "Honcho MCP server URL (a separate service).",
       env=("HONCHO_MCP_URL",)),
    _f("sdk_timeout_s", "float", 10.0, "connection",
       "Timeout of one SDK request, seconds; a memory-tool verb, the card and an inspector action"
       " end within 2 × this in all.", lo=1, hi=120),
    _f("check_timeout_s", "float", 5.0, "connection",
       "Deadline of each endpoint check, and of the full status's requests to Honcho, seconds.",
       lo=0.5, hi=60),
    _f("mcp_auth", "enum", "same_deployment", "connection", "When the MCP check sends the API key:"
       " same_deployment (both hosted defaults, or the API's host), always, never.",
       choices=("same_deployment", "always", "never")),
    # identity
    _f("workspace_id", "id", "agent-zero", "identity", "Honcho workspace.",
       env=("HONCHO_WORKSPACE_ID",)),
    _f("user_peer_id", "id", "user", "identity", "Peer id of the human.", env=("HONCHO_USER_ID",)),
    _f("agent_peer_id", "id", "agent-zero", "identity",
       "Peer id of the agent (never the profile name).", env=("HONCHO_AGENT_PEER_ID",)),
    # several humans: Agent Zero v1.7 has one login and its chats name no user
    _f("human_peer_id", "optional_id", "", "humans",
       "The human's peer in this project's chats; empty = user_peer_id (or the agent profile's"
       " peer)."),
    _f("profile_peers", "peer_map", "", "sessions",
       "The human's peer by Agent Zero agent profile, e.g. research=alice,coder=bob; a project's"
       " human_peer_id wins."),
    _f("unmapped_chats", "enum", "default-peer", "sessions",
       "Chats no project or profile maps to a human: default-peer (user_peer_id) or no-capture"
       " (neither captured nor recalled; with no mapping anywhere, no chat is).",
       choices=("default-peer", "no-capture")),
    # chats that are not the owner's: a chat integration's sender, the external API's caller
    _f("sender_peers", "sender_map", "", "sessions",
       "The peer of a chat integration's sender, e.g. telegram:12345=user,email:bob@example.org=bob"
       " (user: the owner's own phone or address); the sender keys are shown in a chat's status."),
    _f("outside_chats", "enum", "own-peer", "sessions",
       "Chats from a chat integration or the external API that sender_peers does not map:"
       " own-peer (a peer of each sender, group or API chat; none of the owner's memory), owner"
       " (the owner's, as before) or no-capture (neither captured nor recalled).",
       choices=("own-peer", "owner", "no-capture")),
    # capture
    _f("capture_enabled", "bool", True, "capture",
       "Queue what the human typed and agent 0's replies."),
    _f("capture_scheduler_chats", "bool", False, "capture",
       "Also capture chats run by scheduled tasks."),
    # outbox
    _f("outbox_path", "path", DEFAULT_OUTBOX_PATH, "outbox", "SQLite outbox file.",
       env=("HONCHO_OUTBOX_PATH",)),
    _f("outbox_synchronous", "enum", "FULL", "outbox",
       "SQLite durability: FULL survives power loss.", choices=("FULL", "NORMAL")),
    _f("max_queued_rows", "int", 10_000, "outbox", "Row bound of the outbox.",
       lo=100, hi=1_000_000),
    _f("capture_wait_ms", "int", 250, "outbox",
       "Longest wait of the capture writer for the database lock before it retries later.",
       lo=10, hi=2_000),
    _f("journal_capacity", "int", 256, "outbox",
       "Messages the capture journal keeps while the outbox cannot take them.",
       lo=16, hi=10_000, formerly=("handoff_capacity",)),
    _f("delivered_retention_h", "float", 24.0, "outbox", "Hours delivered rows are kept.",
       lo=0, hi=8_760),
    _f("dead_retention_days", "float", 30.0, "outbox", "Days dead letters are kept.",
       lo=1, hi=3_650),
    # delivery
    _f("batch_size", "int", 20, "delivery", "Messages per session batch.", lo=1, hi=100),
    _f("concurrency", "int", 2, "delivery", "Sender threads.", lo=1, hi=8),
    _f("max_attempts", "int", 8, "delivery", "Attempts before a server error dead-letters.",
       lo=1, hi=100),
    _f("retry_base_s", "float", 2.0, "delivery", "First backoff step, seconds.", lo=0.1, hi=600),
    _f("retry_max_s", "float", 600.0, "delivery", "Longest backoff, seconds.", lo=1, hi=86_400),
    _f("retry_after_cap_s", "float", 3_600.0, "delivery", "Cap on a server's Retry-After, seconds.",
       lo=1, hi=86_400),
    _f("circuit_base_s", "float", 5.0, "delivery", "First wait after the server was unreachable.",
       lo=1, hi=600),
    _f("circuit_max_s", "float", 300.0, "delivery", "Longest wait while unreachable, seconds.",
       lo=5, hi=3_600),
    _f("auth_probe_interval_s", "float", 60.0, "delivery",
       "Probe interval after a 401/403, seconds.", lo=5, hi=3_600),
    _f("lease_s", "float", 120.0, "delivery",
       "Lease of a batch being sent, seconds; at least 3 × sdk_timeout_s.", lo=10, hi=3_600),
    _f("poll_interval_s", "float", 5.0, "delivery", "Worker timer between wake-ups, seconds.",
       lo=0.5, hi=300),
    _f("expiry_sweep_s", "float", 300.0, "delivery",
       "How often the worker deletes memories whose lifetime ended, seconds.", lo=60, hi=3_600),
    # recall
    _f("recall_enabled", "bool", True, "recall",
       "Inject a memory pack before each user turn (false = recall_mode tools)."),
    _f("recall_mode", "enum", "hybrid", "recall",
       "hybrid: the pack is injected and the agent has the tool; context: injected only (no tool);"
       " tools: the agent recalls through the tool only.",
       choices=("hybrid", "context", "tools"), env=("HONCHO_RECALL_MODE",)),
    _f("context_cadence", "int", 1, "recall",
       "The query-aware context call is made every this many user turns; turns between reuse the"
       " chat's last pack.", lo=1, hi=50),
    _f("include_agent_representation", "bool", False, "recall",
       "Also put the agent's own representation and card (its self-model) in the pack."),
    _f("agent_representation_share", "float", 0.25, "recall",
       "Share of the pack's token budget kept for the agent's self-model.", lo=0, hi=0.5),
    # Positive, as the seed says: a pack that expires at once is no cache (clear the cache to drop
    # it).
    _f("cache_ttl_s", "float", 120.0, "recall", "Recall cache lifetime, seconds.", lo=1, hi=3_600,
       env=("HONCHO_CACHE_TTL",)),
    _f("cache_max_entries", "int", 256, "recall", "Recall cache entries.", lo=1, hi=10_000),
    _f("max_context_tokens", "int", 500, "recall", "Token budget of the memory pack.",
       lo=50, hi=100_000, env=("HONCHO_MAX_CONTEXT_TOKENS",)),
    _f("search_top_k", "int", 8, "recall", "Relevant messages searched.", lo=1, hi=100),
    _f("max_conclusions", "int", 20, "recall", "Relevant conclusions included.", lo=1, hi=100),
    _f("recall_timeout_s", "float", 2.5, "recall", "Longest wait of a turn for recall, seconds.",
       lo=0.1, hi=30),
    # -1 rather than null for "the whole deadline": the settings page, YAML and the environment all
    # carry a number, validated like every other int setting. Resolved against recall_timeout_s in
    # Settings.
    _f("recall_wait_ms", "int", -1, "recall",
       "How long a turn waits for the recall started when your message was captured, ms; -1 = all"
       " of recall_timeout_s, 0 = never wait.", lo=-1, hi=60_000, env=("HONCHO_RECALL_WAIT_MS",)),
    _f("recall_min_query_chars", "int", 3, "recall",
       "Shorter user text is not used as a search query.", lo=0, hi=1_000),
    _f("recall_include_messages", "bool", True, "recall", "Include relevant messages in the pack."),
    _f("recall_limit_to_session", "bool", False, "recall",
       "Search only the current chat's messages."),
    _f("recall_receipts", "bool", True, "recall",
       "Log a receipt in the chat on each recalled turn: the pack's sections, tokens and freshness"
       " (counts only); expanding it shows the pack while it is cached."),
    _f("ask_timeout_s", "float", 60.0, "recall",
       "Deadline of an explicit dialectic question (the tool's ask), all its requests, seconds.",
       lo=5, hi=300),
    # dialectic: an opt-in layer of the pack, computed in the background (Honcho LLM calls)
    _f("dialectic_enabled", "bool", False, "dialectic",
       "Add a note on what matters now, synthesised by Honcho's dialectic in the background"
       " (server LLM calls), to the pack."),
    _f("dialectic_cadence", "int", 2, "dialectic",
       "The note is refreshed every this many user turns.", lo=1, hi=20),
    _f("dialectic_depth", "int", 1, "dialectic",
       "Passes: 2 audits the answer against recent evidence, 3 reconciles contradictions.",
       lo=1, hi=3),
    _f("dialectic_max_chars", "int", 600, "dialectic", "Longest note, characters.",
       lo=100, hi=4_000),
    _f("dialectic_reasoning_level", "enum", "low", "dialectic", "Base reasoning level of the note.",
       choices=REASONING_LEVELS),
    _f("dialectic_pass_levels", "levels", "", "dialectic",
       "Reasoning level of each pass, in order."),
    _f("reasoning_level_heuristic", "bool", True, "dialectic",
       "Raise the level for longer messages: +1 from 120 characters, +2 from 400."),
    _f("reasoning_level_cap", "enum", "high", "dialectic", "Highest level the heuristic may reach.",
       choices=REASONING_LEVELS),
    _f("dialectic_prewarm", "bool", True, "dialectic",
       "Prepare the note when a new chat starts, so its first turn has one (only with the"
       " dialectic on)."),
    # sessions and observation
    _f("observation", "enum", "seed", "sessions",
       "What Honcho models: seed (the human; both peers form views of the other), directional"
       " (both peers, each with views of the other), unified (the human; only the agent forms"
       " views of others), custom (the flags below).",
       choices=("seed", "directional", "unified", "custom"), env=("HONCHO_OBSERVATION",)),
    _f("observe_user_me", "bool", True, "sessions", "custom: Honcho models the human."),
    _f("observe_user_others", "bool", True, "sessions",
       "custom: the human's peer forms views of the others."),
    _f("observe_agent_me", "bool", False, "sessions", "custom: Honcho models the agent."),
    _f("observe_agent_others", "bool", True, "sessions",
       "custom: the agent forms views of the others."),
    _f("session_strategy", "enum", "per-chat", "sessions",
       "per-chat: a session per chat; per-project: one per project (chats without one stay"
       " per-chat); global: one session.",
       choices=("per-chat", "per-project", "global"), env=("HONCHO_SESSION_STRATEGY",)),
    # scopes
    _f("scope_strategy", "enum", "project", "scopes",
       "project: one scope per project; custom; off.",
       choices=("project", "custom", "off"), env=("HONCHO_SCOPE_STRATEGY",)),
    _f("scope_prefix", "prefix", "a0-", "scopes", "Prefix of every scope id.",
       env=("HONCHO_SCOPE_PREFIX",)),
    _f("scope_custom", "text", "", "scopes", "Scope name for the custom strategy.",
       env=("HONCHO_SCOPE_CUSTOM",)),
    # diagnostics
    _f("debug", "bool", False, "diagnostics", "Debug logging (never content or credentials).",
       env=("HONCHO_DEBUG",)),
    _f("notifications", "bool", True, "diagnostics",
       "Show an Agent Zero notification when memory stops working (Honcho unreachable, the key"
       " refused, messages set aside, the outbox unusable, recall timing out) and when it works"
       " again.", env=("HONCHO_NOTIFICATIONS",)),
)

FIELDS_BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
# The settings the Plugin Hub's `honcho` 1.x saved in the same config.json (its default_config.yaml,
# 1.1.0 and 1.2.0 alike), by the name each has here. settings/upgrade.py rewrites such a file once;
# until it has, they are read under these names, so a 1.x file never sends memory elsewhere.
V1_NAMES: dict[str, str] = {
    "honcho_workspace_id": "workspace_id",
    "honcho_user_id": "user_peer_id",
    "honcho_agent_peer_id": "agent_peer_id",
    "honcho_cache_ttl": "cache_ttl_s",
    "honcho_max_context_tokens": "max_context_tokens",
    "honcho_debug": "debug",
}
# former name (ours, or 1.x's) -> name
RENAMED: dict[str, str] = {**V1_NAMES, **{old: f.name for f in FIELDS for old in f.formerly}}


def with_current_names(layer: Mapping[str, Any]) -> dict[str, Any]:
    """`layer` (settings by name) with each former name of a setting replaced by its name; where a
    layer gives both, the current name wins."""
    current = {RENAMED[name]: value for name, value in layer.items() if name in RENAMED}
    current.update((name, value) for name, value in layer.items() if name not in RENAMED)
    return current


def defaults() -> dict[str, Any]:
    """The built-in default of every setting."""
    return {f.name: f.default for f in FIELDS}
