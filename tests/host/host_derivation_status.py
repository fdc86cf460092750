"""What status says of Honcho's derivation in a real Agent Zero v1.7, with no further turn.

After a turn the worker delivers the chat's messages and status says "deriving"; from then on no
turn runs, so only the polls of Honcho's queue status in the background can move it. The workspace
has derivation and summaries off: the real deriver is shared by every workspace of the server (a
busy one takes minutes), and with nothing queued the session counts as derived FRESH_MIN_AGE_S
after its delivery. So the wait is bounded by our polling alone: status says when Honcho last
answered while it says "deriving", and becomes "fresh" within a bounded wait.
"""

from __future__ import annotations

import unittest

import host_kit
from honcho.api_types import ReasoningConfiguration, SummaryConfiguration, WorkspaceConfiguration

# FRESH_MIN_AGE_S (10 s) after the delivery, at the next poll: a worker step (poll_interval_s, 5 s)
# and the recall pool's request; generous for a busy machine.
FRESH_S = 45

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()
    world.honcho().set_configuration(WorkspaceConfiguration(
        reasoning=ReasoningConfiguration(enabled=False),
        summary=SummaryConfiguration(enabled=False)))


class DerivationStatusTest(unittest.TestCase):
    def test_deriving_after_a_turn_becomes_fresh_with_no_further_turn(self) -> None:
        host = world.host
        host.script("Noted: the hens.")
        ctx = host.new_chat()
        host.turn(ctx, "I keep two hens called Pepper and Salt.")
        seen: list[dict] = []

        def memory_is(state: str) -> bool:
            seen.append(host_kit.honcho_status(host, ctx)["recall"]["memory"])
            return seen[-1]["state"] == state
        host_kit.wait_for(lambda: memory_is("deriving"), 30, "status: memory deriving")
        # No turn from here on.
        try:
            host_kit.wait_for(lambda: memory_is("fresh"), FRESH_S, "status: memory fresh")
        except AssertionError as exc:
            changes = [m for i, m in enumerate(seen) if i == 0 or m != seen[i - 1]]
            raise AssertionError(f"{exc}; the memory statuses seen: {changes[-6:]}") from None
        self.assertTrue([m for m in seen if m["state"] == "deriving"
                         and m.get("checked_age_s") is not None],
                        f"no deriving status said when Honcho was last checked: {seen}")
        self.assertEqual(world.chat_texts(ctx), ["I keep two hens called Pepper and Salt.",
                                                 "Noted: the hens."])


if __name__ == "__main__":
    unittest.main()
