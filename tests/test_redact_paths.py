"""Every corpus secret is kept from Honcho on each path that sends text: capture (the stored outbox
row), the honcho_memory tool's arguments and the recall query, driven through the real SDK over the
fake."""

import json
import os
import unittest

import httpx
import hub_testkit
from fake_honcho import FakeHoncho
from outbox_helpers import ManualClock, read_outbox, temp_outbox_path
from redact_corpus import secret_cases

from honcho_hub.capture.service import CaptureRequest, CaptureService, Outcome, Role
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.recall.recaller import Recaller
from honcho_hub.settings.config import build_settings
from honcho_hub.tool.actions import ActionContext, run_action

KEY = "hch-paths-key-97531"
CASES = secret_cases()
TEMPLATE = hub_testkit.checkout_text("prompts", "honcho.recall_block.md")


def leaked(case, text):
    return [part for part in case.parts if part in text]


class RecordingHoncho:
    """The fake Honcho behind a transport that keeps every request's URL and body as sent."""

    def __init__(self):
        self.fake = FakeHoncho(api_key=KEY)
        self.sent: list[str] = []
        inner = self.fake.transport()

        def record(request: httpx.Request) -> httpx.Response:
            self.sent.append(f"{request.url} {request.content.decode('utf-8', 'replace')}")
            return inner.handle_request(request)
        self.transport = httpx.MockTransport(record)

    def wire(self) -> str:
        # The SDK sends JSON: compare against the decoded text so an escaped character cannot hide a
        # part.
        return "\n".join(self.sent) + "\n" + json.dumps(self.sent, ensure_ascii=False)


class CapturePathTest(unittest.TestCase):
    def test_no_corpus_secret_reaches_the_outbox(self):
        path = temp_outbox_path(self)
        settings = build_settings({"outbox_path": path}, {}, {})
        clock = ManualClock()
        service = CaptureService(
            settings, clock=clock, monotonic=ManualClock(100.0),
            fallback_journal_folder=os.path.join(os.path.dirname(os.path.dirname(path)), "j"))
        self.addCleanup(service.close)
        for i, case in enumerate(CASES):
            self.assertEqual(service.capture(CaptureRequest("Ab3dE6gH", Role.USER, f"m{i}",
                                                            case.text),
                                             settings, case.host), Outcome.QUEUED)
        stored = [row[0] for row in read_outbox(path, "SELECT content FROM events ORDER BY seq")]
        self.assertEqual(len(stored), len(CASES))
        survivors = [(case.kind, case.text) for case, text in zip(CASES, stored, strict=True)
                     if leaked(case, text)]
        self.assertEqual(survivors, [])


class ToolArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.honcho = RecordingHoncho()
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(self)},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.gateway = HonchoGateway.for_settings(
            self.settings,
            http_client_factory=lambda: httpx.Client(transport=self.honcho.transport))

    def context(self, case, recalled):
        return ActionContext(settings=self.settings, session_id="chat-T0000001", secrets=case.host,
                             gateway=self.gateway, recall=lambda q, scope: recalled.append(q) or "",
                             supports_scopes=self.gateway.supports_scopes)

    def test_no_corpus_secret_reaches_honcho_through_any_text_argument(self):
        survivors = []
        for case in CASES:
            recalled = []
            ctx = self.context(case, recalled)
            self.honcho.sent.clear()
            results = [run_action("remember", {"content": case.text}, ctx),
                       run_action("search", {"query": case.text}, ctx),
                       run_action("search", {"query": case.text, "target": "workspace"}, ctx),
                       run_action("ask", {"query": case.text}, ctx),
                       run_action("recall", {"query": case.text}, ctx)]
            self.assertTrue(all(r.ok for r in results), [r.text for r in results if not r.ok])
            # the four remote verbs reached the server
            self.assertGreaterEqual(len(self.honcho.sent), 4)
            if leaked(case, self.honcho.wire() + "\n".join(recalled)):
                survivors.append((case.kind, case.text))
        self.assertEqual(survivors, [])


class RecallQueryTest(unittest.TestCase):
    def setUp(self):
        self.honcho = RecordingHoncho()
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "outbox_path": temp_outbox_path(self)},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.recaller = Recaller(lambda s: HonchoGateway.for_settings(
            s, s.recall_timeout_s,
            http_client_factory=lambda: httpx.Client(transport=self.honcho.transport)),
            monotonic=ManualClock(100.0))
        self.addCleanup(self.recaller.close)

    def survivors(self, cases):
        found, queries = [], 0
        for case in cases:
            self.honcho.sent.clear()
            self.recaller.recall(self.settings, "chat-Ab3dE6gH", case.text, TEMPLATE, None,
                                 wait_s=5)
            queries += sum("/sessions/chat-Ab3dE6gH/context?" in sent for sent in self.honcho.sent)
            if leaked(case, self.honcho.wire()):
                found.append((case.kind, case.text))
        # Queries that redact to one already asked are answered from the cache: most reach the
        # server.
        self.assertGreater(queries, len(cases) // 2)
        return found

    def test_no_corpus_secret_reaches_honcho_in_the_recall_query(self):
        # Host secrets are left out: Recaller.recall takes no secrets (see the next test); wrapped
        # keys too: the query is joined into one line before redaction (see the last test).
        cases = [c for c in CASES if not c.host and c.kind != "unicode_wrapped"]
        self.assertGreater(len(cases), 150)
        self.assertEqual(self.survivors(cases), [])

    def test_a_host_secret_in_another_case_is_kept_from_the_recall_query(self):
        # Agent Zero's masker (what the adapter passes as `mask`) replaces exact values only.
        case = next(c for c in CASES if c.kind == "host_secret_case")
        stored = case.host["DB"]
        self.honcho.sent.clear()
        self.recaller.recall(self.settings, "chat-Ab3dE6gH", case.text, TEMPLATE, None,
                             mask=lambda text: text.replace(stored, "§§secret(DB)"), wait_s=5,
                             secrets=case.host)
        self.assertEqual(leaked(case, self.honcho.wire()), [])

    def test_a_key_wrapped_across_two_lines_is_kept_from_the_recall_query(self):
        self.assertEqual(self.survivors([c for c in CASES if c.kind == "unicode_wrapped"]), [])


if __name__ == "__main__":
    unittest.main()
