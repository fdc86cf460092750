"""Settings precedence, bounds and secrecy: every variable and every setting, table-driven."""

import json
import math
import os
import tempfile
import unittest
from urllib.parse import urlsplit

import httpx
import hub_testkit  # noqa: F401 - puts the checkout on sys.path
from fake_honcho import FakeHoncho

from honcho_hub.errors import HonchoRequestError
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.settings.config import KeyProvider, Settings, build_settings
from honcho_hub.settings.effective import effective_settings, read_layers
from honcho_hub.settings.files import (
    config_to_save,
    load_config_file,
    merged_config,
)
from honcho_hub.settings.spec import FIELDS, FIELDS_BY_NAME, defaults

SECRET = "sk-live-REALKEY-0123456789abcdef"
A0_USR = tempfile.gettempdir()  # an existing folder stands for /a0/usr existing; nothing is created

# One valid, non-default value for every setting, as JSON would carry it.
VALID = {
    "endpoint_mode": "self_hosted", "api_url": "http://honcho.local:8000",
    "mcp_url": "https://mcp.example.org", "sdk_timeout_s": 30, "check_timeout_s": 2.5,
    "mcp_auth": "never", "workspace_id": "ws_1", "user_peer_id": "alice", "human_peer_id": "carol",
    "profile_peers": "research=dave,coder=erin", "unmapped_chats": "no-capture",
    "sender_peers": "telegram:12345=alice,email:bob@example.org=bob", "outside_chats": "owner",
    "agent_peer_id": "helper-bot", "capture_enabled": False, "capture_scheduler_chats": True,
    "outbox_path": "/var/tmp/hub/outbox.db", "outbox_synchronous": "NORMAL", "max_queued_rows": 500,
    "capture_wait_ms": 100, "journal_capacity": 64, "delivered_retention_h": 0,
    "dead_retention_days": 7, "batch_size": 100, "concurrency": 8, "max_attempts": 3,
    "retry_base_s": 0.5, "retry_max_s": 60, "retry_after_cap_s": 120, "circuit_base_s": 2,
    "circuit_max_s": 60, "auth_probe_interval_s": 30, "lease_s": 90, "poll_interval_s": 1,
    "expiry_sweep_s": 120,
    "recall_enabled": False, "recall_mode": "tools", "context_cadence": 5,
    "include_agent_representation": True, "agent_representation_share": 0.5, "cache_ttl_s": 1,
    "cache_max_entries": 10, "max_context_tokens": 2000, "search_top_k": 3, "max_conclusions": 5,
    "recall_timeout_s": 1.5, "recall_wait_ms": 800, "recall_min_query_chars": 0,
    "recall_include_messages": False, "recall_limit_to_session": True, "recall_receipts": False,
    "ask_timeout_s": 120,
    "dialectic_enabled": True, "dialectic_cadence": 20, "dialectic_depth": 3,
    "dialectic_max_chars": 100, "dialectic_reasoning_level": "minimal",
    "dialectic_pass_levels": "low,max", "reasoning_level_heuristic": False,
    "reasoning_level_cap": "max", "dialectic_prewarm": False, "observation": "custom",
    "observe_user_me": False, "observe_user_others": False, "observe_agent_me": True,
    "observe_agent_others": False, "session_strategy": "global", "scope_strategy": "custom",
    "scope_prefix": "team_", "scope_custom": "Research Notes", "debug": True,
    "notifications": False,
}

# Malformed values of each kind; every one must fall back with a warning naming the key.
MALFORMED = {
    "bool": ["maybe", 2, None, [], {"a": 1}],
    "int": ["ten", 10**30, math.nan, math.inf, 2.5, True, None, "1e400"],
    "float": ["fast", -5, 1e12, math.nan, -math.inf, True, None, [1], "nan"],
    "enum": ["sideways", 1, None, ""],
    "id": ["", "has space", "ünïcode", "a" * 513, "dots.are.bad", 7, None],
    "path": ["relative/outbox.db", "", "outbox.db", 3, None, "/nul\x00byte"],
    "prefix": ["scope.", "has space", "x" * 65, 1, None],
    "text": ["x" * 201, "bell\x07", 12, None],
    "levels": ["low,medium,high,max", "fast", ["low", 3], 7, None, "low,,high"],
    "optional_id": ["has space", "a" * 513, 7, None],
    "peer_map": ["research", "a=b,a=c", "a=b c", "=bob", 3, None],
    "sender_map": ["telegram:1", "sms:1=bob", "telegram:1=a,telegram:1=b", "email:a b=bob",
                   "telegram:=bob", "email:bob@example.org=b.o.b", 3, None],
}

ENV_VARS = {  # variable -> (setting, valid text value, expected)
    "HONCHO_API_URL": ("api_url", "https://honcho.example.com/", "https://honcho.example.com"),
    "HONCHO_BASE_URL": ("api_url", "http://10.0.0.5:8000", "http://10.0.0.5:8000"),
    "HONCHO_MCP_URL": ("mcp_url", "https://mcp.example.com", "https://mcp.example.com"),
    "HONCHO_WORKSPACE_ID": ("workspace_id", "team-ws", "team-ws"),
    "HONCHO_USER_ID": ("user_peer_id", "bob", "bob"),
    "HONCHO_AGENT_PEER_ID": ("agent_peer_id", "a0-main", "a0-main"),
    "HONCHO_OUTBOX_PATH": ("outbox_path", "/srv/hub/o.sqlite3", "/srv/hub/o.sqlite3"),
    "HONCHO_CACHE_TTL": ("cache_ttl_s", "30", 30.0),
    "HONCHO_MAX_CONTEXT_TOKENS": ("max_context_tokens", "800", 800),
    "HONCHO_DEBUG": ("debug", "true", True),
    "HONCHO_NOTIFICATIONS": ("notifications", "off", False),
    "HONCHO_SCOPE_STRATEGY": ("scope_strategy", "OFF", "off"),
    "HONCHO_SCOPE_PREFIX": ("scope_prefix", "p_", "p_"),
    "HONCHO_SCOPE_CUSTOM": ("scope_custom", "Shared", "Shared"),
    "HONCHO_RECALL_WAIT_MS": ("recall_wait_ms", "0", 0),
    "HONCHO_RECALL_MODE": ("recall_mode", "Context", "context"),
    "HONCHO_OBSERVATION": ("observation", "directional", "directional"),
    "HONCHO_SESSION_STRATEGY": ("session_strategy", "per-project", "per-project"),
}
ENV_INVALID = {"HONCHO_WORKSPACE_ID": "bad id", "HONCHO_USER_ID": "a/b",
               "HONCHO_AGENT_PEER_ID": "x" * 600, "HONCHO_OUTBOX_PATH": "rel/path",
               "HONCHO_CACHE_TTL": "-3", "HONCHO_MAX_CONTEXT_TOKENS": "lots",
               "HONCHO_DEBUG": "perhaps", "HONCHO_SCOPE_STRATEGY": "everything",
               "HONCHO_SCOPE_PREFIX": "scope.x", "HONCHO_SCOPE_CUSTOM": "z" * 300,
               "HONCHO_RECALL_WAIT_MS": "-2", "HONCHO_RECALL_MODE": "everything",
               "HONCHO_OBSERVATION": "all", "HONCHO_SESSION_STRATEGY": "per-user"}


def build(plugin=None, secrets=None, environ=None, **kw):
    kw.setdefault("agent_zero_usr", A0_USR)
    return build_settings(plugin or {}, secrets or {}, environ or {}, **kw)


class DefaultsTest(unittest.TestCase):
    def test_empty_sources_give_the_documented_defaults(self):
        settings = build()
        expected = defaults() | {"api_url": "https://api.honcho.dev",
                                 "mcp_url": "https://mcp.honcho.dev"}
        for name, value in expected.items():
            with self.subTest(name=name):
                self.assertEqual(getattr(settings, name), value)
        self.assertEqual(settings.warnings, ())
        self.assertEqual(settings.outbox_path, "/a0/usr/honcho/outbox.sqlite3")

    def test_every_spec_field_is_a_settings_field(self):
        names = {f for f in Settings.__dataclass_fields__} - {
            "warnings", "key_provider", "api_url_problem", "mcp_url_problem", "api_url_source",
            "mcp_url_source", "deployment", "deployment_source"}
        self.assertEqual(names, set(FIELDS_BY_NAME))

    def test_outside_agent_zero_the_default_outbox_is_in_a_user_state_folder(self):
        settings = build(environ={"XDG_STATE_HOME": "/home/u/.state"},
                         agent_zero_usr="/nonexistent/a0/usr")
        self.assertEqual(settings.outbox_path, "/home/u/.state/honcho-hub/outbox.sqlite3")
        explicit = build({"outbox_path": "/data/o.sqlite3"}, agent_zero_usr="/nonexistent/a0/usr")
        self.assertEqual(explicit.outbox_path, "/data/o.sqlite3")


class SettingBoundsTest(unittest.TestCase):
    def test_every_setting_accepts_a_valid_value(self):
        self.assertEqual(set(VALID), set(FIELDS_BY_NAME))
        settings = build(VALID)
        for name, value in VALID.items():
            with self.subTest(name=name):
                self.assertEqual(getattr(settings, name),
                                 value if name != "sdk_timeout_s" else 30.0)
        self.assertEqual(settings.warnings, ())

    def test_every_setting_but_a_url_falls_back_to_its_default_on_each_malformed_value(self):
        # a URL does not fall back: UnusableUrlTest
        for spec in (f for f in FIELDS if f.kind != "url"):
            just_outside = [spec.lo - 1, spec.hi + 1] if spec.kind in ("int", "float") else []
            for bad in MALFORMED[spec.kind] + just_outside:
                with self.subTest(name=spec.name, bad=repr(bad)[:40]):
                    settings = build({spec.name: bad})
                    self.assertEqual(getattr(settings, spec.name), spec.default)
                    self.assertEqual(len(settings.warnings), 1, settings.warnings)
                    self.assertIn(f"'{spec.name}'", settings.warnings[0])
                    if isinstance(bad, str) and len(bad) > 3:
                        self.assertNotIn(bad, settings.warnings[0])

    def test_a_zero_cache_ttl_falls_back_to_the_default_with_one_warning(self):
        for how in ({"environ": {"HONCHO_CACHE_TTL": "0"}}, {"secrets": {"HONCHO_CACHE_TTL": "0"}},
                    {"plugin": {"cache_ttl_s": 0}}):
            with self.subTest(how=how):
                settings = build(**how)
                self.assertEqual(settings.cache_ttl_s, 120.0)
                self.assertEqual(len(settings.warnings), 1, settings.warnings)
                self.assertRegex(settings.warnings[0],
                                 r"^(HONCHO_CACHE_TTL|setting 'cache_ttl_s') ignored: out of range")

    def test_numeric_strings_and_bool_words_are_accepted(self):
        settings = build({"batch_size": "50", "recall_enabled": "off", "retry_base_s": "0.25"})
        self.assertEqual((settings.batch_size, settings.recall_enabled, settings.retry_base_s),
                         (50, False, 0.25))

    def test_bounds_are_inclusive(self):
        # so that the bound also keeps the relations between fields
        partners = {"lease_s": {"sdk_timeout_s": 1}}
        for spec in (f for f in FIELDS if f.kind in ("int", "float")):
            with self.subTest(name=spec.name):
                for bound in (spec.lo, spec.hi):
                    self.assertEqual(getattr(
                        build({spec.name: bound, **partners.get(spec.name, {})}), spec.name), bound)

    def test_unknown_settings_are_ignored_with_a_warning(self):
        settings = build({"api_key": SECRET, "colour": "blue"})
        self.assertEqual(len(settings.warnings), 2)
        self.assertTrue(any("HONCHO_API_KEY" in w for w in settings.warnings))
        self.assertNotIn(SECRET, repr(settings) + str(settings.warnings))

    def test_garbage_sources_never_raise(self):
        for plugin, secrets, environ in [(None, None, None), ([1], "x", 5),
                                         ({"batch_size": object()}, {}, {}),
                                         ({}, {"HONCHO_CACHE_TTL": object()},
                                          {"HONCHO_DEBUG": b"1"})]:
            with self.subTest(plugin=type(plugin).__name__):
                settings = build_settings(plugin, secrets, environ, agent_zero_usr=A0_USR)
                self.assertEqual(settings.batch_size, 20)


class EnvironmentTest(unittest.TestCase):
    def test_every_variable_overrides_its_setting(self):
        for var, (name, text, expected) in ENV_VARS.items():
            for source in ("environ", "secrets"):
                with self.subTest(var=var, source=source):
                    settings = build({name: VALID[name]}, **{source: {var: text}})
                    self.assertEqual(getattr(settings, name), expected)
                    self.assertEqual(settings.warnings, ())

    def test_an_invalid_variable_but_a_url_falls_back_to_the_setting_with_a_warning_naming_it(self):
        for var, bad in ENV_INVALID.items():  # a URL does not fall back: UnusableUrlTest
            name = ENV_VARS[var][0]
            with self.subTest(var=var):
                # scope_custom too: the custom strategy without a name would add a warning
                # of its own
                settings = build({name: VALID[name], "scope_custom": VALID["scope_custom"]},
                                 environ={var: bad})
                self.assertEqual(getattr(settings, name), VALID[name])
                self.assertEqual(len(settings.warnings), 1)
                self.assertTrue(settings.warnings[0].startswith(var), settings.warnings)
                self.assertNotIn(bad, settings.warnings[0])

    def test_secrets_win_over_the_environment(self):
        settings = build(environ={"HONCHO_WORKSPACE_ID": "from-env"},
                         secrets={"HONCHO_WORKSPACE_ID": "from-secrets"})
        self.assertEqual(settings.workspace_id, "from-secrets")

    def test_empty_variables_count_as_unset(self):
        settings = build({"workspace_id": "configured"}, environ={"HONCHO_WORKSPACE_ID": "  "})
        self.assertEqual((settings.workspace_id, settings.warnings), ("configured", ()))


class EndpointPrecedenceTest(unittest.TestCase):
    # (environ, settings, expected api_url, expected mcp_url); a self-hosted API has no MCP URL
    # unless one is set ("")
    CASES = [
        ({}, {}, "https://api.honcho.dev", "https://mcp.honcho.dev"),
        ({}, {"endpoint_mode": "self_hosted"}, "http://localhost:8000", ""),
        ({"HONCHO_BASE_URL": "http://legacy:8000"}, {}, "http://legacy:8000", ""),
        ({"HONCHO_BASE_URL": "http://legacy:8000", "HONCHO_API_URL": "http://new:8000"}, {},
         "http://new:8000", ""),
        ({"HONCHO_BASE_URL": "http://legacy:8000"}, {"api_url": "http://setting:1"},
         "http://legacy:8000", ""),
        ({}, {"api_url": "http://setting:1", "endpoint_mode": "hosted"}, "http://setting:1", ""),
        ({}, {"api_url": "https://mine.example", "mcp_url": "https://mcp.mine",
              "endpoint_mode": "self_hosted"},
         "https://mine.example", "https://mcp.mine"),
        ({"HONCHO_MCP_URL": "http://mcp-env"}, {"mcp_url": "http://mcp-setting"},
         "https://api.honcho.dev", "http://mcp-env"),
        ({"HONCHO_API_URL": "http://explicit"}, {"endpoint_mode": "self_hosted"}, "http://explicit",
         ""),
    ]

    def test_api_and_mcp_url_precedence(self):
        for environ, plugin, api, mcp in self.CASES:
            with self.subTest(environ=environ, plugin=plugin):
                settings = build(plugin, environ=environ)
                self.assertEqual((settings.api_url, settings.mcp_url), (api, mcp))

    def test_destination_names_url_and_workspace_not_the_key(self):
        settings = build(secrets={"HONCHO_API_KEY": SECRET})
        self.assertEqual(settings.destination(), "https://api.honcho.dev#agent-zero")


# URLs a user may give that cannot be used, each with a part that must never be shown back.
UNUSABLE_URLS = [5, "honcho.example.com:8000", "not a url", "http://h.example:99999",
                 "https://h.example/v3?token=QSECRET", "https://h.example/#FRAGSECRET",
                 "https://alice:PWSECRET@h.example", "ftp://h.example", "http://",
                 "javascript:alert(1)", "https://h.example/\x07bell", "https://h..example/",
                 "https://" + "a" * 64 + ".h.example"]
URL_SOURCES = [  # (setting, how the bad URL is given, the name the problem must start with)
    ("api_url", {"environ": "HONCHO_API_URL"}, "HONCHO_API_URL: "),
    ("api_url", {"secrets": "HONCHO_API_URL"}, "HONCHO_API_URL: "),
    ("api_url", {"environ": "HONCHO_BASE_URL"}, "HONCHO_BASE_URL: "),
    ("api_url", {"plugin": "api_url"}, "setting 'api_url': "),
    ("mcp_url", {"environ": "HONCHO_MCP_URL"}, "HONCHO_MCP_URL: "),
    ("mcp_url", {"plugin": "mcp_url"}, "setting 'mcp_url': "),
]


def given(how, bad, plugin):
    """build() arguments giving `bad` the way `how` says, over `plugin` settings, with the key in
    secrets."""
    (where, name), = how.items()
    sources = {"plugin": dict(plugin), "secrets": {"HONCHO_API_KEY": SECRET}, "environ": {}}
    sources[where][name] = bad
    return sources


class UnusableUrlTest(unittest.TestCase):
    def test_an_unusable_url_is_a_problem_naming_its_source_never_a_fallback(self):
        for name, how, source in URL_SOURCES:
            for bad in UNUSABLE_URLS:
                with self.subTest(name=name, how=how, bad=bad):
                    # A valid weaker setting must not be used either: the user meant the
                    # stronger one.
                    plugin = {} if "plugin" in how else {name: "http://weaker.example:8000"}
                    settings = build(**given(how, bad, plugin))
                    problem = getattr(settings, f"{name}_problem")
                    self.assertIsNotNone(problem)
                    self.assertTrue(problem.startswith(source), problem)
                    self.assertIsNone(getattr(
                        settings, "mcp_url_problem" if name == "api_url" else "api_url_problem"))
                    url = getattr(settings, name)
                    self.assertNotIn(urlsplit(url).scheme, ("http", "https"), url)
                    self.assertNotIn("example", url)
                    self.assertEqual(len([w for w in settings.warnings if w.startswith(source)]),
                                     1, settings.warnings)
                    for secret_part in ("QSECRET", "FRAGSECRET", "PWSECRET", "alice", "h.example",
                                        SECRET):
                        self.assertNotIn(secret_part,
                                         problem + repr(settings) + str(settings.warnings))

    def test_while_the_api_url_is_unusable_events_are_stamped_for_no_reachable_destination(self):
        settings = build(environ={"HONCHO_API_URL": "api.honcho.dev"},
                         secrets={"HONCHO_API_KEY": SECRET})
        destination = settings.destination()
        self.assertTrue(destination.endswith("#agent-zero"), destination)
        self.assertNotIn(urlsplit(destination).scheme, ("http", "https"))
        self.assertNotIn("honcho.dev", destination)
        self.assertEqual(settings.unusable_url_destination(), destination)
        usable = build(environ={"HONCHO_API_URL": "https://api.honcho.dev"})
        self.assertEqual((usable.api_url_problem, usable.destination()),
                         (None, "https://api.honcho.dev#agent-zero"))
        # what the worker adopts once fixed
        self.assertEqual(usable.unusable_url_destination(), destination)

    def test_empty_values_are_unset_not_unusable(self):
        for how in ({"environ": {"HONCHO_API_URL": " "}},
                    {"plugin": {"api_url": "", "mcp_url": ""}}):
            with self.subTest(how=how):
                settings = build(**how)
                self.assertEqual((settings.api_url, settings.mcp_url, settings.api_url_problem,
                                  settings.mcp_url_problem),
                                 ("https://api.honcho.dev", "https://mcp.honcho.dev", None, None))

    def test_a_gateway_built_from_an_unusable_url_sends_the_key_to_no_http_destination(self):
        fake = FakeHoncho(api_key=SECRET)
        seen = []
        inner = fake.transport()

        def record(request):
            seen.append(request.url)
            return inner.handle_request(request)

        for bad in ("api.honcho.dev", "https://x:y@api.honcho.dev"):
            with self.subTest(bad=bad):
                seen.clear()
                settings = build(environ={"HONCHO_API_URL": bad},
                                 secrets={"HONCHO_API_KEY": SECRET})
                gateway = HonchoGateway.for_settings(
                    settings,
                    http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(record)))
                try:
                    gateway.call(lambda client: client.get_metadata())
                except HonchoRequestError:
                    pass  # refusing is fine; sending is not
                finally:
                    gateway.close()
                self.assertEqual([u for u in seen if u.scheme in ("http", "https")], [])
                # With a real transport the request fails here, before any name is resolved.
                real = HonchoGateway.for_settings(settings)
                with self.assertRaises(HonchoRequestError):
                    real.call(lambda client: client.get_metadata())
                real.close()


class ApiKeyTest(unittest.TestCase):
    def test_key_precedence_secrets_then_environment(self):
        self.assertEqual(build(environ={"HONCHO_API_KEY": "env-key"}).api_key(), "env-key")
        both = build(environ={"HONCHO_API_KEY": "env-key"},
                     secrets={"HONCHO_API_KEY": "secret-key"})
        self.assertEqual(both.api_key(), "secret-key")
        self.assertFalse(build().has_api_key)

    def test_the_key_is_read_again_on_each_call(self):
        store = {"HONCHO_API_KEY": "old-key"}
        settings = build(load_secrets=lambda: dict(store))
        self.assertEqual(settings.api_key(), "old-key")
        store["HONCHO_API_KEY"] = "fixed-key"
        self.assertEqual(settings.api_key(), "fixed-key")

    def test_a_broken_secrets_store_falls_back_to_the_environment(self):
        def broken():
            raise OSError("secrets.env unreadable")
        settings = build(environ={"HONCHO_API_KEY": "env-key"}, load_secrets=broken)
        with self.assertLogs("honcho_hub.settings.config", "WARNING") as logs:
            self.assertEqual(settings.api_key(), "env-key")
        self.assertNotIn("env-key", str(logs.output))

    def test_malformed_keys_count_as_missing(self):
        for bad in ["  ", "two words", "line\nbreak", 42, "k" * 5000]:
            with self.subTest(bad=repr(bad)[:20]):
                self.assertEqual(build(environ={"HONCHO_API_KEY": bad}).api_key(), "")

    def test_repr_and_warnings_never_show_the_key(self):
        settings = build({"workspace_id": f"bad {SECRET}"}, secrets={"HONCHO_API_KEY": SECRET},
                         environ={"HONCHO_USER_ID": f"{SECRET} x"})
        self.assertEqual(len(settings.warnings), 2)
        for text in (repr(settings), str(settings), str(settings.warnings),
                     repr(settings.key_provider)):
            self.assertNotIn(SECRET, text)
        self.assertEqual(repr(KeyProvider(dict, {"HONCHO_API_KEY": SECRET})),
                         "KeyProvider(<hidden>)")

    def test_warnings_are_logged_once_per_process(self):
        with self.assertLogs("honcho_hub.settings.config", "WARNING") as logs:
            build({"logged_once_marker": 1})
            build({"logged_once_marker": 1})
        self.assertEqual(len([line for line in logs.output if "logged_once_marker" in line]), 1)


class RecallWaitTest(unittest.TestCase):
    def test_recall_wait_s_is_the_setting_in_seconds_never_past_the_recall_deadline(self):
        cases = [  # (plugin settings, recall_wait_s, warnings)
            ({}, 2.5, 0),  # default: the whole recall deadline
            ({"recall_wait_ms": -1, "recall_timeout_s": 4}, 4.0, 0),
            ({"recall_wait_ms": 0}, 0.0, 0),  # never wait
            ({"recall_wait_ms": 300}, 0.3, 0),
            ({"recall_wait_ms": 2500}, 2.5, 0),
            # kept, but the deadline bounds it
            ({"recall_wait_ms": 9000, "recall_timeout_s": 2}, 2.0, 1),
            ({"recall_wait_ms": -2}, 2.5, 1),
            ({"recall_wait_ms": 60_001}, 2.5, 1),
            ({"recall_wait_ms": 12.5}, 2.5, 1),
        ]
        for plugin, wait_s, warnings in cases:
            with self.subTest(plugin=plugin):
                settings = build(plugin)
                self.assertEqual(settings.recall_wait_s, wait_s)
                self.assertEqual(len(settings.warnings), warnings, settings.warnings)
        self.assertIn("recall_wait_ms must not exceed recall_timeout_s (kept: the recall hook"
                      " waits at most recall_timeout_s)", build({"recall_wait_ms": 3000}).warnings)

    def test_a_project_and_the_variable_may_set_it(self):
        self.assertEqual(build({}, project_settings={"recall_wait_ms": 0}).recall_wait_s, 0.0)
        self.assertEqual(build({"recall_wait_ms": 0},
                               environ={"HONCHO_RECALL_WAIT_MS": "100"}).recall_wait_s, 0.1)


class ProjectSettingsTest(unittest.TestCase):
    def test_a_project_may_change_capture_recall_and_scopes(self):
        project = {"capture_enabled": False, "max_context_tokens": 900, "scope_strategy": "off"}
        settings = build({}, project_settings=project)
        self.assertEqual((settings.capture_enabled, settings.max_context_tokens,
                          settings.scope_strategy),
                         (False, 900, "off"))
        self.assertEqual(settings.warnings, ())

    def test_a_project_cannot_change_key_workspace_or_identity(self):
        project = {"api_key": SECRET, "workspace_id": "project-ws", "api_url": "http://evil",
                   "batch_size": 1}
        settings = build({"workspace_id": "global-ws"}, project_settings=project)
        self.assertEqual((settings.workspace_id, settings.api_url, settings.batch_size),
                         ("global-ws", "https://api.honcho.dev", 20))
        self.assertEqual(sorted(w.split("'")[1] for w in settings.warnings),
                         ["api_key", "api_url", "batch_size", "workspace_id"])
        self.assertNotIn(SECRET, str(settings.warnings))

    def test_a_project_repeating_the_global_value_is_not_a_change(self):
        settings = build({"workspace_id": "global-ws"},
                         project_settings={"workspace_id": "global-ws"})
        self.assertEqual(settings.warnings, ())

    def test_environment_still_wins_over_a_project_setting(self):
        settings = build({}, environ={"HONCHO_SCOPE_STRATEGY": "custom"},
                         project_settings={"scope_strategy": "off"})
        self.assertEqual(settings.scope_strategy, "custom")


class FormerNamesTest(unittest.TestCase):
    """A setting renamed since a user saved their config: handoff_capacity is journal_capacity
    now."""

    def saved_config(self, settings):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        path = os.path.join(folder.name, "config.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(settings, handle)
        return path

    def test_a_saved_config_under_the_former_name_still_loads_without_a_warning(self):
        path = self.saved_config({"handoff_capacity": 500})
        settings = effective_settings(read_layers(os.devnull, path), secrets={}, environ={})
        self.assertEqual((settings.journal_capacity, settings.warnings), (500, ()))
        self.assertEqual(build_settings({"handoff_capacity": 64}, {}, {}).journal_capacity, 64)

    def test_the_current_name_wins_where_a_config_gives_both(self):
        path = self.saved_config({"journal_capacity": 300, "handoff_capacity": 500})
        self.assertEqual(load_config_file(path), {"journal_capacity": 300})
        self.assertEqual(build_settings({"handoff_capacity": 500, "journal_capacity": 300}, {}, {})
                         .journal_capacity, 300)

    def test_the_settings_page_shows_and_saves_it_under_the_current_name(self):
        layers = read_layers(os.devnull, self.saved_config({"handoff_capacity": 500}))
        shown = merged_config(defaults(), layers.global_config)
        self.assertEqual(shown["journal_capacity"], 500)
        self.assertNotIn("handoff_capacity", shown)
        self.assertEqual(config_to_save({"handoff_capacity": 500}, is_project=False),
                         {"journal_capacity": 500})


class MemoryControlSettingsTest(unittest.TestCase):
    def test_recall_enabled_false_is_read_as_recall_mode_tools_and_tools_as_recall_disabled(self):
        cases = [({}, "hybrid", True), ({"recall_enabled": False}, "tools", False),
                 ({"recall_enabled": False, "recall_mode": "context"}, "tools", False),
                 ({"recall_mode": "tools"}, "tools", False),
                 ({"recall_mode": "context"}, "context", True)]
        for plugin, mode, enabled in cases:
            with self.subTest(plugin=plugin):
                settings = build(plugin)
                self.assertEqual((settings.recall_mode, settings.recall_enabled), (mode, enabled))
                self.assertEqual(settings.injects_recall, mode != "tools")
                self.assertEqual(settings.offers_tool, mode != "context")

    def test_pass_levels_are_normalised_from_text_or_a_list(self):
        for raw, kept in (("Low, HIGH", "low,high"), (["medium"], "medium"), ("", ""), ([], "")):
            with self.subTest(raw=raw):
                settings = build({"dialectic_pass_levels": raw})
                self.assertEqual(settings.dialectic_pass_levels, kept)
                self.assertEqual(settings.pass_levels, tuple(kept.split(",")) if kept else ())
                self.assertEqual(settings.warnings, ())

    def test_each_observation_preset_gives_its_peer_flags_and_custom_gives_the_explicit_ones(self):
        expected = {"seed": ((True, True), (False, True)),
                    "directional": ((True, True), (True, True)),
                    "unified": ((True, False), (False, True))}
        explicit = {"observe_user_me": False, "observe_user_others": True, "observe_agent_me": True,
                    "observe_agent_others": False}
        for preset, (user, agent) in expected.items():
            with self.subTest(preset=preset):
                # flags are ignored by a preset
                settings = build({"observation": preset, **explicit})
                self.assertEqual(settings.observation_of("user"),
                                 {"observe_me": user[0], "observe_others": user[1]})
                self.assertEqual(settings.observation_of("agent"),
                                 {"observe_me": agent[0], "observe_others": agent[1]})
        custom = build({"observation": "custom", **explicit})
        self.assertEqual(custom.observation_of("user"),
                         {"observe_me": False, "observe_others": True})
        self.assertEqual(custom.observation_of("agent"),
                         {"observe_me": True, "observe_others": False})

    def test_the_default_custom_flags_are_the_seed_preset(self):
        self.assertEqual([build({"observation": "custom"}).observation_of(role)
                          for role in ("user", "agent")],
                         [build({}).observation_of(role) for role in ("user", "agent")])

if __name__ == "__main__":
    unittest.main()
