"""The MCP check: `initialize` and `tools/list` over the streamable HTTP transport (JSON and SSE
answers, the session id carried), when the API key may go with it, and what it reports (version,
server, tools; 401 as reachable-auth-required; timeouts, garbage and oversized answers as codes;
never the key)."""

import functools
import io
import json
import logging
import os
import unittest
import uuid

import httpx
from fake_honcho import FakeHoncho
from loopback import serve
from mcp_fake import SERVER_TEXT, McpFake
from outbox_helpers import temp_outbox_path

from honcho_hub.cli import main as cli
from honcho_hub.ops import mcp_probe
from honcho_hub.ops import operator as operations
from honcho_hub.settings.config import build_settings

KEY = "hch-mcp-key-86420864208642"


def recording_factory(timeouts: list):
    """httpx.Client, each request's timeouts noted (what the check allowed that request)."""
    return functools.partial(httpx.Client, event_hooks={
        "request": [lambda r: timeouts.append(r.extensions["timeout"])]})


class McpCase(unittest.TestCase):
    def fake(self, **kwargs) -> McpFake:
        fake = McpFake(**kwargs)
        self.addCleanup(fake.close)
        return fake

    def handshake(self, url, bearer=None, budget_s=10.0, **kwargs) -> mcp_probe.Handshake:
        return mcp_probe.handshake(url, bearer, budget_s, **kwargs)


class HandshakeTest(McpCase):
    def test_each_answer_form_reports_version_server_and_every_tool(self):
        for form in ("json", "sse"):
            with self.subTest(form=form):
                fake = self.fake(form=form, key=KEY)
                got = self.handshake(fake.url, KEY)
                self.assertEqual((got.state, got.error, got.status), ("ready", None, 200))
                self.assertEqual((got.protocol_version, got.server_name, got.server_version,
                                  got.tool_count),
                                 ("2025-06-18", "Honcho MCP Server", "3.0.0", 31))
                self.assertTrue(got.tools_complete)
                # 31 tools in pages of 20: two tools/list requests, the second with the first's
                # cursor
                pages = [json.loads(r["body"]) for r in fake.seen if "tools/list" in r["body"]]
                self.assertEqual([(p.get("params") or {}).get("cursor") for p in pages],
                                 [None, "20"])

    def test_an_sse_answer_is_taken_while_its_stream_stays_open(self):
        # The fake keeps each stream open for 30 s after the answer: waiting for its end would
        # time out.
        fake = self.fake(form="sse")
        got = self.handshake(fake.url, budget_s=5.0)
        self.assertEqual((got.state, got.tool_count), ("ready", 31))

    def test_the_session_id_is_carried_after_initialize_which_is_notified(self):
        for form in ("json", "sse"):
            with self.subTest(form=form):
                fake = self.fake(form=form)
                self.assertEqual(self.handshake(fake.url).state, "ready")
                self.assertEqual(fake.rpc_methods(),
                                 ["initialize", "notifications/initialized", "tools/list",
                                  "tools/list", "DELETE"])
                self.assertEqual(fake.headers_of("mcp-session-id"),
                                 [None] + ["mcp-session-7f3a"] * 4)
                self.assertEqual(fake.headers_of("mcp-protocol-version"),
                                 [None] + ["2025-06-18"] * 4)
                self.assertEqual(set(fake.headers_of("accept")),
                                 {"application/json, text/event-stream"})
                init = json.loads(fake.seen[0]["body"])
                self.assertEqual((init["jsonrpc"], init["params"]["protocolVersion"]),
                                 ("2.0", "2025-06-18"))
                # a notification carries no id
                self.assertNotIn("id", json.loads(fake.seen[1]["body"]))

    def test_a_stateless_server_gets_no_session_header_and_no_delete(self):
        fake = self.fake(session_id=None)
        self.assertEqual(self.handshake(fake.url).state, "ready")
        self.assertEqual(fake.rpc_methods(),
                         ["initialize", "notifications/initialized", "tools/list", "tools/list"])
        self.assertEqual(set(fake.headers_of("mcp-session-id")), {None})

    def test_401_is_reachable_auth_required_and_only_a_sent_key_makes_it_an_error(self):
        for bearer, error in ((None, None), (KEY, "auth_401"),
                              ("hch-other-key-000000000", "auth_401")):
            with self.subTest(key_sent=bearer is not None):
                fake = (self.fake(unauthorized=True) if bearer != "hch-other-key-000000000"
                        else self.fake(key=KEY))
                got = self.handshake(fake.url, bearer)
                self.assertEqual((got.state, got.status, got.error), ("auth_required", 401, error))
                self.assertEqual(fake.rpc_methods(), ["initialize"])  # nothing more is tried
                self.assertIsNone(got.protocol_version)

    def test_a_server_that_never_answers_times_out_within_the_budget(self):
        for behaviour in ("hang", "sse_stall"):
            with self.subTest(behaviour=behaviour):
                fake, timeouts = self.fake(behaviour=behaviour), []
                got = self.handshake(fake.url, budget_s=0.2,
                                     client_factory=recording_factory(timeouts))
                self.assertEqual((got.state, got.error), ("failed", "timeout"))
                self.assertEqual(len(timeouts), 1)
                self.assertLessEqual(max(v for v in timeouts[0].values() if v is not None), 0.2)

    def test_the_budget_is_shared_by_the_whole_handshake(self):
        # Each answer costs a second on the check's clock: initialize, then the notification, then a
        # tools/list page; the second page no longer fits a 2.5 s budget.
        fake, timeouts, clock = self.fake(), [], [100.0]

        def tick(response):
            clock[0] += 1.0

        factory = functools.partial(httpx.Client, event_hooks={
            "request": [lambda r: timeouts.append(r.extensions["timeout"]["read"])],
            "response": [tick]})
        got = self.handshake(fake.url, budget_s=2.5, client_factory=factory,
                             monotonic=lambda: clock[0])
        self.assertEqual((got.state, got.error), ("failed", "timeout"))
        # what was left of the budget, request by request
        self.assertEqual(timeouts, [2.5, 1.5, 0.5])
        self.assertEqual(fake.rpc_methods(),
                         ["initialize", "notifications/initialized", "tools/list"])

    def test_garbage_and_rpc_errors_become_codes_without_server_text(self):
        for form in ("json", "sse"):
            for behaviour, code in (("garbage", "malformed_response"), ("rpc_error", "rpc_-32603")):
                with self.subTest(form=form, behaviour=behaviour):
                    got = self.handshake(self.fake(form=form, behaviour=behaviour).url)
                    self.assertEqual((got.state, got.error), ("failed", code))
                    self.assertNotIn("Authorization", json.dumps(got.as_dict()))

    def test_an_oversized_answer_is_cut_at_the_bound(self):
        for form in ("json", "sse"):
            with self.subTest(form=form):
                got = self.handshake(self.fake(form=form, behaviour="oversized").url)
                self.assertEqual((got.state, got.error), ("failed", "oversized_response"))

    def test_http_errors_and_no_server_are_codes(self):
        fake = self.fake()
        self.assertEqual(self.handshake(fake.url + "/elsewhere").error, "http_404")
        fake.close()
        got = self.handshake(fake.url)
        self.assertEqual((got.state, got.status, got.error), ("failed", None, "unreachable"))

    def test_server_text_reported_is_bounded_printable_and_never_the_key(self):
        cases = (("Honcho\x1b[31m MCP\nServer", "9.9", "Honcho[31m MCPServer", "9.9"),
                 ("n" * 500, "v" * 500, "n" * 80, "v" * 80),
                 (f"echo {KEY}", KEY, None, None))
        for name, version, shown_name, shown_version in cases:
            with self.subTest(name=name[:20]):
                got = self.handshake(self.fake(server_name=name, server_version=version).url, KEY)
                self.assertEqual((got.server_name, got.server_version), (shown_name, shown_version))
                self.assertNotIn(KEY, json.dumps(got.as_dict()))

    def test_a_protocol_version_that_is_not_a_date_is_malformed(self):
        got = self.handshake(self.fake(protocol_version="<script>").url)
        self.assertEqual((got.state, got.error, got.protocol_version),
                         ("failed", "malformed_response", None))


class KeyDecisionTest(unittest.TestCase):
    CASES = [  # (api_url, mcp_url, mcp_auth, key sent, why)
        ("https://api.honcho.dev", "https://mcp.honcho.dev", "same_deployment", True, "hosted"),
        ("https://api.honcho.dev/", "https://mcp.honcho.dev/", "same_deployment", True, "hosted"),
        ("http://honcho.lan:8000", "http://honcho.lan:8787", "same_deployment", True, "same_host"),
        ("http://localhost:8000", "http://localhost:8787", "same_deployment", True, "same_host"),
        ("https://Honcho.Example.org", "https://honcho.example.org/mcp", "same_deployment", True,
         "same_host"),
        ("https://honcho.example.org", "http://honcho.example.org:8787", "same_deployment", False,
         "insecure_mcp_url"),
        ("http://honcho.lan:8000", "https://mcp.example.org", "same_deployment", False,
         "other_host"),
        ("http://honcho.lan:8000", "https://mcp.example.org", "always", True, "always"),
        ("http://honcho.lan:8000", "http://honcho.lan:8787", "never", False, "never"),
        ("https://api.honcho.dev", "https://mcp.honcho.dev", "never", False, "never"),
        # a self-hosted key never goes to the hosted MCP server, whatever the setting
        ("http://honcho.lan:8000", "https://mcp.honcho.dev", "same_deployment", False,
         "hosted_mcp"),
        ("http://honcho.lan:8000", "https://mcp.honcho.dev", "always", False, "hosted_mcp"),
        ("https://mcp.honcho.dev", "https://mcp.honcho.dev", "always", False, "hosted_mcp"),
        ("https://api.honcho.dev.evil.example", "https://mcp.honcho.dev", "always", False,
         "hosted_mcp"),
    ]

    def test_when_the_key_may_go_to_the_mcp_url(self):
        for api, mcp, policy, sent, why in self.CASES:
            with self.subTest(api=api, mcp=mcp, policy=policy):
                settings = build_settings({"api_url": api, "mcp_url": mcp, "mcp_auth": policy},
                                          {"HONCHO_API_KEY": KEY}, {})
                self.assertEqual(operations.mcp_key_decision(settings), (sent, why))

    # The hosted domain spelled as DNS and IDNA read it too: a trailing dot (or two), upper case,
    # the full stops and letters of other scripts, a soft hyphen (IDNA drops it).
    HOSTED_SPELLINGS = ["https://X.Honcho.Dev./mcp", "https://mcp.honcho.dev.",
                        "https://mcp.honcho.dev..", "https://HONCHO.DEV.",
                        "https://mcp\u3002honcho\u3002dev", "https://mcp\uff0ehoncho\uff0edev.",
                        "https://\uff4d\uff43\uff50.\uff48\uff4f\uff4e\uff43\uff48\uff4f."
                        "\uff44\uff45\uff56",
                        "https://mcp.hon\u00adcho.dev"]

    def test_a_self_hosted_key_goes_to_no_spelling_of_the_hosted_domain(self):
        for mcp in self.HOSTED_SPELLINGS:
            # the second: same_host
            for api in ("http://honcho.lan:8000", mcp.removesuffix("/mcp")):
                for policy in ("same_deployment", "always"):
                    with self.subTest(mcp=mcp, api=api, policy=policy):
                        settings = build_settings({"api_url": api, "mcp_url": mcp,
                                                   "mcp_auth": policy},
                                                  {"HONCHO_API_KEY": KEY}, {})
                        self.assertEqual((settings.api_url_problem, settings.mcp_url_problem),
                                         (None, None))
                        self.assertEqual(operations.mcp_key_decision(settings),
                                         (False, "hosted_mcp"))

    def test_no_key_sends_none(self):
        settings = build_settings({"mcp_auth": "always"}, {}, {})
        self.assertEqual(operations.mcp_key_decision(settings), (False, "no_key"))


class ApiCase(unittest.TestCase):
    """One fake Honcho API over loopback HTTP for the class (the checks only read from it)."""

    @classmethod
    def setUpClass(cls):
        cls.api = serve(FakeHoncho(api_key=KEY))
        cls.addClassCleanup(cls.api.close)

    def mcp(self, **kwargs) -> McpFake:
        fake = McpFake(**kwargs)
        self.addCleanup(fake.close)
        return fake


class CheckTest(ApiCase):
    """check() against the fake Honcho API and the fake MCP server, both over loopback HTTP."""

    def setUp(self):
        # A workspace of its own: what a check learned is remembered per process and destination.
        self.env = {"HONCHO_API_KEY": KEY, "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10],
                    "HONCHO_OUTBOX_PATH": temp_outbox_path(self)}

    def check(self, mcp_url, policy="same_deployment", api_url=None, **kwargs):
        settings = build_settings({"mcp_auth": policy}, {},
                                  {**self.env, "HONCHO_API_URL": api_url or self.api.url,
                                   "HONCHO_MCP_URL": mcp_url})
        return operations.check(settings, **kwargs)

    def test_the_fake_sees_the_key_only_when_the_setting_and_the_urls_allow_it(self):
        # the same server, another host name
        other = lambda url: url.replace("127.0.0.1", "localhost")  # noqa: E731
        for policy, rename, sent, why in (("same_deployment", str, True, "same_host"),
                                          ("same_deployment", other, False, "other_host"),
                                          ("always", other, True, "always"),
                                          ("never", str, False, "never")):
            with self.subTest(policy=policy, same_host=rename is str):
                fake = self.mcp(key=KEY)
                result = self.check(rename(fake.url), policy)["mcp"]
                self.assertEqual((result["key_sent"], result["key_decision"]), (sent, why))
                self.assertEqual(KEY in json.dumps(fake.seen), sent)
                self.assertEqual(fake.headers_of("authorization")[0],
                                 f"Bearer {KEY}" if sent else None)
                self.assertEqual((result["ok"], result["reachable"]), (True, True))
                self.assertEqual(result["state"], "ready" if sent else "auth_required")

    def test_a_self_hosted_key_never_reaches_the_hosted_mcp_server(self):
        api, mcp_requests = FakeHoncho(api_key=KEY).transport(), []

        def route(request):  # no network: the hosted MCP server answers as it does without a key
            if request.url.host != "mcp.honcho.dev":
                return api.handle_request(request)
            mcp_requests.append(request)
            return httpx.Response(401, json={"error": SERVER_TEXT})

        result = self.check("https://mcp.honcho.dev", "always", api_url="http://honcho.lan:8000",
                            http_client_factory=functools.partial(
                                httpx.Client, transport=httpx.MockTransport(route)))
        self.assertTrue(result["api"]["ok"])
        self.assertEqual(len(mcp_requests), 1)
        self.assertNotIn("authorization", {k.lower() for k in mcp_requests[0].headers})
        self.assertNotIn(KEY, mcp_requests[0].content.decode())
        self.assertEqual((result["mcp"]["state"], result["mcp"]["key_decision"]),
                         ("auth_required", "hosted_mcp"))

    def test_the_result_reports_the_handshake(self):
        result = self.check(self.mcp(form="sse", key=KEY).url)["mcp"]
        self.assertEqual({k: result[k] for k in ("ok", "state", "status", "error",
                                                   "protocol_version", "server_name",
                                                   "server_version", "tool_count")},
                         {"ok": True, "state": "ready", "status": 200, "error": None,
                          "protocol_version": "2025-06-18", "server_name": "Honcho MCP Server",
                          "server_version": "3.0.0", "tool_count": 31})
        self.assertEqual(result["summary"],
                         "ok: Honcho MCP Server 3.0.0, protocol 2025-06-18, 31 tools"
                         " (key sent: same_host)")
        self.assertIsInstance(result["latency_ms"], float)

    def test_honchos_mcp_today_is_reachable_with_auth_required_not_a_failure(self):
        fake = self.mcp(unauthorized=True)
        result = self.check(fake.url.replace("127.0.0.1", "localhost"))["mcp"]
        self.assertEqual({k: result[k] for k in ("ok", "reachable", "state", "status", "error",
                                                   "key_sent")},
                         {"ok": True, "reachable": True, "state": "auth_required", "status": 401,
                          "error": None, "key_sent": False})
        self.assertEqual(result["summary"], "reachable, auth required (key not sent: other_host)")
        refused = self.check(fake.url)["mcp"]  # same host: the key went, and was refused
        self.assertEqual((refused["ok"], refused["reachable"], refused["state"], refused["error"]),
                         (False, True, "auth_required", "auth_401"))
        self.assertEqual(refused["summary"], "reachable, key refused (auth_401)")

    def test_no_server_is_unreachable_and_an_unusable_url_sends_nothing(self):
        fake = self.mcp()
        fake.close()
        result = self.check(fake.url)["mcp"]
        self.assertEqual((result["ok"], result["reachable"], result["error"]),
                         (False, False, "unreachable"))
        result = self.check("ftp://user:pw@mcp.example.org")["mcp"]
        self.assertEqual((result["ok"], result["error"], result["key_sent"]),
                         (False, "unusable_url", False))

    def test_nothing_returned_or_logged_carries_the_key_or_server_text(self):
        records = []
        handler = logging.Handler(logging.DEBUG)
        handler.emit = records.append
        root = logging.getLogger()
        old_level = root.level
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
        self.addCleanup(root.removeHandler, handler)
        self.addCleanup(root.setLevel, old_level)
        for kwargs in ({"key": KEY}, {"unauthorized": True}, {"behaviour": "garbage"},
                       {"behaviour": "rpc_error"},
                       {"form": "sse", "server_name": f"echo {KEY}"}):
            with self.subTest(**{k: str(v)[:12] for k, v in kwargs.items()}):
                result = self.check(self.mcp(**kwargs).url)
                self.assertNotIn(KEY, json.dumps(result))
                self.assertNotIn("Missing Authorization", json.dumps(result))
        self.assertTrue(records)  # the requests were logged at all (httpx, the check)
        logged = "\n".join(record.getMessage() + repr(record.args) for record in records)
        self.assertNotIn(KEY, logged)


class CliCheckTest(ApiCase):
    def setUp(self):
        path = temp_outbox_path(self)
        self.env = {"HONCHO_API_URL": self.api.url, "HONCHO_API_KEY": KEY,
                    "HONCHO_OUTBOX_PATH": path, "HOME": os.path.dirname(path),
                    "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10]}

    def cli(self, mcp_url, *argv):
        out = io.StringIO()
        code = cli.main(["check", *argv], environ={**self.env, "HONCHO_MCP_URL": mcp_url}, out=out)
        return code, out.getvalue()

    def test_the_command_line_prints_what_the_mcp_check_found(self):
        cases = (({"key": KEY}, str, 0,
                  r"^MCP: ok: Honcho MCP Server 3\.0\.0, protocol 2025-06-18, 31 tools"
                  r" \(key sent: same_host\) in [\d.]+ ms$"),
                 ({"unauthorized": True}, lambda u: u.replace("127.0.0.1", "localhost"), 0,
                  r"^MCP: reachable, auth required \(key not sent: other_host\) in [\d.]+ ms$"),
                 ({"unauthorized": True}, str, 3,
                  r"^MCP: reachable, key refused \(auth_401\) in [\d.]+ ms$"),
                 ({"behaviour": "garbage"}, str, 3,
                  r"^MCP: FAILED \(malformed_response\) in [\d.]+ ms$"))
        for kwargs, rename, exit_code, line in cases:
            with self.subTest(**{k: str(v)[:12] for k, v in kwargs.items()}):
                code, out = self.cli(rename(self.mcp(**kwargs).url))
                self.assertEqual(code, exit_code, out)
                api_line, mcp_line = out.strip().splitlines()
                self.assertRegex(api_line, r"^API: ok in [\d.]+ ms$")
                self.assertRegex(mcp_line, line)
                self.assertNotIn(KEY, out)

    def test_the_command_line_says_a_self_hosted_mcp_is_not_configured_and_exits_ok(self):
        code, out = self.cli("")  # the loopback API is self-hosted; no MCP URL set
        self.assertEqual(code, 0, out)
        self.assertEqual(out.strip().splitlines()[1],
                         "MCP: not configured (self-hosted, no MCP URL set)")

    def test_json_output_carries_the_mcp_fields(self):
        code, out = self.cli(self.mcp(key=KEY).url, "--json")
        mcp = json.loads(out)["mcp"]
        self.assertEqual((code, mcp["state"], mcp["tool_count"], mcp["key_sent"]),
                         (0, "ready", 31, True))


if __name__ == "__main__":
    unittest.main()
