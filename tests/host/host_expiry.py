"""Memories that expire, in the real Agent Zero v1.7 against the real Honcho: the honcho_memory tool
remembers with the shortest lifetime (`expires_in` 1m), the plugin's own worker deletes the
conclusion from Honcho at a sweep, and one pinned in the memory inspector stays. No clock is moved:
the test waits for the real sweep."""

from __future__ import annotations

import re
import unittest

import host_kit

PLUGIN = "honcho"
# The worker sweeps when it starts, before it delivers the chat's first messages (which
# setUpModule waits for), then every `expiry_sweep_s`. The remembers come a few seconds after that
# first sweep: at the lower bound (60 s) the second sweep would come just before their lifetime (a
# minute) ends, and the third delete them two minutes in. A quarter minute more lets the second.
SWEEP_S = 75
# The lifetime ends a minute after the remember; the sweep after it comes within another SWEEP_S.
GONE_WITHIN_S = 60 + SWEEP_S + 60

world: host_kit.HostWorld
ctx = None


def setUpModule() -> None:
    global world, ctx
    world = host_kit.HostWorld()
    world.host.save_config(PLUGIN, {"expiry_sweep_s": SWEEP_S})
    world.host.script("Noted.")
    ctx = world.host.new_chat()
    world.host.turn(ctx, "I am in Lisbon until Friday.")
    host_kit.wait_for(lambda: host_kit.delivered(world, f"chat-{ctx.id}", 2), 30,
                      "the chat's two messages in the real Honcho")


def tool(**args) -> str:
    """The honcho_memory result as Agent Zero added it to the chat history."""
    final, result = world.host.run_tool(ctx, "honcho_memory", **args)
    if final is not None or not isinstance(result, str):
        raise AssertionError(f"honcho_memory ended the turn or added no result: {final!r} "
                             f"{result!r}")
    return result


def remembered_for_a_while(content: str) -> str:
    """The id of a conclusion the tool remembered with the shortest lifetime."""
    text = tool(action="remember", content=content, expires_in="1m")
    found = re.match(r"Remembered as conclusion ([A-Za-z0-9_-]+)\. It expires in 1m ", text)
    if not found:
        raise AssertionError(f"not a remember with a lifetime: {text!r}")
    return found.group(1)


def inspector(action: str, **body) -> dict:
    response = world.host.api("plugins/honcho/honcho_inspector",
                              {"action": action, "context": ctx.id, **body})
    answer = response.get_json(silent=True)
    if response.status_code != 200 or not isinstance(answer, dict):
        raise AssertionError(f"honcho_inspector {action}: {response.status_code} "
                             f"{response.get_data(as_text=True)[:500]}")
    return answer


def stored_ids() -> set[str]:
    return {c.id for c in host_kit.conclusions(world)}


class ExpiryTest(unittest.TestCase):
    def test_the_worker_deletes_an_expired_conclusion_and_a_pinned_one_stays(self) -> None:
        passing = remembered_for_a_while("The user is in Lisbon until Friday.")
        pinned = remembered_for_a_while("The user's sister lives in Lisbon.")
        self.assertLessEqual({passing, pinned}, stored_ids())

        shown = {item["id"]: item for item in inspector("view")["conclusions"]["items"]}
        self.assertTrue(0 < shown[passing]["expires_in_s"] <= 60, shown[passing])
        answer = inspector("pin", id=pinned)
        self.assertTrue(answer["ok"], answer)
        shown = {item["id"]: item for item in inspector("view")["conclusions"]["items"]}
        self.assertIsNone(shown[pinned]["expires_at"])

        host_kit.wait_for(lambda: passing not in stored_ids(), GONE_WITHIN_S,
                          "the expired conclusion to be deleted from the real Honcho")
        self.assertIn(pinned, stored_ids())
        counts = host_kit.honcho_status(world.host, ctx)["memory_expiry"]
        self.assertEqual(counts, {"pending": 0, "deleted": 1, "failed": 0})


if __name__ == "__main__":
    unittest.main()
