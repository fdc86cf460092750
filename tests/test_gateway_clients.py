"""The gateway's SDK clients: retired only when no call uses them, refused for an unusable API URL,
and its per-client caches bounded. Real honcho.Honcho over the fake; real threads where senders
overlap."""

import gc
import re
import threading
import unittest
import weakref

import httpx
from delivery_helpers import KEY, with_api_url_problem
from fake_honcho import FakeHoncho
from outbox_helpers import temp_outbox_path

from honcho_hub.errors import HonchoRequestError, PermanentError
from honcho_hub.gateway.gateway import HonchoGateway, Message
from honcho_hub.settings.config import build_settings

WAIT_S = 10.0  # bound of every wait on another thread; the tests never need that long


def message(n: int, session: str) -> Message:
    return Message(id=f"ev_{session}_{n}", session_id=session, peer_id="user", role="user",
                   content=f"message {n}", created_at=1_700_000_000.0 + n)


class HeldFirstSession:
    """A fake whose first session get-or-create waits until the test releases it: a sender
    mid-request."""

    def __init__(self) -> None:
        self.fake = FakeHoncho()  # any key: the tests change it
        self._answer = self.fake.transport()
        self.entered, self.release = threading.Event(), threading.Event()
        self.clients: list[httpx.Client] = []
        self._held = False
        self._lock = threading.Lock()

    def http_client(self) -> httpx.Client:
        client = httpx.Client(transport=httpx.MockTransport(self._handle))
        self.clients.append(client)
        return client

    def _handle(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            hold = request.url.path.endswith("/sessions") and not self._held
            self._held = self._held or hold
        if hold:
            self.entered.set()
            self.release.wait(WAIT_S)
        return self._answer.handle_request(request)


class ClientRetirementTest(unittest.TestCase):
    def test_a_sender_mid_request_keeps_its_client_until_it_ends_whatever_retires_it(self):
        settings = build_settings({"outbox_path": temp_outbox_path(self),
                                   "api_url": "https://honcho.test"}, {}, {})
        for retire in ("key_change", "close"):
            with self.subTest(retired_by=retire):
                server, keys = HeldFirstSession(), ["key-one-0123456789"]
                # Bound as defaults: the gateway and the sender thread may outlive this iteration.
                gateway = HonchoGateway(settings.api_url, settings.workspace_id,
                                        lambda keys=keys: keys[0], 5.0,
                                        http_client_factory=server.http_client)
                self.addCleanup(gateway.close)
                outcome: list = []

                def first_sender(gateway=gateway, outcome=outcome):
                    try:
                        gateway.send([message(1, "chat-held"), message(2, "chat-held")])
                        outcome.append("delivered")
                    except HonchoRequestError as exc:
                        outcome.append(exc.code)

                sender = threading.Thread(target=first_sender)
                sender.start()
                self.assertTrue(server.entered.wait(WAIT_S), "the first sender reached the server")
                if retire == "key_change":
                    keys[0] = "key-two-0123456789"
                    # another sender, on a client with the new key
                    gateway.send([message(1, "chat-other")])
                else:
                    gateway.close()
                self.assertFalse(server.clients[0].is_closed, "the client is still in use")
                server.release.set()
                sender.join(WAIT_S)
                self.assertEqual(outcome, ["delivered"])
                self.assertEqual([m["content"] for m in server.fake.session_messages("chat-held")],
                                 ["message 1", "message 2"])
                self.assertTrue(server.clients[0].is_closed, "retired once its last call ended")


class ApiUrlProblemTest(unittest.TestCase):
    def test_every_call_is_refused_without_a_client_for_an_api_url_the_settings_could_not_use(self):
        clients: list[httpx.Client] = []
        fake = FakeHoncho(api_key=KEY)

        def client() -> httpx.Client:
            clients.append(httpx.Client(transport=fake.transport()))
            return clients[-1]

        settings = build_settings({"outbox_path": temp_outbox_path(self)},
                                  {"HONCHO_API_KEY": KEY}, {})
        broken = with_api_url_problem(settings, "HONCHO_API_URL: the port is not a number")
        gateway = HonchoGateway.for_settings(broken, http_client_factory=client)
        calls = {"send": lambda: gateway.send([message(1, "chat-u")]),
                 "context": lambda: gateway.context("chat-u", query="q", tokens=100,
                                                    target="user", perspective="agent"),
                 "call": lambda: gateway.call(lambda c: c.get_metadata()),
                 "reader_peer": lambda: gateway.reader_peer("user")}
        for name, call in calls.items():
            with self.subTest(call=name):
                with self.assertRaises(PermanentError) as caught:
                    call()
                self.assertEqual(caught.exception.code, "api_url_invalid")
        self.assertEqual((clients, fake.requests), ([], []),
                         "no client was built: the key went nowhere")
        usable = HonchoGateway.for_settings(settings, http_client_factory=client)
        usable.call(lambda c: c.get_metadata())
        usable.close()
        self.assertEqual(len(fake.requests), 1, "usable settings still reach Honcho")


class CacheBoundsTest(unittest.TestCase):
    def test_each_per_client_cache_stays_within_its_limit_and_forgetting_costs_only_requests(self):
        fake = FakeHoncho(api_key=KEY)
        gateway = HonchoGateway(
            "https://honcho.test", "agent-zero", lambda: KEY, 5.0, cache_limit=3,
            http_client_factory=lambda: httpx.Client(transport=fake.transport()),
            supports_scopes=lambda: True, peer_roles={"user": "user", "agent": "agent"})
        self.addCleanup(gateway.close)
        # The objects the gateway keeps, weakly: alive only while it keeps them. A session it
        # created to send is the one it reads through.
        objects: dict[str, list[weakref.ref]] = {"sessions": [], "readers": [], "peers": []}
        for n in range(10):
            gateway.send([message(1, f"chat-s{n}")])
            gateway.ensure_session_in_scope(f"chat-s{n}", f"scope-{n}")
            objects["sessions"].append(weakref.ref(gateway.reader_session(f"chat-s{n}")))
            objects["readers"].append(weakref.ref(gateway.reader_session(f"chat-r{n}")))
            objects["peers"].append(weakref.ref(gateway.reader_peer(f"peer-{n}")))
        gc.collect()
        kept = {name: sum(ref() is not None for ref in refs) for name, refs in objects.items()}
        self.assertTrue(all(0 < count <= 3 for count in kept.values()), kept)

        # Sessions with their peers, scopes and memberships cost a request when not known: the
        # newest is known, and of the newest four at least one was forgotten.
        made = {"sessions": r"/sessions$", "scopes": r"/scopes$",
                "memberships": r"/scopes/[^/]+/sessions$"}

        def requests() -> dict[str, int]:
            return {name: sum(1 for method, path in fake.requests
                              if method == "POST" and re.search(pattern, path))
                    for name, pattern in made.items()}

        def use(n: int) -> None:
            gateway.send([message(3, f"chat-s{n}")])
            gateway.ensure_session_in_scope(f"chat-s{n}", f"scope-{n}")
        before = requests()
        use(9)
        self.assertEqual(requests(), before, "the newest of each is known")
        for n in range(6, 10):
            use(n)
        after = requests()
        self.assertTrue(all(after[name] > before[name] for name in made), (before, after))
        gateway.send([message(2, "chat-s0")])  # forgotten long ago: ensured again, then delivered
        gateway.ensure_session_in_scope("chat-s0", "scope-0")
        self.assertEqual([m["content"] for m in fake.session_messages("chat-s0")],
                         ["message 1", "message 2"])
        self.assertEqual(fake.scopes[("agent-zero", "scope-0")], {"chat-s0"})

    def test_by_default_a_gateway_keeps_the_objects_of_at_most_256_sessions(self):
        # A long uptime opens chat after chat (the soak: thousands an hour), each a session of its
        # own; one kept to send and one kept to read cost about 2 KB together, so a bound of
        # 10,000 let memory grow for hours before it levelled off.
        fake = FakeHoncho(api_key=KEY)
        gateway = HonchoGateway(
            "https://honcho.test", "agent-zero", lambda: KEY, 5.0,
            http_client_factory=lambda: httpx.Client(transport=fake.transport()),
            peer_roles={"user": "user", "agent": "agent"})
        self.addCleanup(gateway.close)
        sent: list[weakref.ref] = []
        read: list[weakref.ref] = []
        for n in range(300):
            gateway.send([message(1, f"chat-s{n}")])
            sent.append(weakref.ref(gateway.reader_session(f"chat-s{n}")))
            read.append(weakref.ref(gateway.reader_session(f"chat-r{n}")))
        gc.collect()
        self.assertEqual((sum(ref() is not None for ref in sent),
                          sum(ref() is not None for ref in read)), (256, 256))


if __name__ == "__main__":
    unittest.main()
