"""The deployment the URLs in effect point at (hosted or self-hosted, whatever endpoint_mode says),
where each URL in effect comes from, and what an MCP check does when the deployment has no MCP
server configured (self-hosted without an MCP URL): it says so, and sends nothing."""

import functools
import unittest
import uuid

import httpx
from fake_honcho import FakeHoncho
from outbox_helpers import temp_outbox_path

from honcho_hub.ops import operator as operations
from honcho_hub.ops.status import StatusParts, build_status
from honcho_hub.settings.config import build_settings

LOCAL = "http://localhost:8000"
HOSTED_API, HOSTED_MCP = "https://api.honcho.dev", "https://mcp.honcho.dev"
HOSTED_DEFAULT = "default of endpoint_mode hosted"
NO_MCP = "self-hosted, no MCP URL set"


class DeploymentTest(unittest.TestCase):
    # plugin settings, secrets, environment ->
    #   deployment, where it comes from, API URL and its source, MCP URL and its source
    CASES = [
        ({}, {}, {}, "hosted", "from the endpoint_mode setting",
         HOSTED_API, HOSTED_DEFAULT, HOSTED_MCP, "default of the hosted deployment"),
        # the setup: only HONCHO_API_URL, beside the default mode (hosted)
        ({"endpoint_mode": "hosted"}, {"HONCHO_API_URL": LOCAL}, {}, "self_hosted",
         "from HONCHO_API_URL (secrets)", LOCAL, "from HONCHO_API_URL (secrets)", "", NO_MCP),
        ({"endpoint_mode": "hosted"}, {}, {"HONCHO_API_URL": LOCAL}, "self_hosted",
         "from HONCHO_API_URL (environment)", LOCAL, "from HONCHO_API_URL (environment)", "",
         NO_MCP),
        ({}, {}, {"HONCHO_BASE_URL": LOCAL}, "self_hosted", "from HONCHO_BASE_URL (environment)",
         LOCAL, "from HONCHO_BASE_URL (environment)", "", NO_MCP),
        # secrets win over the environment
        ({}, {"HONCHO_API_URL": LOCAL}, {"HONCHO_API_URL": "http://other.lan:8000"},
         "self_hosted", "from HONCHO_API_URL (secrets)", LOCAL, "from HONCHO_API_URL (secrets)", "",
         NO_MCP),
        ({"api_url": "http://honcho.lan:8000"}, {}, {}, "self_hosted", "from the api_url setting",
         "http://honcho.lan:8000", "from the api_url setting", "", NO_MCP),
        ({"endpoint_mode": "self_hosted"}, {}, {}, "self_hosted", "from the endpoint_mode setting",
         LOCAL, "default of endpoint_mode self_hosted", "", NO_MCP),
        # a hosted API URL is the hosted deployment, whatever the mode says
        ({"endpoint_mode": "self_hosted"}, {}, {"HONCHO_API_URL": HOSTED_API}, "hosted",
         "from HONCHO_API_URL (environment)", HOSTED_API, "from HONCHO_API_URL (environment)",
         HOSTED_MCP, "default of the hosted deployment"),
        ({}, {"HONCHO_API_URL": LOCAL, "HONCHO_MCP_URL": "http://localhost:8787"}, {},
         "self_hosted", "from HONCHO_API_URL (secrets)", LOCAL, "from HONCHO_API_URL (secrets)",
         "http://localhost:8787", "from HONCHO_MCP_URL (secrets)"),
        ({"mcp_url": "http://localhost:8787"}, {}, {"HONCHO_API_URL": LOCAL}, "self_hosted",
         "from HONCHO_API_URL (environment)", LOCAL, "from HONCHO_API_URL (environment)",
         "http://localhost:8787", "from the mcp_url setting"),
    ]

    def test_the_deployment_and_each_url_follow_what_is_in_effect(self):
        for plugin, secrets, environ, deployment, why, api, api_from, mcp, mcp_from in self.CASES:
            with self.subTest(plugin=plugin, secrets=secrets, environ=environ):
                settings = build_settings(plugin, secrets, environ)
                self.assertEqual((settings.deployment, settings.deployment_source),
                                 (deployment, why))
                self.assertEqual((settings.api_url, settings.api_url_source), (api, api_from))
                self.assertEqual((settings.mcp_url, settings.mcp_url_source), (mcp, mcp_from))
                self.assertEqual(settings.mcp_configured, bool(mcp))

    def test_an_unusable_api_url_leaves_the_deployment_to_the_mode(self):
        settings = build_settings({"endpoint_mode": "hosted"},
                                  {"HONCHO_API_URL": "ftp://honcho.lan"}, {})
        self.assertEqual((settings.deployment, settings.deployment_source),
                         ("hosted", "from the endpoint_mode setting"))
        self.assertEqual(settings.api_url_source, "from HONCHO_API_URL (secrets)")

    def test_status_shows_the_deployment_in_effect_and_where_each_url_comes_from(self):
        settings = build_settings({"endpoint_mode": "hosted"}, {"HONCHO_API_URL": LOCAL}, {})
        endpoints = build_status(settings, StatusParts(), 1_000.0)["endpoints"]
        self.assertEqual({name: endpoints[name] for name in (
            "mode", "mode_source", "api_url", "api_url_source", "mcp_url", "mcp_url_source")},
            {"mode": "self_hosted", "mode_source": "from HONCHO_API_URL (secrets)",
             "api_url": LOCAL, "api_url_source": "from HONCHO_API_URL (secrets)",
             "mcp_url": None, "mcp_url_source": NO_MCP})


class UnconfiguredMcpCheckTest(unittest.TestCase):
    def test_a_self_hosted_check_without_an_mcp_url_says_not_configured_and_sends_nothing(self):
        api, seen = FakeHoncho().transport(), []

        def route(request):  # the fake API answers; any other request is noted and refused
            if request.url.host == "honcho.lan":
                return api.handle_request(request)
            seen.append(str(request.url))
            return httpx.Response(401)

        settings = build_settings({}, {}, {
            "HONCHO_API_URL": "http://honcho.lan:8000",
            "HONCHO_OUTBOX_PATH": temp_outbox_path(self),
            "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10]})
        result = operations.check(settings, http_client_factory=functools.partial(
            httpx.Client, transport=httpx.MockTransport(route)))
        self.assertTrue(result["api"]["ok"])
        self.assertEqual(seen, [], "no request to any MCP server")
        mcp = result["mcp"]
        self.assertEqual({k: mcp[k] for k in ("ok", "state", "error", "reachable", "key_sent")},
                         {"ok": True, "state": "not_configured", "error": None,
                          "reachable": False, "key_sent": False})
        self.assertEqual(mcp["summary"], f"not configured ({NO_MCP})")


if __name__ == "__main__":
    unittest.main()
