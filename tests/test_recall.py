"""Recall: cache identity, single flight, stale reuse, scoped calls, injection (the pack itself:
test_recall_pack.py)."""

import os
import re
import threading
import unittest

import httpx
import hub_testkit
import test_db  # its file makers; a module import collects none of its tests
from fake_honcho import FakeHoncho
from idle import wait_idle
from outbox_helpers import ManualClock, hold_write_lock, release_lock, temp_outbox_path

from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.recall.recaller import Recaller, cache_key
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import Outbox

KEY = "hch-recall-key-123456"
TEMPLATE = hub_testkit.checkout_text("prompts", "honcho.recall_block.md")
SESSION = "chat-Ab3dE6gH"
SESSION_CONTEXT = f"/sessions/{SESSION}/context"


class RecallBench:
    def __init__(self, test, supports_scopes=True, **overrides):
        self.fake = FakeHoncho(api_key=KEY)
        self.gate = threading.Event()
        self.gate.set()
        self.mono = ManualClock(100.0)
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(test), **overrides},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.recaller = Recaller(self.gateway, monotonic=self.mono)
        self.supports_scopes = supports_scopes
        self.hangs = lambda request: True  # which context requests the closed gate holds
        test.addCleanup(self.recaller.close)
        # cleanups run last-in first-out: release a hung Honcho first
        test.addCleanup(self.gate.set)

    def gateway(self, settings):
        fake_transport = self.fake.transport()

        def gated(request):
            if request.url.path.endswith("/context") and self.hangs(request):
                self.gate.wait(30)  # a test closes the gate to make Honcho hang
            return fake_transport.handle_request(request)
        return HonchoGateway.for_settings(
            settings, settings.recall_timeout_s,
            http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(gated)),
            supports_scopes=lambda: self.supports_scopes)

    def remember(self, representation="The user prefers tea.", card=("Name: Ada",), summary=None,
                 scope=None):
        # the server has seen both peers (their messages were delivered)
        for peer in ("agent-zero", "user"):
            self.fake.ensure_peer(self.settings.workspace_id, peer)
        observer = f"scope:{scope}" if scope else "agent-zero"
        self.fake.representations[(observer, "user")] = representation
        self.fake.cards[(observer, "user")] = list(card)
        if summary:
            self.fake.summaries[SESSION] = summary

    def recall(self, text="what do I drink?", scope=None, settings=None):
        return self.recaller.recall(settings or self.settings, SESSION, text, TEMPLATE, scope)


class RecallGatewayTest(unittest.TestCase):
    def test_a_change_of_peers_builds_new_recall_and_dialectic_gateways(self):
        built = []

        def factory(kind):
            def build(settings):
                built.append((kind, settings.user_peer_id))
                return HonchoGateway.for_settings(
                    settings,
                    http_client_factory=lambda: httpx.Client(transport=FakeHoncho().transport()))
            return build
        clock = ManualClock(1000.0)
        recaller = Recaller(factory("recall"), monotonic=clock,
                            ask_gateway_factory=factory("dialectic"))
        self.addCleanup(recaller.close)
        base = {"api_url": "https://honcho.test", "outbox_path": temp_outbox_path(self),
                "dialectic_enabled": True}
        chats = iter(range(100))

        def use_both(user):
            settings = build_settings({**base, "user_peer_id": user}, {}, {})
            recaller.gateway(settings)
            clock.advance(60)  # past the prewarm rate limit
            # a new chat's note: the dialectic's
            self.assertTrue(recaller.prewarm(settings, f"chat-{next(chats)}"))
            self.assertTrue(wait_idle(10, recaller))
        for user in ("ada", "bob"):
            use_both(user)
        # A gateway creates sessions with its peers.
        self.assertEqual(built, [("recall", "ada"), ("dialectic", "ada"), ("recall", "bob"),
                                 ("dialectic", "bob")])
        # chats of several humans take turns: each keeps its client
        for user in ("ada", "bob", "ada"):
            use_both(user)
        self.assertEqual(built, [("recall", "ada"), ("dialectic", "ada"), ("recall", "bob"),
                                 ("dialectic", "bob")])


class CacheKeyTest(unittest.TestCase):
    def test_every_component_changes_the_key(self):
        base = build_settings({}, {}, {})
        reference = cache_key(base, "chat-a", "query", "a0-x")
        variants = {
            "api_url": cache_key(build_settings({"api_url": "http://other:8000"}, {}, {}),
                                 "chat-a", "query", "a0-x"),
            "workspace": cache_key(build_settings({"workspace_id": "w2"}, {}, {}),
                                   "chat-a", "query", "a0-x"),
            "observer": cache_key(build_settings({"agent_peer_id": "bot2"}, {}, {}),
                                  "chat-a", "query", "a0-x"),
            "target": cache_key(build_settings({"user_peer_id": "bob"}, {}, {}),
                                "chat-a", "query", "a0-x"),
            "session": cache_key(base, "chat-b", "query", "a0-x"),
            "tokens": cache_key(build_settings({"max_context_tokens": 900}, {}, {}),
                                "chat-a", "query", "a0-x"),
            "query": cache_key(base, "chat-a", "other query", "a0-x"),
            "scope": cache_key(base, "chat-a", "query", "a0-y"),
            "no scope": cache_key(base, "chat-a", "query", None),
        }
        for name, key in variants.items():
            with self.subTest(component=name):
                self.assertNotEqual(key, reference)
        self.assertEqual(cache_key(base, "chat-a", "query", "a0-x"), reference)
        self.assertNotIn("query", repr(reference))  # the query travels as a digest


class CacheBehaviourTest(unittest.TestCase):
    def test_a_hit_within_ttl_makes_no_request_and_expiry_refreshes(self):
        bench = RecallBench(self)
        bench.remember()
        self.assertEqual(bench.recall().source, "fresh")
        self.assertTrue(wait_idle(10, bench.recaller))  # the base pack warms in the background
        requests = len(bench.fake.requests)
        self.assertEqual(bench.recall().source, "hit")
        self.assertTrue(wait_idle(10, bench.recaller))
        self.assertEqual(len(bench.fake.requests), requests)  # no request of any kind
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 1)
        bench.mono.advance(121)
        self.assertEqual(bench.recall().source, "fresh")
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 2)
        self.assertEqual(bench.recaller.clear_cache(), 1)
        self.assertEqual(bench.recall().source, "fresh")

    def test_concurrent_identical_recalls_share_one_request(self):
        bench = RecallBench(self, recall_timeout_s=30)
        bench.remember()
        bench.gate.clear()
        barrier, results = threading.Barrier(51), []

        def call():
            barrier.wait()
            results.append(bench.recall())
        threads = [threading.Thread(target=call) for _ in range(50)]
        for thread in threads:
            thread.start()
        barrier.wait()
        bench.gate.set()
        for thread in threads:
            thread.join(30)
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 1)
        self.assertEqual(len(results), 50)
        self.assertEqual({r.block for r in results}, {results[0].block})
        self.assertIn("prefers tea", results[0].block)

    def test_a_hung_honcho_gives_the_base_pack_else_the_last_pack_else_nothing(self):
        bench = RecallBench(self)
        bench.remember(representation="The user prefers tea.", card=("Name: Ada",),
                       summary="They spoke of tea.")
        bench.recall()
        self.assertTrue(wait_idle(10, bench.recaller))
        bench.mono.advance(121)
        # the client's read timeout fires
        bench.fake.fail(match=SESSION_CONTEXT + "$", kind="timeout")
        based = bench.recall()
        self.assertEqual(based.source, "base")
        self.assertIn("prefers tea", based.block)
        self.assertIn("Name: Ada", based.block)
        self.assertIn("They spoke of tea.", based.block)  # the session's summary from its last load
        self.assertTrue(wait_idle(10, bench.recaller))

        without_base = RecallBench(self)
        without_base.remember()
        earlier = without_base.recall()
        self.assertTrue(wait_idle(10, without_base.recaller))
        without_base.recaller.clear_cache()
        without_base.recall()  # loads the session again; its base load fails
        without_base.fake.fail(match="/peers/agent-zero/context$", status=500, times=1)
        self.assertTrue(wait_idle(10, without_base.recaller))
        without_base.fake.fail(match=SESSION_CONTEXT + "$", kind="timeout")
        stale = without_base.recall("a different question")
        self.assertEqual((stale.source, stale.block), ("stale", earlier.block))
        other = without_base.recaller.recall(without_base.settings, "chat-other", "hello there",
                                             TEMPLATE)
        self.assertIn(other.source, ("fresh", "base"))

        empty = RecallBench(self)
        empty.fake.fail(match="/context$", kind="timeout", times=2)
        nothing = empty.recall()
        self.assertEqual((nothing.source, nothing.block), ("timeout", ""))

    def test_callers_sharing_a_load_give_up_at_their_deadline(self):
        bench = RecallBench(self, recall_timeout_s=0.2)
        bench.remember()
        bench.gate.clear()  # the first caller's load hangs
        owner = threading.Thread(target=bench.recall)
        owner.start()
        # the owner is loading
        self.assertEqual(bench.fake.await_request(r"/v3/workspaces$", 1, 10), 1)
        waiter = bench.recall()
        self.assertEqual((waiter.source, waiter.block), ("timeout", ""))
        bench.gate.set()
        owner.join(10)

    def test_a_hung_server_holds_the_turn_no_longer_than_its_deadline(self):
        bench = RecallBench(self, recall_timeout_s=0.3)
        bench.remember()
        bench.gate.clear()  # every context request hangs until the gate opens
        result = bench.recall()
        self.assertEqual((result.source, result.block), ("timeout", ""))
        # it came back while the server still held the request
        self.assertFalse(bench.gate.is_set())

    def test_a_refused_scoped_call_and_a_hung_fallback_end_within_the_one_deadline(self):
        bench = RecallBench(self, recall_timeout_s=0.3)
        bench.remember()
        bench.fake.scoped_context_status = 403
        # only the unscoped retry hangs
        bench.hangs = lambda request: "scope" not in request.url.params
        bench.gate.clear()
        result = bench.recall(scope="a0-alpha")
        self.assertEqual(result.source, "timeout")
        # refused, then retried
        self.assertEqual(bench.recaller.scope_problem, "scope unavailable: auth_403")
        self.assertFalse(bench.gate.is_set())  # the unscoped retry still hangs

    def test_a_turn_waits_on_the_prefetched_load_and_never_starts_a_second_one(self):
        bench = RecallBench(self, recall_timeout_s=0.2)
        bench.remember()
        bench.gate.clear()  # the prefetch's request is on the wire when the turn asks
        self.assertTrue(bench.recaller.prefetch(bench.settings, SESSION, "what do I drink?"))
        # its load has begun
        self.assertEqual(bench.fake.await_request(r"/v3/workspaces$", 1, 10), 1)
        # waited on it, to its deadline
        self.assertEqual(bench.recall("what do I drink?").source, "timeout")
        bench.gate.set()
        self.assertTrue(wait_idle(10, bench.recaller))
        after = bench.recall("what do I drink?")
        self.assertEqual(after.source, "hit")  # the prefetched load filled the cache
        self.assertIn("prefers tea", after.block)
        # one request for the message, in all
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 1)

    def test_a_turn_that_may_not_wait_gets_the_warm_base_pack_at_once(self):
        bench = RecallBench(self, recall_wait_ms=0)
        bench.remember(representation="The user prefers tea.", card=("Name: Ada",))
        self.assertTrue(bench.recaller.warm(bench.settings))
        self.assertTrue(wait_idle(10, bench.recaller))
        bench.gate.clear()  # whatever the server does now, the turn does not wait for it
        result = bench.recall("a brand new question")
        self.assertEqual(result.source, "base")
        self.assertIn("prefers tea", result.block)
        self.assertIn("Name: Ada", result.block)
        bench.gate.set()

    def test_an_empty_base_pack_is_asked_again_soon_not_after_the_whole_ttl(self):
        bench = RecallBench(self, recall_wait_ms=0, cache_ttl_s=600)
        # a new install: Honcho knows nobody yet (404)
        self.assertTrue(bench.recaller.warm(bench.settings))
        self.assertTrue(wait_idle(10, bench.recaller))
        bench.remember()  # the first deliveries made the peers; the deriver concluded something
        self.assertFalse(bench.recaller.warm(bench.settings))  # kept for now
        bench.mono.advance(16)
        self.assertTrue(bench.recaller.warm(bench.settings))  # but not for the whole ten minutes
        self.assertTrue(wait_idle(10, bench.recaller))
        self.assertEqual(bench.recall("anything new").source, "base")

    def test_a_turn_nobody_typed_gets_the_sessions_last_pack_and_makes_no_request(self):
        bench = RecallBench(self)
        bench.remember()
        held = bench.recaller.recall(bench.settings, SESSION, "", TEMPLATE, load=False)
        self.assertEqual((held.block, len(bench.fake.requests)), ("", 0))  # nothing held yet
        first = bench.recall()
        self.assertTrue(wait_idle(10, bench.recaller))
        requests = len(bench.fake.requests)
        bench.mono.advance(121)  # past the cache's TTL: a typed turn would load again
        held = bench.recaller.recall(bench.settings, SESSION, "", TEMPLATE, load=False)
        self.assertTrue(wait_idle(10, bench.recaller))
        self.assertEqual((held.source, held.block), ("reused", first.block))
        self.assertIn("prefers tea", held.block)
        self.assertEqual(len(bench.fake.requests), requests)  # no load, no base warm, no poll

    def test_clearing_the_cache_writes_no_marker_where_there_is_no_outbox(self):
        bench = RecallBench(self)
        folder = os.path.dirname(bench.settings.outbox_path)
        os.makedirs(folder, exist_ok=True)
        bench.recaller.clear_cache(bench.settings)
        # an outbox path that points at someone's folder stays clean
        self.assertEqual(os.listdir(folder), [])

    def test_an_error_gives_the_base_pack_kept_from_before(self):
        bench = RecallBench(self)
        bench.remember()
        first = bench.recall()
        self.assertTrue(wait_idle(10, bench.recaller))
        bench.mono.advance(121)
        bench.fake.fail(match=SESSION_CONTEXT + "$", status=500)
        again = bench.recall()
        self.assertEqual((again.source, again.block), ("base", first.block))
        self.assertTrue(wait_idle(10, bench.recaller))
        bench.fake.api_key = "another-key-entirely"  # every request is refused from now on
        new_chat = bench.recaller.recall(bench.settings, "chat-new", "q", TEMPLATE)
        self.assertEqual(new_chat.source, "base")
        self.assertIn("prefers tea", new_chat.block)


class ScopedCallTest(unittest.TestCase):
    def test_unscoped_call_shape(self):
        bench = RecallBench(self, search_top_k=5, max_conclusions=7, max_context_tokens=800)
        bench.recall(f"my key is ghp_{'a' * 36}, what tea?")
        query = bench.fake.context_queries[-1]
        self.assertEqual((query["peer_target"], query["peer_perspective"]), ("user", "agent-zero"))
        self.assertNotIn("scope", query)
        self.assertEqual((query["tokens"], query["search_top_k"], query["max_conclusions"]),
                         ("800", "5", "7"))
        self.assertEqual(query["search_query"], "my key is [REDACTED:github_token], what tea?")
        self.assertEqual(query["summary"], "true")

    def test_scoped_call_replaces_the_perspective(self):
        bench = RecallBench(self)
        bench.remember(representation="Project-only fact.", scope="a0-alpha")
        result = bench.recall(scope="a0-alpha")
        query = bench.fake.context_queries[-1]
        self.assertEqual(query["scope"], "a0-alpha")
        self.assertNotIn("peer_perspective", query)
        self.assertIn("Project-only fact.", result.block)
        self.assertIsNone(bench.recaller.scope_problem)

    def test_a_refused_scoped_call_falls_back_to_the_unscoped_view(self):
        bench = RecallBench(self)
        bench.remember(representation="Workspace-wide fact.")
        bench.fake.scoped_context_status = 403
        result = bench.recall(scope="a0-alpha")
        self.assertIn("Workspace-wide fact.", result.block)
        self.assertEqual(bench.recaller.scope_problem, "scope unavailable: auth_403")
        self.assertEqual([("scope" in q) for q in bench.fake.context_queries], [True, False])

    def test_an_sdk_validation_refusal_falls_back_too(self):
        bench = RecallBench(self)
        bench.remember(representation="Global.")
        # the SDK raises ValueError
        self.assertIn("Global.", bench.recall(scope="scope.invalid").block)
        self.assertEqual(bench.recaller.scope_problem, "scope unavailable: invalid")

    def test_an_old_sdk_recalls_globally_and_silently(self):
        bench = RecallBench(self, supports_scopes=False)
        bench.remember(representation="Global.")
        self.assertIn("Global.", bench.recall(scope="a0-alpha").block)
        self.assertNotIn("scope", bench.fake.context_queries[-1])
        self.assertIsNone(bench.recaller.scope_problem)

    def test_recall_never_asks_the_dialectic_and_can_be_disabled(self):
        bench = RecallBench(self)
        bench.remember()
        for text in ("a", "what do I like?", "tell me everything you know about me"):
            bench.recall(text)
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 3)  # each recall reached Honcho
        # dialectic routes
        self.assertFalse(any(re.search(r"/chat$", path) for _, path in bench.fake.requests))
        off = build_settings({"recall_enabled": False}, {}, {})
        self.assertEqual(bench.recall(settings=off).source, "disabled")

    def test_a_prefetch_told_not_to_ask_the_dialectic_loads_recall_only(self):
        bench = RecallBench(self, dialectic_enabled=True, dialectic_prewarm=False)
        bench.remember()
        recaller = Recaller(bench.gateway, monotonic=bench.mono, ask_gateway_factory=bench.gateway)
        self.addCleanup(recaller.close)

        def asked() -> int:
            return sum(1 for _, path in bench.fake.requests if path.endswith("/chat"))
        recaller.prefetch(bench.settings, SESSION, "what do I drink?", ask_dialectic=False)
        self.assertTrue(wait_idle(10, recaller))
        self.assertEqual(bench.fake.count(SESSION_CONTEXT), 1)  # recall's own load
        self.assertEqual((asked(), recaller.dialectic_counters()["started"]), (0, 0))

        def sessions() -> set[str]:  # the dialectic's question creates the session it names
            return {session for _, session in bench.fake.sessions}
        self.assertNotIn(SESSION, sessions())
        recaller.prefetch(bench.settings, SESSION, "what do I eat?")
        self.assertTrue(wait_idle(10, recaller))
        self.assertEqual(asked(), 1)  # the same turn of a chat that may: its note asked
        self.assertIn(SESSION, sessions())

    def test_short_text_is_not_used_as_a_query(self):
        bench = RecallBench(self, recall_min_query_chars=5)
        bench.recall("ok")
        self.assertNotIn("search_query", bench.fake.context_queries[-1])


class CacheMarkerTest(unittest.TestCase):
    """Clearing the cache tells the other processes sharing the outbox through a marker beside
    it."""

    def test_a_file_not_our_outbox_gets_no_marker_and_this_process_alone_forgets_its_packs(self):
        cases = {"another program's database": test_db.other_program("DELETE"),
                 "another program's database in WAL mode": test_db.other_program("WAL"),
                 "another application id over our schema": test_db.other_application_id,
                 "not SQLite at all": test_db.write(os.urandom(8192))}
        for name, make in cases.items():
            with self.subTest(name):
                bench = RecallBench(self)
                folder = os.path.dirname(bench.settings.outbox_path)
                os.makedirs(folder)
                make(bench.settings.outbox_path)
                bench.remember()
                self.assertEqual(bench.recall().source, "fresh")
                before = test_db.snapshot(folder)
                with self.assertLogs("honcho_hub.storage.marker", "WARNING") as logged:
                    self.assertEqual(bench.recaller.clear_cache(bench.settings), 1)
                    # no marker; the file untouched
                    self.assertEqual(test_db.snapshot(folder), before)
                self.assertEqual(bench.recall().source, "fresh")
                self.assertIn("the other processes sharing the outbox were not told",
                              logged.output[0])
                self.assertNotIn(folder, "\n".join(logged.output))

    def test_our_outbox_gets_the_marker_even_while_another_process_writes_to_it(self):
        bench = RecallBench(self)
        # as another process sharing the outbox holds it
        other = Recaller(bench.gateway, monotonic=bench.mono)
        self.addCleanup(other.close)
        Outbox(bench.settings.outbox_path).close()
        bench.remember()
        self.assertEqual(other.recall(bench.settings, SESSION, "what do I drink?", TEMPLATE).source,
                         "fresh")
        child = hold_write_lock(bench.settings.outbox_path)
        try:
            bench.recaller.clear_cache(bench.settings)
        finally:
            release_lock(child)
        self.assertEqual(other.recall(bench.settings, SESSION, "what do I drink?", TEMPLATE).source,
                         "fresh")



class TurnEchoTest(unittest.TestCase):
    def message(self, bench, peer, content, number):
        bench.fake.messages.append({"id": f"m{number}", "content": content, "peer_id": peer,
                                    "session_id": SESSION,
                                    "workspace_id": bench.settings.workspace_id, "metadata": {},
                                    "created_at": "2026-01-01T00:00:00Z", "token_count": 9})

    def test_the_turns_own_message_delivered_before_the_load_is_not_quoted_back(self):
        # The worker may deliver the typed message before recall's load: the session then holds
        # it, and quoting it among the recent messages would put it in the prompt twice.
        bench = RecallBench(self)
        bench.remember()
        self.message(bench, "user", "I keep bees near Vigo.", 1)
        self.message(bench, "agent-zero", "Noted: bees.", 2)
        self.message(bench, "user", "What colour should I  paint\nmy hives?", 3)
        block = bench.recall("What colour should I paint my hives?").block
        self.assertIn("I keep bees near Vigo.", block)
        self.assertIn("Noted: bees.", block)
        self.assertNotIn("paint", block)

    def test_an_earlier_message_with_the_same_words_is_kept(self):
        bench = RecallBench(self)
        bench.remember()
        self.message(bench, "user", "Which hive is strongest?", 1)
        self.message(bench, "agent-zero", "The east hive.", 2)
        block = bench.recall("Which hive is strongest?").block
        self.assertIn("Which hive is strongest?", block)  # said before, answered: not this turn's

    def test_a_long_message_delivered_before_the_load_is_not_quoted_back(self):
        # The query is the message's first QUERY_CHARS; the session holds all of it (a budget
        # large enough for Honcho to return it).
        bench = RecallBench(self, max_context_tokens=2000)
        bench.remember()
        long = "Here is my hive log: " + " ".join(f"frame{i} capped" for i in range(330))
        self.message(bench, "user", "I keep bees near Vigo.", 1)
        self.message(bench, "user", long, 2)
        block = bench.recall(long).block
        self.assertIn("I keep bees near Vigo.", block)
        self.assertNotIn("capped", block)

    def test_a_message_too_short_for_a_query_delivered_before_the_load_is_not_quoted_back(self):
        bench = RecallBench(self)
        bench.remember()
        self.message(bench, "user", "Shall I paint the hives blue?", 1)
        self.message(bench, "agent-zero", "Blue suits bees.", 2)
        self.message(bench, "user", "ok", 3)
        block = bench.recall("ok").block
        self.assertIn("Blue suits bees.", block)
        self.assertNotIn("User: ok", block)


class RepeatsInTheBlockTest(unittest.TestCase):
    def test_a_conclusion_said_in_six_chats_reaches_the_block_once(self):
        bench = RecallBench(self)
        bench.remember(representation="## Explicit Observations\n\n" + "".join(
            f"[2026-01-0{day} 10:00:00] user said: Hi, I'm Dana.\n" for day in range(1, 7)),
            card=("Name: Dana",))
        block = bench.recall().block
        self.assertEqual(block.count("Hi, I'm Dana"), 1)
        self.assertIn("Name: Dana", block)


if __name__ == "__main__":
    unittest.main()
