"""Delivery against a real Honcho: session creation with observation settings, ordered
add_messages, the metadata-filter lookup reconciliation relies on, and how the server's refusals are
classified."""

import dataclasses
import random
import time
import unittest

from real_kit import (
    AGENT,
    USER,
    RealHonchoCase,
    await_derivation,
    conclusions_about,
    turns,
    user_turns,
)

# isort: split
from outbox_helpers import lease  # after real_kit, which puts tests/ on sys.path

from honcho_hub.delivery.batches import as_message, send_batch
from honcho_hub.delivery.worker import DeliveryWorker
from honcho_hub.errors import PermanentError
from honcho_hub.gateway.gateway import SOURCE
from honcho_hub.storage.outbox import LeasedEvent, NewEvent, Outbox


def stored(message, destination="contract", workspace_id="contract") -> NewEvent:
    """The outbox's event for a message the test would otherwise send itself."""
    return NewEvent(id=message.id, destination=destination, workspace_id=workspace_id,
                    session_id=message.session_id, peer_id=message.peer_id, role=message.role,
                    content=message.content, captured_at=message.created_at,
                    scope_id=message.scope_id)


def leased(message, error_code=None, ambiguous=False) -> LeasedEvent:
    """A message's event as the outbox leases it after a failed attempt with `error_code` (one after
    which Honcho may hold it when `ambiguous`)."""
    return LeasedEvent(**{**dataclasses.asdict(stored(message)), "ambiguous": ambiguous},
                       attempts=1 if error_code else 0, error_code=error_code)


def all_messages(gateway, session_id: str) -> list:
    """Every message of the session in Honcho's order, walking the pages."""
    page = gateway.call(lambda c: gateway.reader_session(session_id).messages(size=100))
    found = list(page.items)
    while page.has_next_page():
        page = gateway.call(lambda c, current=page: current.get_next_page())
        found.extend(page.items)
    return found


class SessionCreationTest(RealHonchoCase):
    def test_the_first_send_sets_both_peers_observation_settings(self):
        gateway = self.gateway()
        gateway.send(turns("chat-obs", ["I grow tomatoes on my balcony", "Nice."]))
        session = gateway.reader_session("chat-obs")
        self.assertEqual(sorted(p.id for p in gateway.call(lambda c: session.peers())),
                         sorted([USER, AGENT]))
        for peer, expected in ((USER, (True, True)), (AGENT, (False, True))):
            with self.subTest(peer=peer):
                # The lambda runs at once, within its own turn of the loop.
                config = gateway.call(lambda c: session.get_peer_configuration(peer))  # noqa: B023
                self.assertEqual((config.observe_me, config.observe_others), expected)

    def test_a_peer_first_seen_in_a_later_batch_joins_with_its_roles_settings(self):
        gateway = self.gateway()
        gateway.send(turns("chat-late-peer", ["first words"]))
        former = turns("chat-late-peer", ["x", "an older agent's reply"],
                        tag="former")[1]
        former = dataclasses.replace(former, peer_id="former-agent")
        gateway.send([former])
        config = gateway.call(lambda c: gateway.reader_session("chat-late-peer")
                              .get_peer_configuration("former-agent"))
        self.assertEqual((config.observe_me, config.observe_others), (False, True))

    def test_the_deriver_models_the_user_and_never_the_agent(self):
        gateway = self.gateway()
        gateway.send(turns("chat-model", ["I keep bees in the garden", "Bees are great.",
                                           "I sell the honey at the market", "Sounds lovely."]))
        about_user = await_derivation(
            gateway, "two conclusions of the agent about the user",
            until=lambda: (len(conclusions_about(gateway, AGENT, USER)) >= 2
                           and conclusions_about(gateway, AGENT, USER)))
        self.assertIn("user said: I keep bees in the garden", {c.content for c in about_user})
        await_derivation(gateway, "the deriver's queue to drain", session_id="chat-model")
        for observer in (USER, AGENT):
            with self.subTest(observer=observer):
                self.assertEqual(conclusions_about(gateway, observer, AGENT), [])


class OrderedMessagesTest(RealHonchoCase):
    quiet = True

    def test_a_batch_over_100_arrives_in_order_with_capture_time_and_event_metadata(self):
        gateway = self.gateway()
        sent = turns("chat-order", [f"line {i}: counting sheep" for i in range(130)])
        gateway.send(sent)  # two add_messages calls: 100, then 30
        stored = all_messages(gateway, "chat-order")
        self.assertEqual([m.content for m in stored], [e.content for e in sent])
        self.assertEqual([m.peer_id for m in stored], [e.peer_id for e in sent])
        self.assertEqual([m.created_at.timestamp() for m in stored], [e.created_at for e in sent])
        self.assertEqual([m.metadata for m in stored],
                         [{"event_id": e.id, "source": SOURCE, "role": e.role} for e in sent])


class ReconciliationLookupTest(RealHonchoCase):
    quiet = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        gateway = cls.class_gateway()
        cls.held = turns("chat-held", [f"held message {i}" for i in range(120)])
        gateway.send(cls.held)
        # The same event ids in another session must not count as held by this one.
        cls.elsewhere = user_turns("chat-elsewhere", ["stray"])
        gateway.send([dataclasses.replace(e, id="ev_only_elsewhere") for e in cls.elsewhere])

    def test_the_lookup_finds_exactly_the_held_event_ids(self):
        gateway = self.gateway()
        held_ids = [e.id for e in self.held]
        cases = {
            "all 120 held (two lookups of 100)": (held_ids, set(held_ids)),
            "held mixed with unknown": (held_ids[:3] + ["ev_unknown_1", "ev_unknown_2"],
                                        set(held_ids[:3])),
            "only unknown": (["ev_unknown_3"], set()),
            "held by another session only": (["ev_only_elsewhere"], set()),
            "none asked": ([], set()),
        }
        for name, (asked, expected) in cases.items():
            with self.subTest(name):
                self.assertEqual(gateway.existing_event_ids("chat-held", asked), expected)

    def test_after_an_ambiguous_failure_only_the_missing_events_are_sent(self):
        gateway = self.gateway()
        batch = turns("chat-reconcile", [f"reconcile {i}" for i in range(10)])
        gateway.send(batch[:6])  # the server stored these although the worker saw a timeout
        result = send_batch(gateway, [leased(e, "timeout", ambiguous=True) for e in batch])
        self.assertEqual((result.already_there, result.delivered, result.error),
                         ([e.id for e in batch[:6]], [e.id for e in batch[6:]], None))
        self.assertEqual([m.metadata["event_id"] for m in all_messages(gateway, "chat-reconcile")],
                         [e.id for e in batch])


class CrashRecoveryTest(RealHonchoCase):
    quiet = True

    def test_a_batch_the_server_stored_before_its_worker_died_is_reconciled_not_resent(self):
        clock = [time.time()]
        settings = self.settings()
        queued = [stored(m, settings.destination(), self.workspace_id)
                  for m in turns("chat-crash", [f"crash {i}" for i in range(8)])]
        box = Outbox(settings.outbox_path, clock=lambda: clock[0])
        self.addCleanup(box.close)
        box.enqueue_batches([queued])
        self.gateway().send([as_message(e) for e in lease(box, "dead-worker", 20, settings.lease_s,
                                                          settings.destination())])
        clock[0] += settings.lease_s + 1  # the dead worker's lease has expired
        survivor = DeliveryWorker(lambda: settings, clock=lambda: clock[0], rng=random.Random(5))
        self.addCleanup(survivor.stop, 10)
        self.assertEqual(survivor.drain(60)["delivered"], 8)
        self.assertEqual(survivor.state.metrics.reconciled, 8)
        self.assertEqual([m.metadata["event_id"]
                          for m in all_messages(self.gateway(), "chat-crash")],
                         [e.id for e in queued])


class ServerRefusalTest(RealHonchoCase):
    quiet = True

    def test_refusals_are_permanent_errors_with_a_sanitized_code(self):
        gateway = self.gateway()
        gateway.send(user_turns("chat-refusals", ["exists"]))
        message = lambda text: gateway.reader_peer(USER).message(text)  # noqa: E731
        cases = {
            "101 messages in one call": (
                lambda c: gateway.reader_session("chat-refusals").add_messages(
                    [message("m")] * 101), "http_422"),
            "an unknown session added to a scope": (
                lambda c: c.scope("refusals").add_sessions(["no-such-chat"]), "http_404"),
            "deleting an unknown conclusion": (
                lambda c: gateway.reader_peer(AGENT).conclusions_of(USER).delete(
                    "no-such-conclusion"), "http_404"),
            "a scope id with the reserved prefix (the SDK refuses it)": (
                lambda c: c.scope("scope.reserved"), "invalid"),
        }
        for name, (request, code) in cases.items():
            with self.subTest(name):
                with self.assertRaises(PermanentError) as caught:
                    gateway.call(request)
                self.assertEqual(caught.exception.code, code)

    def test_content_over_the_servers_limit_is_refused_before_any_request(self):
        gateway = self.gateway()
        too_long = user_turns("chat-too-long", ["x" * 25_001])
        with self.assertRaises(PermanentError) as caught:
            gateway.send(too_long)
        self.assertEqual(caught.exception.code, "invalid")
        self.assertEqual(all_messages(gateway, "chat-too-long"), [])

    def test_the_server_accepts_exactly_25000_characters(self):
        gateway = self.gateway()
        gateway.send(user_turns("chat-limit", ["y" * 25_000]))
        self.assertEqual([len(m.content) for m in all_messages(gateway, "chat-limit")], [25_000])


if __name__ == "__main__":
    unittest.main()
