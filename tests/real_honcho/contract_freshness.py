"""Derivation-aware freshness against a real Honcho: after a delivery, recall follows the session's
queue status and reloads the base pack once the deriver is done, long before the cache TTL."""

from __future__ import annotations

import unittest

from idle import wait_idle
from real_kit import AGENT, USER, RealHonchoCase, await_derivation, conclusions_about, turns

from honcho_hub.recall.recaller import Recaller

TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"
FIRST, LATER = "I grow basil on the windowsill", "I started keeping two hens last week"


class FreshnessTest(RealHonchoCase):
    def test_the_base_pack_shows_a_new_conclusion_once_derivation_is_done_not_after_the_ttl(self):
        gateway = self.gateway()
        gateway.send(turns("chat-fresh", [FIRST, "Noted."]))
        await_derivation(gateway, "the first conclusion", until=lambda: any(
            FIRST in c.content for c in conclusions_about(gateway, AGENT, USER)))
        recaller = Recaller()
        self.addCleanup(recaller.close)
        settings = self.settings(cache_ttl_s=3600, recall_timeout_s=20)
        recaller.warm(settings)
        self.assertTrue(wait_idle(30, recaller))
        self.assertIn("basil", recaller.base_preview(settings, "chat-other", None, TEMPLATE) or "")

        gateway.send(turns("chat-fresh", [LATER, "Lovely."], start=1_700_000_100.0, tag="later"))
        recaller.note_delivered(settings.destination(), "chat-fresh")

        def a_turn_shows_the_hens() -> bool:
            # A turn: it polls when due.
            recaller.recall(settings, "chat-other", "", TEMPLATE, wait_s=0)
            self.assertTrue(wait_idle(30, recaller))
            return "hens" in (recaller.base_preview(settings, "chat-other", None, TEMPLATE)
                              or "")
        # The TTL is an hour: only freshness can show it this soon.
        await_derivation(gateway, "the new conclusion in the base pack",
                         until=a_turn_shows_the_hens, timeout_s=90)
        self.assertEqual(recaller.freshness(settings, "chat-fresh")["state"], "fresh")


if __name__ == "__main__":
    unittest.main()
