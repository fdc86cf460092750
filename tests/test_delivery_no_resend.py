"""Delivery never resends a batch Honcho may already hold without first asking what it holds.

Each test drives one path that used to duplicate: a failed reconciliation, a lease recovered after a
crash, a settlement that met a locked outbox, a lease that expired while its batch was on the wire,
and a reconciliation that can never succeed. Real outbox, real SDK over the fake; no sleeps.
"""

import sqlite3
import threading
import unittest

from delivery_helpers import Bench
from outbox_helpers import enqueue, event, lease, settle

from honcho_hub import hub
from honcho_hub.delivery.batches import as_message
from honcho_hub.delivery.retry import RECONCILE_LIMIT
from honcho_hub.ops import operator as operations
from honcho_hub.ops.status import build_status
from honcho_hub.storage.outbox import Outbox, Retry, Settlement


def add_path(request) -> str | None:
    """The chat of an add-messages request, or None for any other request."""
    parts = request.url.path.split("/")
    if request.method == "POST" and parts[-1] == "messages" and parts[-3] == "sessions":
        return parts[-2].removeprefix("chat-")
    return None


def lock_while_answering(test, bench: Bench, chat: str) -> sqlite3.Connection:
    """Another writer takes the outbox's write lock when the chat's first batch reaches Honcho,
    and holds it until the test ends the returned connection's transaction."""
    other = sqlite3.connect(bench.path, isolation_level=None, check_same_thread=False)
    test.addCleanup(other.close)

    def lock(request) -> None:
        if add_path(request) == chat and not other.in_transaction:
            other.execute("BEGIN IMMEDIATE")

    bench.on_request = lock
    return other


def ambiguous_flags(bench: Bench) -> set:
    conn = sqlite3.connect(bench.path)
    try:
        return {row[0] for row in conn.execute(
            "SELECT ambiguous FROM events WHERE state = 'pending'")}
    finally:
        conn.close()


class FailedReconciliationTest(unittest.TestCase):
    def test_a_batch_stays_unsent_until_a_reconciliation_succeeds(self):
        bench = Bench(self)
        texts = bench.say("f1", 4)
        bench.fake.fail(status=502, after_store=True)  # stored, but the client hears a 502
        bench.worker.step()
        self.assertEqual(bench.adds("f1"), 1)
        for fault in ({"status": 503}, {"status": 429, "retry_after": "5"}, {"kind": "reset"}):
            with self.subTest(lookup_fails_with=fault):
                bench.fake.fail(match=r"/messages/list$", **fault)
                bench.clock.advance(3600)
                bench.worker.step()
                self.assertEqual(bench.adds("f1"), 1)  # never sent blind
                self.assertEqual(ambiguous_flags(bench), {1})
        bench.clock.advance(3600)
        bench.run_until_idle()
        bench.assert_exactly_once("f1", texts)
        self.assertEqual(bench.adds("f1"), 1)
        self.assertEqual(bench.worker.state.metrics.reconciled, 4)
        self.assertEqual(bench.worker.state.metrics.reconcile_failures, 3)

    def test_after_a_successful_reconciliation_only_what_honcho_lacks_is_sent(self):
        bench = Bench(self, batch_size=4)
        texts = bench.say("f2", 4)
        bench.fake.fail(status=500, after_store=True)
        bench.worker.step()
        del bench.fake.messages[-2:]  # as if the server stored only the first half before failing
        bench.clock.advance(3600)
        bench.run_until_idle()
        bench.assert_exactly_once("f2", texts)
        self.assertEqual(bench.worker.state.metrics.reconciled, 2)
        self.assertEqual(ambiguous_flags(bench), set())


class RecoveredLeaseTest(unittest.TestCase):
    def test_a_lease_left_by_a_crashed_worker_is_reconciled_before_anything_is_sent(self):
        bench = Bench(self)
        texts = bench.say("c1", 5)
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        batch = lease(box, "crashed-worker", 20, bench.settings.lease_s,
                      bench.settings.destination())
        gateway = bench.gateway(bench.settings)
        self.addCleanup(gateway.close)
        # Honcho stored it; the worker died before recording that
        gateway.send([as_message(e) for e in batch])
        bench.clock.advance(bench.settings.lease_s + 1)
        bench.run_until_idle()
        bench.assert_exactly_once("c1", texts)
        self.assertEqual(bench.adds("c1"), 1)
        self.assertEqual(bench.worker.state.metrics.reconciled, 5)

    def test_recovered_rows_are_marked_ambiguous_in_the_outbox(self):
        bench = Bench(self)
        bench.say("c2", 2)
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        lease(box, "crashed-worker", 20, 30, bench.settings.destination())
        self.assertEqual(bench.states(), {"leased": 2})
        bench.clock.advance(31)
        settle(box, "next", Settlement())  # every settlement returns expired leases to pending
        self.assertEqual(bench.states(), {"pending": 2})
        self.assertEqual(ambiguous_flags(bench), {1})
        batch = lease(box, "next", 20, 30, bench.settings.destination())
        self.assertEqual(len(batch), 2)
        self.assertTrue(all(e.ambiguous for e in batch))


class FailedSettlementTest(unittest.TestCase):
    def test_a_settlement_that_meets_a_locked_outbox_is_retried_and_nothing_is_resent(self):
        waits: list[float] = []
        bench = Bench(self, worker_options={"busy_timeout_s": 0.01,
                                            "settle_sleep": lambda s: release(s)})
        texts = bench.say("l1", 3)
        other = lock_while_answering(self, bench, "l1")

        def release(seconds: float) -> bool:
            waits.append(seconds)
            if len(waits) == 2:
                other.execute("ROLLBACK")
            return False

        report = bench.worker.step()
        self.assertEqual(len(waits), 2)  # two failed settlements, then the third one went through
        self.assertEqual(report.delivered, 3)
        bench.on_request = None
        self.assertEqual(bench.states(), {"delivered": 3})
        bench.clock.advance(bench.settings.lease_s + 1)
        bench.run_until_idle()
        bench.assert_exactly_once("l1", texts)
        self.assertEqual(bench.adds("l1"), 1)

    def test_a_stop_while_the_outbox_stays_locked_ends_the_step_and_rows_are_reconciled_later(self):
        bench = Bench(self, worker_options={"busy_timeout_s": 0.01,
                                            "settle_sleep": lambda s: stop_now(s)})
        texts = bench.say("l2", 3)
        other = lock_while_answering(self, bench, "l2")

        def stop_now(seconds: float) -> bool:
            # asked to stop while its settlement waits (on its own thread: no join)
            bench.worker.stop()
            return True

        bench.worker.start()
        # the step ends: the settlement is given up because a stop was requested
        bench.worker.join(30)
        self.assertFalse(bench.worker.is_alive())
        other.execute("ROLLBACK")
        bench.on_request = None
        self.assertEqual(bench.states(), {"leased": 3})
        bench.clock.advance(bench.settings.lease_s + 1)
        survivor = bench.new_worker()
        while survivor.step().leased:
            pass
        bench.assert_exactly_once("l2", texts)
        self.assertEqual(bench.adds("l2"), 1)


    def test_stop_ends_a_running_worker_whose_settlement_keeps_meeting_a_locked_outbox(self):
        bench = Bench(self, worker_options={"busy_timeout_s": 0.01})
        bench.say("l3", 2)
        other = lock_while_answering(self, bench, "l3")
        answered = threading.Event()
        hold = bench.on_request
        bench.on_request = lambda request: (hold(request), answered.set())
        bench.worker.start()
        self.assertTrue(answered.wait(30))
        # the settlement retries stop; nothing waits for the lock
        self.assertTrue(bench.worker.stop(10))
        self.assertTrue(other.in_transaction)
        other.execute("ROLLBACK")
        self.assertEqual(bench.states(), {"leased": 2})


class LeaseOnTheWireTest(unittest.TestCase):
    def test_leases_of_a_batch_still_on_the_wire_are_renewed_so_no_other_worker_takes_it(self):
        bench = Bench(self, batch_size=2, concurrency=2)
        slow = bench.say("w1", 2)
        fast = bench.say("w2", 4)
        lease_s = bench.settings.lease_s
        other = bench.new_worker()
        release_slow = threading.Event()
        seen = {"w2": 0}
        taken_over: list[int] = []

        def script(request) -> None:
            chat = add_path(request)
            if chat == "w1":
                # on the wire until the other worker has looked
                self.assertTrue(release_slow.wait(30))
            elif chat == "w2":
                seen["w2"] += 1
                if seen["w2"] == 1:  # the first fast batch: time passes past a third of the lease
                    bench.clock.advance(lease_s / 2)
                    bench.mono.advance(lease_s / 2)
                elif seen["w2"] == 2:
                    # leased after that settlement: the slow lease's first expiry has passed
                    bench.clock.advance(lease_s * 0.6)
                    bench.mono.advance(lease_s * 0.6)
                    bench.on_request = None
                    taken_over.append(other.step().leased)
                    release_slow.set()

        bench.on_request = script
        bench.worker.step()
        self.assertEqual(taken_over, [0])
        bench.run_until_idle()
        bench.assert_exactly_once("w1", slow)
        bench.assert_exactly_once("w2", fast)

    def test_a_worker_whose_lease_was_taken_over_cannot_release_the_new_holders_rows(self):
        bench = Bench(self)
        bench.say("w3", 2)
        box = Outbox(bench.path, clock=bench.clock)
        self.addCleanup(box.close)
        destination = bench.settings.destination()
        first = box.settle_and_lease(Settlement(), "first", 1, 20, 30, destination)[0]
        bench.clock.advance(31)
        second = box.settle_and_lease(Settlement(), "second", 1, 20, 30, destination)[0]
        self.assertEqual([e.id for e in second], [e.id for e in first])
        late = Settlement(dead=[(first[0].id, "http_422")],
                          retries=[Retry([e.id for e in first], bench.clock.now, "http_503", True)])
        box.settle_and_lease(late, "first", 0, 20, 30, destination)
        self.assertEqual(bench.states(), {"leased": 2})
        self.assertEqual(lease(box, "third", 20, 30, destination), [])


def ambiguous_chat(bench: Bench, chat: str, count: int) -> list[str]:
    """`count` messages of `chat` that Honcho stored though their answer was lost (a 500 after
    the store)."""
    texts = bench.say(chat, count)
    bench.fake.fail(status=500, after_store=True)
    bench.worker.step()
    return texts


def steps(bench: Bench, count: int, every_s: float) -> None:
    """`count` worker steps, `every_s` apart on the bench's clock."""
    for _ in range(count):
        bench.clock.advance(every_s)
        bench.worker.step()


class UnreconcilableTest(unittest.TestCase):
    def test_a_server_without_id_lookups_dead_letters_after_bounded_tries_retry_dead_applies(self):
        bench = Bench(self)
        texts = ambiguous_chat(bench, "u1", 3)
        bench.fake.fail(match=r"/messages/list$", status=422, times=100)  # no metadata filters here
        steps(bench, 10, every_s=3600)
        self.assertEqual(bench.states(), {"dead": 3})
        self.assertEqual({r[3] for r in bench.rows()}, {"unreconcilable"})
        status = build_status(bench.settings, hub.current().status_parts(bench.settings),
                              bench.clock.now)
        self.assertEqual(status["queue"]["dead_by_code"], {"unreconcilable": 3})
        self.assertIn("3 dead letters (3 unreconcilable)", status["health_reasons"])
        self.assertEqual(bench.adds("u1"), 1)
        self.assertEqual(bench.fake.count("/sessions/chat-u1/messages/list"), 3)
        bench.fake.faults.clear()
        self.assertEqual(
            operations.retry_dead(bench.settings, hub.current().worker())["requeued"], 3)
        bench.run_until_idle()
        bench.assert_exactly_once("u1", texts)
        self.assertEqual(bench.adds("u1"), 1)

    def test_an_add_only_key_dead_letters_its_chat_after_bounded_lookups_other_chats_deliver(self):
        bench = Bench(self)
        ambiguous_chat(bench, "u2", 3)
        bench.fake.fail(match=r"/sessions/chat-u2/messages/list$", status=403, times=100)
        bench.clock.advance(3600)
        bench.worker.step()  # the first refused lookup
        later = bench.say("u3", 2)  # another chat, captured afterwards
        steps(bench, 10, every_s=3600)
        bench.assert_exactly_once("u3", later)
        self.assertEqual(bench.worker.state.snapshot()["circuits"], {})
        self.assertEqual(bench.fake.count("/sessions/chat-u2/messages/list"), RECONCILE_LIMIT)
        self.assertEqual({r[3] for r in bench.rows() if r[1] == "dead"}, {"unreconcilable"})
        self.assertEqual(bench.states(), {"dead": 3, "delivered": 2})
        self.assertEqual(bench.adds("u2"), 1)

    def test_a_lookup_refused_with_adds_too_waits_for_the_key_and_dead_letters_nothing(self):
        bench = Bench(self)
        first = ambiguous_chat(bench, "u4", 2)
        second = bench.say("u5", 2)
        bench.fake.fail(match="", status=403, times=1000)  # the key may do nothing here for now
        steps(bench, 10, every_s=61)
        self.assertEqual(bench.states(), {"pending": 4})
        self.assertEqual(
            bench.worker.state.snapshot()["circuits"][bench.settings.destination()]["kind"], "auth")
        bench.fake.faults.clear()  # the key may add and list again
        bench.clock.advance(61)
        bench.run_until_idle()
        bench.assert_exactly_once("u4", first)
        bench.assert_exactly_once("u5", second)
        self.assertEqual(bench.adds("u4"), 1)

    def test_a_lookup_refused_for_a_bad_key_opens_the_auth_circuit_and_dead_letters_nothing(self):
        bench = Bench(self)
        texts = ambiguous_chat(bench, "u6", 2)
        bench.fake.fail(match=r"/messages/list$", status=401, times=1000)
        steps(bench, 10, every_s=61)
        self.assertEqual(bench.states(), {"pending": 2})
        self.assertEqual(
            bench.worker.state.snapshot()["circuits"][bench.settings.destination()]["kind"], "auth")
        bench.fake.faults.clear()
        bench.clock.advance(61)
        bench.run_until_idle()
        bench.assert_exactly_once("u6", texts)
        self.assertEqual(bench.adds("u6"), 1)


class RowBoundTest(unittest.TestCase):
    def test_the_bound_holds_after_the_table_emptied_and_row_numbers_restarted(self):
        bench = Bench(self, max_queued_rows=100)
        # one long-lived outbox, as capture keeps
        box = Outbox(bench.path, clock=bench.clock, max_rows=100)
        self.addCleanup(box.close)
        # busy days: rows delivered today stay a day, so row numbers keep growing
        for day in range(5):
            box.enqueue_batches([[event(n, f"chat-day{day}", dest=bench.settings.destination())]
                                 for n in range(60)])
            bench.run_until_idle()
            bench.clock.advance(60)
            box.prune(90)
        # a quiet weekend: everything delivered is pruned, the table is empty
        bench.clock.advance(600)
        box.prune(90)
        self.assertEqual(bench.states(), {})
        results = [enqueue(box, [event(n, "chat-outage")]) for n in range(150)]
        self.assertEqual(sum(r.inserted for r in results), 100)
        self.assertEqual(sum(r.refused for r in results), 50)

if __name__ == "__main__":
    unittest.main()
