"""Health says only what is known: neutral until the API was reached, amber or red after a failed
attempt or check until a success, green after one."""

import functools
import unittest
import uuid

import httpx

from fake_honcho import FakeHoncho
from outbox_helpers import temp_outbox_path

from honcho_hub import cli, operations, runtime
from honcho_hub.config import build_settings
from honcho_hub.status import StatusParts, build_status

KEY = "hch-health-key-24682468"
NOW = 1_900_000_000.0


class HealthFromChecksTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeHoncho(api_key=KEY)
        # A workspace of its own: what a check learned is remembered per process and destination.
        self.env = {"HONCHO_API_URL": "http://honcho.test", "HONCHO_MCP_URL": "http://honcho.test",
                    "HONCHO_API_KEY": KEY, "HONCHO_WORKSPACE_ID": "ws-" + uuid.uuid4().hex[:10],
                    "HONCHO_OUTBOX_PATH": temp_outbox_path(self)}

    def settings(self, **env):
        return build_settings({}, {}, {**self.env, **env})

    def check(self, settings, transport=None):
        factory = functools.partial(httpx.Client, transport=transport or self.fake.transport())
        return operations.check(settings, http_client_factory=factory, wall=lambda: NOW)

    def status(self, settings, now=NOW + 1):
        return build_status(settings, runtime.status_parts(settings), now)

    def test_before_any_request_health_is_neutral_and_the_cli_exits_0(self):
        status = self.status(self.settings())
        self.assertEqual((status["health"], status["health_reasons"]), ("neutral", ["Honcho not yet reached"]))
        self.assertEqual(status["endpoints"]["api_reach"]["state"], "not_yet")
        self.assertEqual(cli.exit_code_for(status), cli.EXIT_OK)

    def test_an_unreachable_check_turns_health_amber_until_a_check_succeeds(self):
        settings = self.settings()

        def refuse(request):
            raise httpx.ConnectError("refused", request=request)

        self.check(settings, httpx.MockTransport(refuse))
        status = self.status(settings)
        self.assertEqual(status["health"], "amber")
        self.assertEqual(status["health_reasons"], ["last request to Honcho failed (unreachable)"])
        self.assertEqual(cli.exit_code_for(status), cli.EXIT_DEGRADED)
        self.check(settings)
        status = self.status(settings)
        self.assertEqual((status["health"], status["endpoints"]["api_reach"]["state"]), ("green", "ok"))

    def test_a_refused_key_at_check_turns_health_red(self):
        settings = self.settings(HONCHO_API_KEY="wrong-key-0000000000")
        self.assertFalse(self.check(settings)["api"]["ok"])
        status = self.status(settings)
        self.assertEqual(status["health"], "red")
        self.assertRegex(status["health_reasons"][0], r"^last request to Honcho failed \(auth_401\)$")


class HealthFromDeliveryTest(unittest.TestCase):
    settings = build_settings({}, {}, {"HONCHO_API_URL": "http://honcho.test", "HONCHO_API_KEY": KEY,
                                       "HONCHO_OUTBOX_PATH": "/tmp/never-opened/outbox.sqlite3"})

    def health(self, **metrics):
        parts = StatusParts(worker={"state": "idle", "metrics": metrics, "circuits": {}})
        status = build_status(self.settings, parts, NOW)
        return status["health"], status["endpoints"]["api_reach"]

    def test_a_delivered_batch_makes_health_green(self):
        health, reach = self.health(last_success_at=NOW - 5)
        self.assertEqual((health, reach["state"], reach["last_ok_age_s"]), ("green", "ok", 5.0))

    def test_a_failure_newer_than_the_last_success_is_amber_an_older_one_is_not(self):
        self.assertEqual(self.health(last_success_at=NOW - 9, last_error_at=NOW - 2, last_error_code="http_503")[0],
                         "amber")
        self.assertEqual(self.health(last_success_at=NOW - 2, last_error_at=NOW - 9, last_error_code="http_503")[0],
                         "green")


if __name__ == "__main__":
    unittest.main()
