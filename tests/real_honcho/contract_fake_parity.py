"""The fake Honcho of the unit tests (tests/fake_honcho.py) against the real server: every
behaviour the fake encodes, run through the same plugin gateway on both, must give the same
observable answer."""

import unittest
from collections.abc import Callable
from typing import Any

import httpx
from real_kit import (
    AGENT,
    USER,
    RealHonchoCase,
    await_derivation,
    real_settings,
    turns,
    user_turns,
)

# isort: split
from fake_honcho import FakeHoncho  # after real_kit, which puts tests/ on sys.path

from honcho_hub.errors import HonchoRequestError
from honcho_hub.gateway import queries
from honcho_hub.gateway.gateway import HonchoGateway


def outcome(scenario: Callable[[HonchoGateway, str], Any], gateway: HonchoGateway, ws: str) -> Any:
    """What the scenario observed, or the sanitized code of the error it met."""
    try:
        return scenario(gateway, ws)
    except HonchoRequestError as exc:
        return ("error", type(exc).__name__, exc.code)


def messages(gw: HonchoGateway, session_id: str) -> list:
    return list(gw.call(lambda c: gw.reader_session(session_id).messages(size=100)).items)


def observation_settings(gw, ws):
    gw.send(turns("p-observe", ["hello", "hi"]))
    session = gw.reader_session("p-observe")
    # gw.call runs each lambda at once, within its own turn of the comprehension.
    return {p: tuple(gw.call(lambda c: session.get_peer_configuration(p))  # noqa: B023
                     .model_dump().items())
            for p in (USER, AGENT)}


def ordered_messages(gw, ws):
    gw.send(turns("p-order", ["one", "two", "three"]))
    return [(m.peer_id, m.content, m.metadata, m.created_at.timestamp())
            for m in messages(gw, "p-order")]


def nul_bytes_stripped(gw, ws):
    gw.send(user_turns("p-nul", ["a\x00b"]))
    return [m.content for m in messages(gw, "p-nul")]


def messages_to_an_unseen_session_create_it(gw, ws):
    gw.call(lambda c: gw.reader_session("p-auto").add_messages(
        [gw.reader_peer(USER).message("auto")]))
    return [m.content for m in messages(gw, "p-auto")]


def event_id_lookup(gw, ws):
    gw.send(user_turns("p-lookup", ["x", "y"]))
    gw.send(user_turns("p-lookup-other", ["z"], tag="other"))
    return sorted(gw.existing_event_ids("p-lookup",
                                        ["ev_p-lookup_u0001", "ev_other_u0000", "ev_nope"]))


def event_id_lookup_in_an_unseen_session(gw, ws):
    return sorted(gw.existing_event_ids("p-lookup-never", ["ev_p-lookup-never_u0000"]))


def empty_listing(gw, ws):
    page = gw.call(lambda c: gw.reader_session("p-never").messages(size=10))
    return (len(page.items), page.total, page.pages, page.has_next_page())


def paging(gw, ws):
    gw.send(user_turns("p-pages", ["a", "b", "c"]))
    page = gw.call(lambda c: gw.reader_session("p-pages").messages(size=2))
    second = gw.call(lambda c: page.get_next_page())
    return ([m.content for m in page.items], page.pages, page.has_next_page(),
            [m.content for m in second.items], second.has_next_page())


def context_of_an_unseen_session(gw, ws):
    gw.send(user_turns("p-ctx", ["hello"]))  # the peers exist
    return gw.context("p-ctx-unseen", query=None, tokens=500, target=USER, perspective=AGENT)


def context_window(gw, ws):
    gw.send(turns("p-window", ["first", "second", "third"]))
    return gw.context("p-window", query=None, tokens=500, target=USER, perspective=AGENT)


def base_pack_of_a_known_user(gw, ws):
    """Recall's base pack: what the agent knows about the user across chats (no derivation
    here)."""
    gw.send(turns("p-base", ["hello", "hi"]))
    data = queries.peer_view(gw, AGENT, USER)
    return (data.representation or "", data.card)


def base_pack_of_an_unseen_user(gw, ws):
    return outcome(lambda g, w: queries.peer_view(gw, "p-nobody-asks", "p-nobody-known"), gw, ws)


def scoped_base_pack(gw, ws):
    gw.send(user_turns("p-base-scoped", ["in a scope"], scope_id="p-base-scope"))
    data = queries.scoped_peer_view(gw, AGENT, USER, "p-base-scope")
    return (data.representation or "", data.card)


def scoped_base_pack_of_an_unseen_scope(gw, ws):
    gw.send(user_turns("p-base-noscope", ["hello"]))
    return outcome(lambda g, w: queries.scoped_peer_view(gw, AGENT, USER, "p-never-a-scope"),
                   gw, ws)


def scope_backfill(gw, ws):
    gw.send(user_turns("p-before", ["had messages before joining"]))
    gw.ensure_session_in_scope("p-before", "p-scope")
    gw.ensure_session_in_scope("p-empty", "p-scope")  # joins before any message
    gw.send(user_turns("p-empty", ["after joining"], scope_id="p-scope"))
    return sorted(gw.scope_status("p-scope"))


def scoped_workspace_search(gw, ws):
    gw.send(user_turns("p-in", ["zebra crossing"], scope_id="p-search"))
    gw.send(user_turns("p-out", ["zebra stripes"]))
    found = gw.call(lambda c: c.search("zebra", limit=10, scope="p-search"))
    return sorted({m.session_id for m in found})


def session_search_ranks_the_match_first(gw, ws):
    gw.send(user_turns("p-rank", ["apples are red", "the sky is blue", "grass is green"]))
    return gw.call(lambda c: gw.reader_session("p-rank").search("sky", limit=5))[0].content


EMBED_RECONCILE_S = 300  # RECONCILIATION_INTERVAL_SECONDS of the server (src/config.py at ddbb90e)


def session_search_without_a_shared_word_answers_the_nearest(gw, ws):
    gw.send(user_turns("p-near", ["apples are red", "the sky is blue"]))
    # The server embeds messages in a background task after it answered (src/routers/messages.py at
    # ddbb90e: embed_task_gate, else the reconciler), and only embedded messages can be "nearest":
    # what is compared is the answer once they are embedded (the fake embeds at once). When that
    # task is saturated (a busy server), the reconciler embeds them within its interval: 300 s by
    # default.
    return await_derivation(gw, "the session's messages to be embedded",
                            timeout_s=EMBED_RECONCILE_S + 30,
                            until=lambda: sorted(m.content for m in gw.call(
                                lambda c: gw.reader_session("p-near").search("zebra", limit=5))))


def conclusions_round_trip(gw, ws):
    gw.send(user_turns("p-concl", ["hello"]))
    view = gw.call(lambda c: gw.reader_peer(AGENT).conclusions_of(USER))
    made = gw.call(lambda c: view.create([{"content": "likes tea", "session_id": "p-concl"}]))[0]
    got = [c.id for c in gw.call(lambda c: view.get_many([made.id, "no-such-id"]))]
    other = [c.id for c in gw.call(lambda c: gw.reader_peer(USER).conclusions_of(USER)
                                   .get_many([made.id]))]
    listed = [(c.content, c.observer_id, c.observed_id, c.session_id)
              for c in gw.call(lambda c: view.list()).items]
    gw.call(lambda c: view.delete(made.id))
    after = gw.call(lambda c: view.list()).total
    return (got == [made.id], other, listed, after)


def dream_accepted(gw, ws):
    gw.send(user_turns("p-dream", ["hello"]))
    return gw.call(lambda c: c.schedule_dream(observer=AGENT, observed=USER,
                                              session="p-dream"))


def refusal(request):
    def scenario(gw, ws):
        gw.send(user_turns("p-refuse", ["exists"]))
        gw.call(request(gw))
        return "accepted"
    return scenario


REFUSALS = {
    "101 messages in one call": lambda gw: lambda c: gw.reader_session("p-refuse").add_messages(
        [gw.reader_peer(USER).message("m")] * 101),
    "an unseen session added to a scope": lambda gw: lambda c: c.scope("p-refuse").add_sessions(
        ["p-unseen"]),
    "an unknown conclusion deleted": lambda gw: lambda c: gw.reader_peer(AGENT).conclusions_of(
        USER).delete("nope"),
    "a dialectic naming an unseen session": lambda gw: lambda c: gw.reader_peer(AGENT).chat(
        "q", target=USER, session="p-unseen"),
    "a dialectic by an unseen peer (it is created)": lambda gw: lambda c: gw.reader_peer(
        "p-asker").chat("q", target=USER),
    "a dialectic about an unseen peer": lambda gw: lambda c: gw.reader_peer(AGENT).chat(
        "q", target="p-unknown"),
    "a conclusion in an unseen session": lambda gw: lambda c: gw.reader_peer(AGENT).conclusions_of(
        USER).create([{"content": "x", "session_id": "p-unseen"}]),
    "a conclusion about an unseen peer": lambda gw: lambda c: gw.reader_peer(AGENT).conclusions_of(
        "p-stranger").create([{"content": "x"}]),
    "a conclusion by an unseen peer": lambda gw: lambda c: gw.reader_peer(
        "p-newcomer").conclusions_of(USER).create([{"content": "x"}]),
}

SCENARIOS = {f.__name__: f for f in (
    observation_settings, ordered_messages, nul_bytes_stripped,
    messages_to_an_unseen_session_create_it, event_id_lookup,
    event_id_lookup_in_an_unseen_session, empty_listing, paging, context_of_an_unseen_session,
    context_window, scope_backfill, scoped_workspace_search, session_search_ranks_the_match_first,
    session_search_without_a_shared_word_answers_the_nearest, conclusions_round_trip,
    dream_accepted, base_pack_of_a_known_user, base_pack_of_an_unseen_user, scoped_base_pack,
    scoped_base_pack_of_an_unseen_scope)}
SCENARIOS.update({name: refusal(request) for name, request in REFUSALS.items()})


class FakeParityTest(RealHonchoCase):
    quiet = True  # no derivation: what the fake never does is not compared

    def test_the_fake_answers_like_the_real_server(self):
        for name, scenario in SCENARIOS.items():
            with self.subTest(name):
                real = outcome(scenario, self.gateway(), self.workspace_id)
                fake_ws = "fake-" + self.workspace_id
                fake = FakeHoncho()
                settings = real_settings(self.addCleanup, "https://honcho.test", fake_ws,
                                         secrets={})
                gateway = HonchoGateway.for_settings(
                    settings,
                    http_client_factory=lambda fake=fake: httpx.Client(transport=fake.transport()))
                self.addCleanup(gateway.close)
                self.assertEqual(outcome(scenario, gateway, fake_ws), real,
                                 f"tests/fake_honcho.py answers {name!r} unlike the real server")


if __name__ == "__main__":
    unittest.main()
