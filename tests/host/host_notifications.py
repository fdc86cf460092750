"""Silent degradation ends, in the real Agent Zero against the real Honcho: a refused key gives one
error notification and the fixed key one more; with the API URL pointed at a closed port, 20 failing
turns give exactly one outage notification in Agent Zero's notifications (read through Agent Zero's
own notifications_history API, as its notification modal reads them), sent once; pointed back at
the real Honcho, one more says memory recovered. The URL is a string from outside (the settings
page): it arrives in the notification escaped, never as markup.

One story in one test: each notification waits for its condition to hold (or be gone) 30 s, and the
watch tracks each condition apart, so the fixed key's 30 s and the outage's first 30 s run together.

The API URL is changed as a user changes it: saved on the settings page, with no HONCHO_API_URL in
the environment (that would win over the setting).
"""

from __future__ import annotations

import os
import unittest

import host_kit

# A closed loopback port (refused at once, never the internet), with markup in its path.
MARKUP = "<img src=x onerror=alert(1)>"
UNREACHABLE = f"http://127.0.0.1:9/{MARKUP}"
OUTAGE, RECOVERED = "honcho-memory-unreachable", "honcho-memory-unreachable-recovered"
REFUSED, ACCEPTED = "honcho-memory-key_refused", "honcho-memory-key_refused-recovered"
WRONG_KEY = "not-the-key-5d1e"
WAIT_S = 150.0  # the watch raises after 30 s held and recovers after 30 s clear, ticking every 5 s

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    os.environ.pop("HONCHO_API_URL")


class NotificationTest(unittest.TestCase):
    def point_at(self, url: str) -> None:
        world.host.save_config("honcho", {"api_url": url})

    def ours(self) -> list[dict]:
        """The plugin's notifications in Agent Zero's history, as its modal gets them."""
        response = world.host.api("notifications_history", {})
        self.assertEqual(response.status_code, 200, response.get_data(as_text=True)[:500])
        return [n for n in response.get_json()["notifications"]
                if n["id"].startswith("honcho-memory-")]

    def with_id(self, notification_id: str) -> list[dict]:
        return [n for n in self.ours() if n["id"] == notification_id]

    def turns(self, ctx, count: int, first: int) -> None:
        world.host.script(*[f"Noted {n}." for n in range(first, first + count)])
        for n in range(first, first + count):
            self.assertEqual(world.host.turn(ctx, f"Turn {n}: I keep two boats.", timeout=60),
                             f"Noted {n}.")

    def test_a_refused_key_and_an_outage_each_notify_once_and_their_ends_once_more(self):
        # A refused key.
        self.point_at(host_kit.required_env("HONCHO_REAL_AUTH_URL"))
        host_kit.save_secret("HONCHO_API_KEY", WRONG_KEY)
        refused_ctx = world.host.new_chat()
        self.turns(refused_ctx, 5, 100)
        refused = host_kit.wait_for(lambda: self.with_id(REFUSED), WAIT_S,
                                    "the refused key's notification")[0]
        self.assertEqual(refused["type"], "error")
        self.assertIn("HONCHO_API_KEY", refused["message"])
        self.assertNotIn(WRONG_KEY, str(self.ours()), "a notification never shows the key")

        # Fixed under Settings → Secrets; Retry dead probes at once, as the notification says.
        host_kit.save_secret("HONCHO_API_KEY", host_kit.real_admin_key())
        host_kit.honcho_action(world.host, "retry_dead")
        host_kit.wait_for(lambda: world.chat_texts(refused_ctx), 30, "delivery with the fixed key")

        # An outage begins while the fixed key's notification is still due (the key is no longer
        # refused while Honcho is unreachable: the key's recovery keeps counting).
        self.point_at(UNREACHABLE)
        ctx = world.host.new_chat()
        self.turns(ctx, 10, 0)
        outage = host_kit.wait_for(lambda: self.with_id(OUTAGE), WAIT_S,
                                   "the outage notification")[0]
        accepted = host_kit.wait_for(lambda: self.with_id(ACCEPTED), WAIT_S,
                                     "the accepted key's notification")[0]
        self.assertEqual(accepted["type"], "success")
        self.assertEqual(self.with_id(REFUSED), [refused], "the refused key's was not resent")

        self.turns(ctx, 10, 10)
        # Ten more failures with the outage notified: still the one notification, not sent again
        # (Agent Zero stamps a notification each time it is sent).
        self.assertEqual(self.with_id(OUTAGE), [outage])
        self.assertEqual([n["id"] for n in self.ours() if "key_refused" not in n["id"]], [OUTAGE])
        self.assertEqual(outage["type"], "warning")

        text = " ".join((outage["title"], outage["message"], outage["detail"]))
        self.assertIn("http://127.0.0.1:9/&lt;img src=x onerror=alert(1)&gt;", text)
        self.assertNotIn("<img", text)

        self.point_at(world.honcho_url)
        self.turns(ctx, 1, 20)
        recovered = host_kit.wait_for(lambda: self.with_id(RECOVERED), WAIT_S,
                                      "the recovery notification")[0]
        self.assertEqual(recovered["type"], "success")
        self.assertEqual(sorted(n["id"] for n in self.ours() if "unreachable" in n["id"]),
                         [OUTAGE, RECOVERED])
        self.assertEqual(self.with_id(OUTAGE), [outage], "the outage notification was not resent")
        self.assertEqual(self.with_id(REFUSED), [refused], "the refused key's was not resent")

if __name__ == "__main__":
    unittest.main()
