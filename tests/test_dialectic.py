"""The opt-in dialectic layer: reasoning levels, prompts and passes, cadence, prewarm, bounds and
failures.

Honcho is the fake over the real SDK; `submit` runs the computation at once (no threads) unless a
test holds it (`Held`) to look at a computation in flight.
"""

import dataclasses
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

import httpx
from fake_honcho import FakeHoncho
from outbox_helpers import ManualClock, temp_outbox_path

from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.recall.dialectic import (
    AUDIT_QUESTION,
    COLD_QUESTION,
    LATEST_CHARS,
    MAX_RUNNING,
    PREWARM_INTERVAL_S,
    QUERY_MAX_CHARS,
    RECONCILE_QUESTION,
    WARM_QUESTION,
    Dialectic,
    cut_note,
    is_strong,
    level_for_pass,
    reasoning_level,
)
from honcho_hub.settings.config import build_settings

KEY = "hch-dialectic-key-97531"
SESSION, OTHER = "chat-Dia10001", "chat-Dia20002"
WEAK = "The user likes green tea."
STRONG = "\n".join(f"- Point {i}: the user plans their week on Mondays and prefers short written"
                   " updates." for i in range(6))


def run_now(work, *args) -> bool:
    """The pool's submit without a thread: the computation runs before submit returns."""
    work(*args)
    return True


def refuse(work, *args) -> bool:
    """A pool with no room: nothing is started."""
    return False


class Held:
    """A submit that keeps the computations until the test runs them: a computation in flight."""

    def __init__(self) -> None:
        self.waiting: list = []

    def __call__(self, work, *args) -> bool:
        self.waiting.append((work, args))
        return True

    def run_next(self) -> None:
        work, args = self.waiting.pop(0)
        work(*args)


class DialecticBench:
    def __init__(self, test, supports_scopes=True, **overrides):
        self.fake = FakeHoncho(api_key=KEY)
        self.clock = ManualClock(100.0)
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(test),
                                        "dialectic_enabled": True, **overrides},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.chat_timeouts: list[float] = []  # the read timeout each chat request was sent with
        self.gate = threading.Event()
        self.gate.set()
        self.gateway = HonchoGateway.for_settings(
            self.settings,
            http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(self._answer)),
            supports_scopes=lambda: supports_scopes)
        self.dialectic = Dialectic(lambda settings: self.gateway, monotonic=self.clock)
        test.addCleanup(self.gateway.close)
        # a Honcho a test made hang is released before the client closes
        test.addCleanup(self.gate.set)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat"):
            self.chat_timeouts.append(request.extensions["timeout"]["read"])
            self.gate.wait(30)  # a test closes the gate to make the dialectic take its time
        return self.fake.transport().handle_request(request)

    def with_(self, **changes):
        return dataclasses.replace(self.settings, **changes)

    def turn(self, text="What should I drink today?", session=SESSION, scope=None, summary=None,
             base_known=True, settings=None, submit=run_now) -> bool:
        return self.dialectic.on_user_turn(settings or self.settings, session, scope, text, summary,
                                           base_known, submit)

    def note(self, session=SESSION, settings=None):
        return self.dialectic.note(settings or self.settings, session)

    def queries(self) -> list[str]:
        return [request["query"] for request in self.fake.chat_requests]


class ReasoningLevelTest(unittest.TestCase):
    def setUp(self):
        self.settings = DialecticBench(self).settings

    def test_the_heuristic_raises_the_base_level_by_message_length_up_to_the_cap(self):
        table = [  # (base, cap, characters, level)
            ("low", "high", 0, "low"), ("low", "high", 119, "low"), ("low", "high", 120, "medium"),
            ("low", "high", 399, "medium"), ("low", "high", 400, "high"),
            ("low", "medium", 400, "medium"), ("medium", "high", 400, "high"),
            ("minimal", "max", 400, "medium"), ("high", "max", 400, "max"),
            ("low", "minimal", 400, "low"),  # a cap below the base never lowers it
            ("high", "medium", 0, "high"), ("high", "medium", 400, "high"),
        ]
        for base, cap, chars, expected in table:
            with self.subTest(base=base, cap=cap, chars=chars):
                settings = dataclasses.replace(self.settings, dialectic_reasoning_level=base,
                                               reasoning_level_cap=cap)
                self.assertEqual(reasoning_level(settings, "x" * chars), expected)

    def test_surrounding_space_does_not_count_as_length(self):
        self.assertEqual(reasoning_level(self.settings, "  " + "x" * 119 + " \n" * 20), "low")

    def test_with_the_heuristic_off_every_length_gets_the_base_level(self):
        settings = dataclasses.replace(self.settings, reasoning_level_heuristic=False,
                                       dialectic_reasoning_level="medium")
        for chars in (0, 119, 120, 399, 400, 5_000):
            with self.subTest(chars=chars):
                self.assertEqual(reasoning_level(settings, "x" * chars), "medium")

    def test_each_pass_takes_its_configured_level_else_the_turns(self):
        table = [("", 0, "high"), ("", 2, "high"), ("minimal,max", 0, "minimal"),
                 ("minimal,max", 1, "max"), ("minimal,max", 2, "high"),
                 ("low,low,medium", 2, "medium")]
        for levels, index, expected in table:
            with self.subTest(levels=levels, index=index):
                settings = dataclasses.replace(self.settings, dialectic_pass_levels=levels)
                self.assertEqual(level_for_pass(settings, "high", index), expected)


class NoteTextTest(unittest.TestCase):
    def test_a_long_answer_is_cut_at_a_word_within_the_limit(self):
        text = "alpha beta gamma delta epsilon"
        # (limit, note): one word longer than the limit is cut inside it
        table = [(100, text), (len(text), text), (16, "alpha beta…"), (17, "alpha beta gamma…"),
                 (6, "alpha…"), (4, "alp…")]
        for limit, expected in table:
            with self.subTest(limit=limit):
                note = cut_note(text, limit)
                self.assertEqual(note, expected)
                self.assertLessEqual(len(note), limit)

    def test_a_note_is_kept_without_surrounding_space(self):
        self.assertEqual(cut_note("\n  The user likes tea.  \n", 600), "The user likes tea.")

    def test_a_strong_answer_is_long_and_has_several_lines(self):
        table = [(STRONG, True), (WEAK, False), ("x " * 400, False),  # long, one line
                 ("- a\n- b\n- c\n- d", False),  # structured, short
                 ("\n".join(["- " + "y" * 120] * 3), True),
                 ("\n\n".join(["- " + "y" * 200] * 2), False)]
        for answer, strong in table:
            with self.subTest(answer=answer[:30]):
                self.assertIs(is_strong(answer), strong)


class PromptsAndCallsTest(unittest.TestCase):
    def test_a_cold_turn_asks_who_the_user_is_and_a_warm_turn_what_matters_now(self):
        bench = DialecticBench(self)
        self.assertTrue(bench.turn(session=SESSION, base_known=False))
        self.assertTrue(bench.turn(session=OTHER, base_known=True))
        cold, warm = bench.queries()
        self.assertTrue(cold.startswith(COLD_QUESTION), cold)
        self.assertTrue(warm.startswith(WARM_QUESTION), warm)
        self.assertNotEqual(COLD_QUESTION, WARM_QUESTION)

    def test_the_question_carries_the_users_latest_message_bounded(self):
        bench = DialecticBench(self)
        bench.turn(text="I am moving to Lisbon next month")
        bench.turn(text="ж " * 20_000, session=OTHER)
        self.assertIn("I am moving to Lisbon next month", bench.queries()[0])
        self.assertIn("ж", bench.queries()[1])
        self.assertLessEqual(bench.queries()[1].count("ж"), LATEST_CHARS // 2)

    def test_an_unscoped_note_names_the_session_and_no_scope_nor_summary(self):
        bench = DialecticBench(self)
        bench.turn(summary="They planned a trip to Porto.")
        request = bench.fake.chat_requests[-1]
        self.assertEqual((request["peer"], request["target"], request["session_id"]),
                         ("agent-zero", "user", SESSION))
        self.assertNotIn("scope", request)
        self.assertNotIn("Porto", request["query"])  # Honcho reads the session itself

    def test_a_scoped_note_names_the_scope_and_no_session_and_carries_the_summary(self):
        bench = DialecticBench(self)
        bench.turn(scope="a0-alpha", summary="They planned a trip to Porto.")
        request = bench.fake.chat_requests[-1]
        self.assertEqual(request.get("scope"), "a0-alpha")
        self.assertNotIn("session_id", request)
        self.assertTrue(request["query"].startswith(WARM_QUESTION))
        self.assertIn("They planned a trip to Porto.", request["query"])

    def test_a_scoped_cold_question_without_a_summary_still_names_no_session(self):
        bench = DialecticBench(self)
        bench.turn(scope="a0-alpha", summary=None, base_known=False)
        request = bench.fake.chat_requests[-1]
        self.assertEqual(request.get("scope"), "a0-alpha")
        self.assertNotIn("session_id", request)
        self.assertEqual(bench.note(), "The user prefers green tea.")

    def test_an_sdk_without_scopes_asks_about_the_session(self):
        bench = DialecticBench(self, supports_scopes=False)
        bench.turn(scope="a0-alpha", summary="They planned a trip to Porto.")
        request = bench.fake.chat_requests[-1]
        self.assertEqual(request["session_id"], SESSION)
        self.assertNotIn("scope", request)

    def test_a_refused_scope_is_asked_again_about_the_session(self):
        bench = DialecticBench(self)
        bench.fake.dialectic_script.extend([403, WEAK])  # a key that is not workspace-level
        self.assertTrue(bench.turn(scope="a0-alpha"))
        scoped, unscoped = bench.fake.chat_requests
        self.assertEqual((scoped.get("scope"), scoped.get("session_id")), ("a0-alpha", None))
        self.assertEqual((unscoped.get("scope"), unscoped.get("session_id")), (None, SESSION))
        self.assertEqual(bench.note(), WEAK)
        self.assertEqual(bench.dialectic.counters()["unscoped"], 1)

    def test_each_chat_request_has_the_ask_timeout_not_the_clients(self):
        bench = DialecticBench(self, ask_timeout_s=45.0, sdk_timeout_s=3.0)
        bench.turn()
        self.assertEqual(bench.chat_timeouts, [45.0])

    def test_depth_makes_that_many_passes_each_at_its_level(self):
        for depth in (1, 2, 3):
            with self.subTest(depth=depth):
                bench = DialecticBench(self, dialectic_depth=depth,
                                       dialectic_pass_levels="minimal,medium")
                bench.fake.dialectic_script.extend(["first answer", "audited answer",
                                                    "reconciled answer"])
                bench.turn(text="short")
                requests = bench.fake.chat_requests
                self.assertEqual(len(requests), depth)
                self.assertEqual([r["reasoning_level"] for r in requests],
                                 ["minimal", "medium", "low"][:depth])
                self.assertEqual(bench.note(),
                                 ["first answer", "audited answer", "reconciled answer"][depth - 1])
                if depth >= 2:
                    self.assertTrue(requests[1]["query"].startswith(AUDIT_QUESTION))
                    self.assertIn("first answer", requests[1]["query"])
                if depth == 3:
                    self.assertTrue(requests[2]["query"].startswith(RECONCILE_QUESTION))
                    self.assertIn("first answer", requests[2]["query"])
                    self.assertIn("audited answer", requests[2]["query"])

    def test_every_pass_is_at_the_turns_level_without_pass_levels(self):
        bench = DialecticBench(self, dialectic_depth=3, dialectic_reasoning_level="minimal")
        bench.fake.dialectic_script.extend(["one", "two", "three"])
        bench.turn(text="x" * 400)
        self.assertEqual([r["reasoning_level"] for r in bench.fake.chat_requests], ["medium"] * 3)

    def test_a_strong_answer_ends_the_passes(self):
        table = [([STRONG], 1), ([WEAK, STRONG], 2), ([WEAK, WEAK, STRONG], 3),
                 ([WEAK, WEAK, WEAK], 3)]
        for answers, passes in table:
            with self.subTest(passes=passes):
                bench = DialecticBench(self, dialectic_depth=3, dialectic_max_chars=4_000)
                bench.fake.dialectic_script.extend(answers)
                bench.turn()
                self.assertEqual(len(bench.fake.chat_requests), passes)
                self.assertEqual(bench.note(), answers[passes - 1])

    def test_an_empty_answer_ends_the_passes_and_is_no_note(self):
        bench = DialecticBench(self, dialectic_depth=3)
        bench.fake.dialectic_answer = None  # Honcho knows nothing about the user yet
        bench.turn()
        self.assertEqual(len(bench.fake.chat_requests), 1)
        self.assertIsNone(bench.note())
        self.assertEqual(bench.dialectic.counters()["done"], 1)

    def test_the_note_is_cut_to_max_chars_at_a_word(self):
        bench = DialecticBench(self, dialectic_max_chars=100)
        bench.fake.dialectic_answer = ("The user writes Python every day and reviews pull requests"
                                       " at night. ") * 5
        bench.turn()
        note = bench.note()
        self.assertLessEqual(len(note), 100)
        self.assertTrue(note.endswith("…"))
        self.assertTrue(bench.fake.dialectic_answer.startswith(note[:-1]))
        # the cut fell between words
        self.assertEqual(bench.fake.dialectic_answer[len(note) - 1], " ")
        self.assertLessEqual(len(bench.note(settings=bench.with_(dialectic_max_chars=50))), 50)

    def test_every_query_stays_within_honchos_10000_characters(self):
        bench = DialecticBench(self, dialectic_depth=3)
        long_line = "word " * 8_000  # one line: never strong, so every pass runs
        bench.fake.dialectic_script.extend([long_line, long_line, long_line])
        bench.turn(text="m " * 20_000, scope="a0-alpha", summary="s " * 20_000)
        queries = bench.queries()
        self.assertEqual(len(queries), 3)
        for query, question in zip(queries, (WARM_QUESTION, AUDIT_QUESTION, RECONCILE_QUESTION),
                                   strict=True):
            self.assertLessEqual(len(query), QUERY_MAX_CHARS)
            self.assertTrue(query.startswith(question))
        self.assertEqual(QUERY_MAX_CHARS, 10_000)


class CadenceTest(unittest.TestCase):
    def test_a_note_is_asked_on_turn_one_then_every_cadence_turns(self):
        table = {1: list(range(1, 13)), 2: [1, 3, 5, 7, 9, 11], 5: [1, 6, 11], 20: [1]}
        for cadence, turns in table.items():
            with self.subTest(cadence=cadence):
                bench = DialecticBench(self, dialectic_cadence=cadence)
                started = [n for n in range(1, 13) if bench.turn()]
                self.assertEqual(started, turns)
                self.assertEqual(len(bench.fake.chat_requests), len(turns))
                self.assertEqual(bench.dialectic.counters()["started"], len(turns))

    def test_cadence_and_depth_together_make_exactly_the_expected_calls(self):
        bench = DialecticBench(self, dialectic_cadence=5, dialectic_depth=2)
        for _ in range(12):
            bench.turn()
        self.assertEqual(len(bench.fake.chat_requests), 3 * 2)

    def test_each_session_counts_its_own_turns(self):
        bench = DialecticBench(self, dialectic_cadence=2)
        started = [(session, bench.turn(session=session))
                   for session in (SESSION, OTHER, SESSION, SESSION, OTHER)]
        self.assertEqual(started, [(SESSION, True), (OTHER, True), (SESSION, False),
                                   (SESSION, True), (OTHER, False)])

    def test_with_the_dialectic_off_nothing_is_asked_nor_counted(self):
        bench = DialecticBench(self, dialectic_cadence=3)
        off = bench.with_(dialectic_enabled=False)
        self.assertEqual([bench.turn(settings=off) for _ in range(4)], [False] * 4)
        self.assertFalse(bench.dialectic.prewarm(off, OTHER, None, run_now))
        self.assertEqual(bench.fake.chat_requests, [])
        self.assertEqual(bench.fake.requests, [])
        self.assertTrue(bench.turn())  # switched on: this chat's first counted turn
        self.assertEqual(bench.note(), "The user prefers green tea.")
        self.assertIsNone(bench.note(settings=off))  # switched off again: no note is injected

    def test_a_session_starts_no_second_computation_while_one_is_in_flight(self):
        bench = DialecticBench(self, dialectic_cadence=1)
        held = Held()
        self.assertTrue(bench.turn(submit=held))
        self.assertFalse(bench.turn(submit=held))
        self.assertEqual(len(held.waiting), 1)
        held.run_next()
        self.assertTrue(bench.turn(submit=held))
        self.assertEqual(bench.dialectic.counters()["busy"], 1)

    def test_the_process_runs_at_most_max_running_computations(self):
        bench = DialecticBench(self)
        held = Held()
        sessions = [f"chat-Run{i:05d}" for i in range(MAX_RUNNING + 1)]
        started = [bench.turn(session=session, submit=held) for session in sessions]
        self.assertEqual(started, [True] * MAX_RUNNING + [False])
        self.assertEqual(bench.dialectic.counters()["running"], MAX_RUNNING)
        held.run_next()
        self.assertTrue(bench.turn(session="chat-Run99999", submit=held))

    def test_a_refused_submit_starts_nothing_and_leaves_the_session_free(self):
        bench = DialecticBench(self, dialectic_cadence=1)
        self.assertFalse(bench.turn(submit=refuse))
        counters = bench.dialectic.counters()
        self.assertEqual((counters["started"], counters["busy"], counters["running"]), (0, 1, 0))
        self.assertTrue(bench.turn())
        self.assertEqual(len(bench.fake.chat_requests), 1)

    def test_a_turn_returns_while_its_computation_waits_on_honcho(self):
        bench = DialecticBench(self)
        pool = ThreadPoolExecutor(1)
        self.addCleanup(pool.shutdown)
        bench.gate.clear()  # Honcho's dialectic does not answer until the gate opens
        self.assertTrue(bench.turn(submit=lambda work, *args: bool(pool.submit(work, *args))))
        self.assertIsNone(bench.note())
        bench.gate.set()
        pool.shutdown(wait=True)
        self.assertEqual(bench.note(), "The user prefers green tea.")

    def test_the_sessions_kept_are_bounded_by_the_cache_entries(self):
        bench = DialecticBench(self, cache_max_entries=2, dialectic_cadence=2)
        for session in (SESSION, OTHER, "chat-Dia30003"):
            self.assertTrue(bench.turn(session=session))
        self.assertIsNone(bench.note(session=SESSION))  # the least recently used session was let go
        self.assertIsNotNone(bench.note(session="chat-Dia30003"))
        self.assertTrue(bench.turn(session=SESSION))  # its count starts again: a first turn

    def test_a_note_belongs_to_its_workspace_and_peers(self):
        bench = DialecticBench(self)
        bench.turn()
        self.assertIsNotNone(bench.note())
        for change in ({"workspace_id": "elsewhere"}, {"user_peer_id": "someone-else"},
                       {"agent_peer_id": "another-agent"}, {"api_url": "https://other.test"}):
            with self.subTest(change=change):
                self.assertIsNone(bench.note(settings=bench.with_(**change)))


class PrewarmTest(unittest.TestCase):
    def test_prewarm_asks_the_general_question_at_the_configured_depth(self):
        bench = DialecticBench(self, dialectic_depth=2)
        bench.fake.dialectic_script.extend([WEAK, "audited"])
        self.assertTrue(bench.dialectic.prewarm(bench.settings, SESSION, None, run_now))
        queries = bench.queries()
        self.assertEqual(len(queries), 2)
        self.assertEqual(queries[0], COLD_QUESTION)  # a new chat: no message, nothing discussed yet
        self.assertEqual(bench.fake.chat_requests[0]["reasoning_level"], "low")
        self.assertEqual(bench.note(), "audited")
        counters = bench.dialectic.counters()
        self.assertEqual((counters["prewarms"], counters["started"], counters["done"]), (1, 1, 1))

    def test_prewarm_needs_the_dialectic_and_its_own_switch(self):
        for enabled, prewarm, expected in ((True, True, True), (True, False, False),
                                           (False, True, False)):
            with self.subTest(enabled=enabled, prewarm=prewarm):
                bench = DialecticBench(self)
                settings = bench.with_(dialectic_enabled=enabled, dialectic_prewarm=prewarm)
                self.assertIs(bench.dialectic.prewarm(settings, SESSION, None, run_now), expected)
                self.assertEqual(len(bench.fake.chat_requests), int(expected))

    def test_prewarms_start_at_most_one_per_interval_in_the_process(self):
        bench = DialecticBench(self)
        prewarm = bench.dialectic.prewarm
        self.assertTrue(prewarm(bench.settings, "chat-Pre00001", None, run_now))
        bench.clock.advance(PREWARM_INTERVAL_S - 0.5)
        self.assertFalse(prewarm(bench.settings, "chat-Pre00002", None, run_now))
        bench.clock.advance(0.5)
        # not started: no slot used
        self.assertFalse(prewarm(bench.settings, "chat-Pre00003", None, refuse))
        self.assertTrue(prewarm(bench.settings, "chat-Pre00004", None, run_now))
        self.assertEqual(bench.dialectic.counters()["prewarms"], 2)

    def test_prewarm_is_only_for_a_chat_without_turns(self):
        bench = DialecticBench(self)
        bench.turn()
        bench.clock.advance(PREWARM_INTERVAL_S)
        self.assertFalse(bench.dialectic.prewarm(bench.settings, SESSION, None, run_now))
        self.assertEqual(len(bench.fake.chat_requests), 1)

    def test_the_first_turn_takes_a_ready_prewarmed_note_and_asks_nothing(self):
        bench = DialecticBench(self, dialectic_cadence=2)
        bench.fake.dialectic_script.append("prewarmed")
        bench.dialectic.prewarm(bench.settings, SESSION, None, run_now)
        self.assertFalse(bench.turn())
        self.assertEqual(bench.note(), "prewarmed")
        self.assertFalse(bench.turn())
        self.assertTrue(bench.turn())  # turn 3: the cadence goes on from turn 1
        self.assertEqual(len(bench.fake.chat_requests), 2)

    def test_the_first_turn_asks_nothing_while_the_prewarm_is_in_flight(self):
        bench = DialecticBench(self)
        held = Held()
        self.assertTrue(bench.dialectic.prewarm(bench.settings, SESSION, None, held))
        self.assertFalse(bench.turn(submit=held))
        held.run_next()
        self.assertEqual(held.waiting, [])
        self.assertEqual(bench.note(), "The user prefers green tea.")
        self.assertEqual(len(bench.fake.chat_requests), 1)

    def test_the_first_turn_asks_itself_when_the_prewarm_failed(self):
        bench = DialecticBench(self)
        bench.fake.dialectic_script.append(500)
        self.assertTrue(bench.dialectic.prewarm(bench.settings, SESSION, "a0-alpha", run_now))
        self.assertIsNone(bench.note())
        self.assertTrue(bench.turn())
        self.assertEqual(bench.note(), "The user prefers green tea.")

    def test_a_scoped_prewarm_names_the_scope_and_no_session(self):
        bench = DialecticBench(self)
        bench.dialectic.prewarm(bench.settings, SESSION, "a0-alpha", run_now)
        request = bench.fake.chat_requests[-1]
        self.assertEqual(request.get("scope"), "a0-alpha")
        self.assertNotIn("session_id", request)


class FailureTest(unittest.TestCase):
    def test_a_failed_computation_keeps_the_old_note_and_is_counted(self):
        failures = {"server error": lambda fake: fake.dialectic_script.append(500),
                    "key refused": lambda fake: fake.dialectic_script.append(401),
                    "connection reset": lambda fake: fake.fail(r"/chat$", kind="reset"),
                    "timeout": lambda fake: fake.fail(r"/chat$", kind="timeout", after_store=True)}
        for name, fail in failures.items():
            with self.subTest(failure=name):
                bench = DialecticBench(self, dialectic_cadence=1)
                bench.fake.dialectic_script.append("the old note")
                bench.turn()
                fail(bench.fake)
                self.assertTrue(bench.turn())  # started; the failure stays in the background
                self.assertEqual(bench.note(), "the old note")
                counters = bench.dialectic.counters()
                self.assertEqual((counters["started"], counters["done"], counters["failed"],
                                  counters["running"]), (2, 1, 1, 0))
                self.assertTrue(bench.turn())  # the session is free again

    def test_a_failed_later_pass_keeps_the_answer_before_it(self):
        bench = DialecticBench(self, dialectic_depth=3)
        bench.fake.dialectic_script.extend(["first answer", 500])
        bench.turn()
        self.assertEqual(len(bench.fake.chat_requests), 2)
        self.assertEqual(bench.note(), "first answer")
        self.assertEqual(bench.dialectic.counters()["failed"], 1)

    def test_clear_forgets_the_notes_and_what_was_in_flight_is_not_kept(self):
        bench = DialecticBench(self)
        bench.turn(session=OTHER)
        held = Held()
        bench.turn(submit=held)
        self.assertEqual(bench.dialectic.clear(), 1)
        held.run_next()
        self.assertIsNone(bench.note())
        self.assertIsNone(bench.note(session=OTHER))
        self.assertTrue(bench.turn(session=OTHER))  # counted afresh: its next turn is a first turn


if __name__ == "__main__":
    unittest.main()
