"""Health in the real Agent Zero, against the real Honcho, as the sidebar reads it (the status API
handler, light and full): neutral while nothing reached the configured API; after the `check` action
(the action API handler, as the sidebar's Check button calls it) found the API URL unreachable,
amber with the reach line saying the request failed; pointed back at the real Honcho and checked
again, green.

The API URL is changed as a user changes it: saved on the settings page (Agent Zero's
save_plugin_config), with no HONCHO_API_URL in the environment (that would win over the setting).
"""

from __future__ import annotations

import os
import unittest

import host_kit

UNREACHABLE = "http://127.0.0.1:9"  # a closed loopback port: refused at once, never the internet
STATUS = "plugins/honcho/honcho_status"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld({"HONCHO_MCP_URL": UNREACHABLE})
    # The saved setting decides, as for a user who set it on the settings page.
    os.environ.pop("HONCHO_API_URL")


class HealthTest(unittest.TestCase):
    def point_at(self, url: str) -> None:
        world.host.save_config("honcho", {"api_url": url})

    def status(self, light: bool) -> dict:
        """The status document the sidebar gets: light for the collapsed line, full for the open
        panel."""
        response = world.host.api(STATUS, {"light": True} if light else {})
        body = response.get_json(silent=True)
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:500])
        self.assertIs(body["ok"], True, body)
        return body["status"]

    def assert_health(self, url: str, health: str, reasons: list[str], reach: str,
                      failure: str | None) -> None:
        """Both the collapsed line's status and the open panel's say the same of `url`."""
        for light in (True, False):
            with self.subTest(url=url, light=light, expected=health):
                status = self.status(light)
                self.assertEqual(status["endpoints"]["api_url"], url)
                self.assertEqual((status["health"], status["health_reasons"]), (health, reasons))
                api_reach = status["endpoints"]["api_reach"]
                self.assertEqual((api_reach["state"], api_reach["last_failure"]), (reach, failure))

    def test_health_is_neutral_until_reached_amber_on_unreachable_check_green_on_good_one(self):
        self.point_at(world.honcho_url)
        self.assert_health(world.honcho_url, "neutral", ["Honcho not yet reached"], "not_yet", None)

        self.point_at(UNREACHABLE)
        self.assert_health(UNREACHABLE, "neutral", ["Honcho not yet reached"], "not_yet", None)
        check = host_kit.honcho_action(world.host, "check")
        self.assertEqual((check["api"]["ok"], check["api"]["error"]), (False, "unreachable"), check)
        self.assert_health(UNREACHABLE, "amber", ["last request to Honcho failed (unreachable)"],
                           "failed", "unreachable")

        self.point_at(world.honcho_url)
        # What was learned of the unreachable URL is not said of the real one: not reached yet.
        self.assert_health(world.honcho_url, "neutral", ["Honcho not yet reached"], "not_yet", None)
        check = host_kit.honcho_action(world.host, "check")
        self.assertIs(check["api"]["ok"], True, check)
        self.assert_health(world.honcho_url, "green", [], "ok", None)


if __name__ == "__main__":
    unittest.main()
