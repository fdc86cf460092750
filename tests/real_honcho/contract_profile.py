"""The honcho_memory `profile` action against a real Honcho: the agent's card of the user read
while there is none, replaced, read back; and the fake's card routes (tests/fake_honcho.py)
answering like the real server.

One difference is known and harmless: for an observer the server has never seen, the real server
answers the card read with 404 and the fake with a null card; `queries.read_card` reads both as "no
card", which is what is compared here.
"""

import unittest
from collections.abc import Callable
from typing import Any

import httpx
from real_kit import AGENT, USER, RealHonchoCase, real_settings

# isort: split
from fake_honcho import FakeHoncho  # after real_kit, which puts tests/ on sys.path

from honcho_hub.errors import HonchoRequestError
from honcho_hub.gateway import queries
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.tool.actions import MAX_FACT_CHARS, MAX_FACTS, ActionContext, run_action

LEAKED = "ghp_" + "Q1w2E3r4T5" * 4  # a real-looking GitHub token


def act(gateway: HonchoGateway, settings, action: str, **args) -> tuple[bool, str]:
    ctx = ActionContext(settings=settings, session_id="chat-profile", gateway=gateway,
                        supports_scopes=gateway.supports_scopes)
    result = run_action(action, args, ctx)
    return result.ok, result.text


class ProfileTest(RealHonchoCase):
    quiet = True  # no deriver or dreamer writing a card of its own meanwhile

    def test_read_with_no_card_replace_then_read_back(self):
        gateway, settings = self.gateway(), self.settings()
        self.assertEqual(act(gateway, settings, "profile"),
                         (True, "The agent has no card of the user yet."))
        self.assertEqual(act(gateway, settings, "profile",
                             facts=["IDENTITY: Name: Ada", "ATTRIBUTE: Tea: green"]),
                         (True, "Replaced the agent's card of the user: 2 facts (it had 0)."))
        ok, text = act(gateway, settings, "profile")
        self.assertTrue(ok, text)
        self.assertEqual(text.splitlines()[1:],
                         ["The agent's card of the user (2 facts):",
                          "- IDENTITY: Name: Ada", "- ATTRIBUTE: Tea: green"])
        self.assertEqual(queries.read_card(gateway, AGENT, USER),
                         ["IDENTITY: Name: Ada", "ATTRIBUTE: Tea: green"])
        self.assertEqual(act(gateway, settings, "profile", facts="ATTRIBUTE: Tea: oolong"),
                         (True, "Replaced the agent's card of the user: 1 fact (it had 2)."))
        self.assertEqual(queries.read_card(gateway, AGENT, USER), ["ATTRIBUTE: Tea: oolong"])
        # The user's card of itself is another card.
        self.assertEqual(queries.read_card(gateway, USER, USER), [])

    def test_the_server_takes_a_full_card_at_the_bounds_and_a_redacted_fact(self):
        gateway, settings = self.gateway(), self.settings()
        facts = [f"ATTRIBUTE: {i:02d} " + "x" * (MAX_FACT_CHARS - 14) for i in range(MAX_FACTS - 1)]
        ok, text = act(gateway, settings, "profile",
                       facts=[*facts, f"ATTRIBUTE: deploy token {LEAKED}"])
        self.assertTrue(ok, text)
        stored = queries.read_card(gateway, AGENT, USER)
        self.assertEqual(stored, [*facts, "ATTRIBUTE: deploy token [REDACTED:github_token]"])
        self.assertNotIn("output cut", act(gateway, settings, "profile")[1])


# -- the fake against the real server --------------------------------------------------------------


def outcome(scenario: Callable[[HonchoGateway], Any], gateway: HonchoGateway) -> Any:
    try:
        return scenario(gateway)
    except HonchoRequestError as exc:
        return ("error", type(exc).__name__, exc.code)


def peer_card(gw: HonchoGateway, observer: str, target: str) -> Any:
    """The raw answer of the SDK's card read."""
    return gw.call(lambda client: gw.reader_peer(observer).get_card(target=target))


def known_observer_without_a_card(gw):
    gw.call(lambda client: client.peer("pc-known"))  # get-or-create
    return peer_card(gw, "pc-known", USER)


def set_answers_the_card_and_strips_nul(gw):
    stored = queries.set_card(gw, "pc-setter", "pc-nobody-yet",
                              ["IDENTITY: a\x00b", "ATTRIBUTE: c"])
    return stored, peer_card(gw, "pc-setter", "pc-nobody-yet")


def set_to_no_facts(gw):
    queries.set_card(gw, "pc-empty", USER, ["IDENTITY: x"])
    queries.set_card(gw, "pc-empty", USER, [])
    return peer_card(gw, "pc-empty", USER)


def a_card_about_a_scope_is_refused(gw):
    return queries.set_card(gw, "pc-scoper", "scope.pc", ["IDENTITY: x"])


def read_card_of_an_unseen_observer(gw):
    return queries.read_card(gw, "pc-never-seen", USER)


def cards_are_per_observer_and_target(gw):
    queries.set_card(gw, "pc-a", "pc-b", ["IDENTITY: b as a sees it"])
    queries.set_card(gw, "pc-a", "pc-a", ["IDENTITY: a itself"])
    return (peer_card(gw, "pc-a", "pc-b"), peer_card(gw, "pc-a", "pc-a"),
            queries.read_card(gw, "pc-b", "pc-b"))


SCENARIOS = {f.__name__: f for f in (
    known_observer_without_a_card, set_answers_the_card_and_strips_nul, set_to_no_facts,
    a_card_about_a_scope_is_refused, read_card_of_an_unseen_observer,
    cards_are_per_observer_and_target)}


class FakeParityTest(RealHonchoCase):
    quiet = True

    def test_the_fake_answers_the_card_calls_like_the_real_server(self):
        for name, scenario in SCENARIOS.items():
            with self.subTest(name):
                real = outcome(scenario, self.gateway())
                fake = FakeHoncho()
                settings = real_settings(self.addCleanup, "https://honcho.test",
                                         "fake-" + self.workspace_id, secrets={})
                gateway = HonchoGateway.for_settings(
                    settings,
                    http_client_factory=lambda fake=fake: httpx.Client(transport=fake.transport()))
                self.addCleanup(gateway.close)
                self.assertEqual(outcome(scenario, gateway), real,
                                 f"tests/fake_honcho.py answers {name!r} unlike the real server")

    def test_the_tool_answers_alike_on_both(self):
        steps = [{}, {"facts": ["IDENTITY: Name: Ada", "ATTRIBUTE: Boats: two"]}, {},
                 {"facts": "ATTRIBUTE: x"}, {}]
        answers = {}
        for server in ("real", "fake"):
            if server == "real":
                settings = real_settings(self.addCleanup, self.url, self.workspace_id + "-tool")
                gateway = HonchoGateway.for_settings(settings, 30.0)
            else:
                fake = FakeHoncho()
                settings = real_settings(self.addCleanup, "https://honcho.test", "fake-tool",
                                         secrets={})
                gateway = HonchoGateway.for_settings(
                    settings,
                    http_client_factory=lambda fake=fake: httpx.Client(transport=fake.transport()))
            self.addCleanup(gateway.close)
            answers[server] = [act(gateway, settings, "profile", **args) for args in steps]
        self.assertEqual(answers["fake"], answers["real"])
        self.assertTrue(all(ok for ok, _ in answers["real"]), answers["real"])


if __name__ == "__main__":
    unittest.main()
