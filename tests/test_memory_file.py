"""The memory file (honcho_hub/ops/memory_file.py) against the fake Honcho, with a real outbox file:
export's shape in JSON and Markdown (card, conclusions with level, session, chats and time, the
local record of writes, the chat -> session map), nothing secret in it and every outside string as
data; import creating only what is missing, a dry run sending no write, a second run creating
nothing; bad files refused whole with a clear reason; every request within its deadline; the
command line's export and import."""

import asyncio
import contextlib
import dataclasses
import io
import json
import os
import re
import tempfile
import unittest
from datetime import UTC, datetime, timedelta

import httpx
from api_world import api_handler, api_world
from fake_honcho import FakeHoncho
from loopback import serve
from outbox_helpers import ManualClock, event, temp_outbox_path

from honcho_hub.cli import main as cli
from honcho_hub.errors import MemoryFileError
from honcho_hub.gateway.gateway import HonchoGateway
from honcho_hub.ops import memory_file
from honcho_hub.settings.config import build_settings
from honcho_hub.storage import memory_log
from honcho_hub.storage.db import Database
from honcho_hub.storage.memory_log import MemoryWrite, WriteKind
from honcho_hub.storage.outbox import Outbox
from honcho_hub.tool.actions import ActionContext

KEY = "hch-export-key-24680"
LEAKED = "ghp_" + "Q1w2E3r4T5" * 4  # a real-looking GitHub token
HOST_SECRET = "pa55-w0rd-xyz"  # a value the host knows as the secret DB_PASS
QUEUED = "queued words nobody may export"
NOW = 1_800_000_000.0
CREATED = datetime(2026, 1, 1, tzinfo=UTC)
WS = "agent-zero"
# Markup a conclusion, a fact or a chat id could hold.
MARKUP = ("<img src=x onerror=alert(1)> [link](javascript:alert(1)) **bold** `code` "
          "\n## Forged section\n- forged item | cell | ![i](x) &amp; www.example.com")


class SlowBody(httpx.SyncByteStream):
    """An answer's body that takes `step_s` on the manual clock to arrive."""

    def __init__(self, body, clock, step_s):
        self.body, self.clock, self.step_s = body, clock, step_s

    def __iter__(self):
        self.clock.advance(self.step_s)
        yield self.body


class Bench:
    """An export/import as the inspector and the command line run it: the tool's context (settings
    with a real outbox file, the host's secrets and masker, a gateway over the fake Honcho), a
    monotonic clock the transport may move. Requests are kept to check what was sent."""

    def __init__(self, test, fake=None, workspace_id=WS, **plugin):
        self.fake = fake or FakeHoncho(api_key=KEY)
        self.sent: list[tuple[str, str, bytes]] = []
        self.clock = ManualClock(1_000.0)
        self.step_s = 0.0  # how far each request moves the monotonic clock
        self.settings = build_settings({"api_url": "https://honcho.test",
                                        "workspace_id": workspace_id,
                                        "outbox_path": temp_outbox_path(test), **plugin},
                                       {"HONCHO_API_KEY": KEY}, {})
        answer = self.fake.transport()

        def kept(request):
            self.sent.append((request.method, request.url.path, request.content))
            got = answer.handle_request(request)
            return httpx.Response(got.status_code, headers=got.headers,
                                  stream=SlowBody(got.read(), self.clock, self.step_s))
        gateway = HonchoGateway.for_settings(
            self.settings,
            http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(kept)))
        test.addCleanup(gateway.close)
        self.ctx = ActionContext(
            settings=self.settings, secrets={"DB_PASS": HOST_SECRET},
            mask=lambda text: text.replace(HOST_SECRET, "§§secret(DB_PASS)"), gateway=gateway,
            monotonic=self.clock)
        self.ws = workspace_id

    def peers_seen(self):
        for peer in ("agent-zero", "user"):
            self.fake.ensure_peer(self.ws, peer)

    def conclusion(self, content, session_id=None, level=None, observer="agent-zero"):
        cid = f"c{len(self.fake.conclusions) + 1:04d}"
        self.fake.conclusions[cid] = {
            "id": cid, "content": content, "observer_id": observer, "observed_id": "user",
            "session_id": session_id, "workspace_id": self.ws,
            "created_at": (CREATED + timedelta(seconds=len(self.fake.conclusions))).isoformat(),
            **({"level": level} if level else {})}
        return cid

    def captured(self, chat_id, session_id, content=QUEUED):
        """A message of `chat_id` captured into `session_id`, still queued: the outbox's local
        chat -> session mapping."""
        box = Outbox.for_settings(self.settings)
        try:
            box.enqueue_batches([[dataclasses.replace(
                event(1, session_id, content=content, dest=self.settings.destination()),
                chat_id=chat_id)]])
        finally:
            box.close()

    def keep(self, write):
        db = Database.for_settings(self.settings, clock=lambda: NOW)
        try:
            memory_log.record(db, write)
        finally:
            db.close()

    def writes_sent(self):
        return [(verb, path) for verb, path, _ in self.sent
                if (verb, path.rsplit("/", 1)[-1]) in {("POST", "conclusions"), ("PUT", "card")}]

    def listed(self):
        return sorted(c["content"] for c in self.fake.conclusions.values()
                      if c["workspace_id"] == self.ws)


class ExportShapeTest(unittest.TestCase):
    def setUp(self):
        self.b = b = Bench(self)
        b.peers_seen()
        b.fake.cards[("agent-zero", "user")] = ["IDENTITY: Ada", "ATTRIBUTE: Keeps two boats"]
        self.explicit = b.conclusion("The user keeps two boats", "chat-T1")
        self.derived = b.conclusion("The user likes the sea", None, "deductive")
        b.captured("T1", "chat-T1")
        b.keep(MemoryWrite("c0099", WriteKind.REMEMBER, "The user's boat is Wren",
                           b.settings.destination(), "agent-zero", "user", "chat-T1", None))
        b.keep(MemoryWrite("card", WriteKind.PROFILE,
                           json.dumps({"card": ["IDENTITY: Ada"], "replaced": []}),
                           b.settings.destination(), "agent-zero", "user", None, None))

    def test_json_holds_the_card_conclusions_writes_and_chat_map(self):
        doc = memory_file.export_memory(self.b.ctx, now=NOW)
        self.assertEqual({k: doc[k] for k in ("format", "version", "exported_at", "workspace_id",
                                              "observer", "observed", "complete", "problems")},
                         {"format": memory_file.FORMAT, "version": 1,
                          "exported_at": "2027-01-15T08:00:00+00:00", "workspace_id": WS,
                          "observer": "agent-zero", "observed": "user", "complete": True,
                          "problems": []})
        self.assertEqual(doc["card"], ["IDENTITY: Ada", "ATTRIBUTE: Keeps two boats"])
        self.assertEqual(doc["conclusions"], [
            {"id": self.derived, "text": "The user likes the sea", "level": "deductive",
             "session_id": None, "chats": [], "created_at": "2026-01-01T00:00:01+00:00",
             "source_ids": []},
            {"id": self.explicit, "text": "The user keeps two boats", "level": "explicit",
             "session_id": "chat-T1", "chats": ["T1"], "created_at": "2026-01-01T00:00:00+00:00",
             "source_ids": []}])
        self.assertEqual(doc["memory_writes"], [
            {"kind": "profile", "id": "card", "at": "2027-01-15T08:00:00+00:00",
             "session_id": None, "scope_id": None, "text": None,
             "card": ["IDENTITY: Ada"], "replaced": []},
            {"kind": "remember", "id": "c0099", "at": "2027-01-15T08:00:00+00:00",
             "session_id": "chat-T1", "scope_id": None, "text": "The user's boat is Wren"}])
        [mapping] = doc["chat_sessions"]
        self.assertEqual({k: mapping[k] for k in ("chat_id", "project", "session_id")},
                         {"chat_id": "T1", "project": None, "session_id": "chat-T1"})
        self.assertRegex(mapping["first_captured_at"], r"^\d{4}-\d\d-\d\dT")
        self.assertEqual(json.loads(memory_file.as_json(doc)), doc)

    def test_neither_format_holds_a_key_the_outbox_path_queued_text_or_a_secret(self):
        b = self.b
        b.conclusion(f"The user deploys with {LEAKED} and {HOST_SECRET}", "chat-T1")
        b.fake.cards[("agent-zero", "user")] = [f"ATTRIBUTE: token {LEAKED}"]
        doc = memory_file.export_memory(b.ctx, now=NOW)
        for text in (memory_file.as_json(doc), memory_file.as_markdown(doc)):
            for secret in (KEY, LEAKED, HOST_SECRET, b.settings.outbox_path,
                           os.path.dirname(b.settings.outbox_path), QUEUED):
                self.assertNotIn(secret, text)
        self.assertIn("The user deploys with [REDACTED:github_token] and [secret-ref:DB_PASS]",
                      [c["text"] for c in doc["conclusions"]])

    def test_a_text_that_cannot_be_made_safe_is_left_out_and_said_so(self):
        self.b.ctx.mask = lambda text: 1 / 0  # the host's masker failing: fail closed
        doc = memory_file.export_memory(self.b.ctx, now=NOW)
        self.assertEqual({c["text"] for c in doc["conclusions"]}, {None})
        self.assertEqual((doc["card"], doc["complete"], doc["problems"]),
                         ([], False, [{"part": "card", "error": "hidden", "count": 2},
                                      {"part": "conclusions", "error": "hidden", "count": 2}]))
        self.assertNotIn("boats", memory_file.as_json(doc) + memory_file.as_markdown(doc))
        self.assertIn("(text hidden: not made safe)", memory_file.as_markdown(doc))

    def test_markdown_lists_each_part_and_shows_every_outside_string_as_text(self):
        b = self.b
        cid = b.conclusion(MARKUP, "chat-T1")
        b.fake.cards[("agent-zero", "user")] = [MARKUP]
        b.captured("<b>chat</b>", "chat-x")
        md = memory_file.as_markdown(memory_file.export_memory(b.ctx, now=NOW))
        headings = [line for line in md.splitlines() if line.startswith("#")]
        self.assertEqual(headings, ["# Honcho memory export",
                                    "## The agent's card of the user (1 fact)",
                                    "## Conclusions (3)",
                                    "## Memory writes kept locally (2)",
                                    "## Chats and their Honcho sessions (2)"])
        # Every line is ours: a heading, a note, an item, an item's detail, or blank.
        for line in md.splitlines():
            self.assertRegex(line, r"^(#{1,2} |- |  - |_|$|Exported )", line)
        # Outside markup is inert: each character that could open markup is escaped.
        for line in md.splitlines():
            if "img src" in line or "b\\>chat" in line:
                bare = re.sub(r"\\[!-/:-@\[-`{-~]|`[A-Za-z0-9_-]+`", "",
                              line.removeprefix("- ").removeprefix("  - "))
                self.assertNotRegex(bare, r"[<>\[\]()*_`#|!&]", line)
        self.assertIn(f"`{cid}`", md)
        self.assertNotIn("\n## Forged section", md)


class ExportBoundsTest(unittest.TestCase):
    def test_every_page_is_walked_up_to_the_limit_and_a_cut_export_says_so(self):
        b = Bench(self)
        b.peers_seen()
        made = [b.conclusion(f"fact {n}") for n in range(230)]
        doc = memory_file.export_memory(b.ctx, now=NOW)
        self.assertEqual(([c["id"] for c in doc["conclusions"]], doc["complete"]),
                         (made[::-1], True))
        self.assertEqual(len([p for v, p, _ in b.sent if p.endswith("/conclusions/list")]), 3)
        cut = memory_file.export_memory(b.ctx, now=NOW, limit=150)
        self.assertEqual((len(cut["conclusions"]), cut["complete"], cut["problems"]),
                         (150, False, [{"part": "conclusions", "error": "too_many",
                                        "total": 230}]))

    def test_a_part_honcho_cannot_give_is_named_and_the_rest_is_exported(self):
        b = Bench(self)
        b.peers_seen()
        b.conclusion("The user sails")
        b.fake.fail(match=r"/card$", status=500)
        doc = memory_file.export_memory(b.ctx, now=NOW)
        self.assertEqual((doc["complete"], doc["problems"], doc["card"]),
                         (False, [{"part": "card", "error": "http_500"}], []))
        self.assertEqual([c["text"] for c in doc["conclusions"]], ["The user sails"])
        self.assertIn("incomplete", memory_file.as_markdown(doc))

    def test_each_request_has_its_own_deadline_and_the_whole_export_one_too(self):
        b = Bench(self, sdk_timeout_s=5.0)  # a request's deadline: 10 s
        b.peers_seen()
        for n in range(700):
            b.conclusion(f"fact {n}")
        memory_file.export_memory(b.ctx, now=NOW)  # the client's workspace request made
        b.step_s = 9.0  # each answer takes 9 s: within a request's deadline
        doc = memory_file.export_memory(b.ctx, now=NOW)
        self.assertEqual(len(doc["conclusions"]), 700)
        b.step_s = 11.0  # past it: the listing stops at its first page
        doc = memory_file.export_memory(b.ctx, now=NOW)
        self.assertEqual((len(doc["conclusions"]), doc["problems"]),
                         (0, [{"part": "card", "error": "timed_out"},
                              {"part": "conclusions", "error": "timed_out"}]))
        b.step_s = 9.0
        doc = memory_file.export_memory(b.ctx, now=NOW, run_deadline_s=30.0)
        self.assertEqual(doc["problems"], [{"part": "conclusions", "error": "timed_out"}])
        self.assertEqual(len(doc["conclusions"]), 200)  # two pages within 30 s, card first


def exported(test, contents, card=(), workspace_id="source-ws", **levels):
    """The JSON text of an export of a workspace holding `contents` and `card`."""
    b = Bench(test, workspace_id=workspace_id)
    b.peers_seen()
    for text in contents:
        b.conclusion(text, "chat-T1", levels.get(text))
    b.fake.cards[("agent-zero", "user")] = list(card)
    return memory_file.as_json(memory_file.export_memory(b.ctx, now=NOW))


class ImportTest(unittest.TestCase):
    def setUp(self):
        self.b = Bench(self, workspace_id="fresh-ws")

    def test_a_dry_run_says_what_it_would_do_and_writes_nothing(self):
        text = exported(self, ["The user sails", "The user keeps bees"], ["IDENTITY: Ada"])
        report = memory_file.import_memory(self.b.ctx, memory_file.parse(text), dry_run=True)
        self.assertEqual({k: report[k] for k in ("ok", "state", "in_file", "to_create", "created",
                                                 "already", "card_to_add", "card_added")},
                         {"ok": True, "state": "dry_run", "in_file": 2, "to_create": 2,
                          "created": 0, "already": 0, "card_to_add": 1, "card_added": 0})
        self.assertEqual(self.b.writes_sent(), [])
        self.assertEqual(self.b.fake.sessions, {})
        said = memory_file.report_text(report)
        self.assertIn("Dry run: would create 2 conclusions", said)
        self.assertIn("explicit", said)
        self.assertIn(memory_file.IMPORT_SESSION, said)

    def test_import_creates_what_is_missing_and_a_second_run_creates_nothing(self):
        b = self.b
        b.peers_seen()
        b.conclusion("the user   SAILS")  # already there, written differently
        text = exported(self, ["The user sails", "The user keeps bees", "The user keeps bees ",
                               "The user doubts it"], ["IDENTITY: Ada", "ATTRIBUTE: sails"],
                        **{"The user doubts it": "contradiction"})
        b.fake.cards[("agent-zero", "user")] = ["identity:  ada"]
        read = memory_file.parse(text)
        report = memory_file.import_memory(b.ctx, read)
        self.assertEqual({k: report[k] for k in ("ok", "state", "in_file", "duplicates",
                                                 "already", "created", "card_added")},
                         {"ok": True, "state": "done", "in_file": 4, "duplicates": 1,
                          "already": 1, "created": 2, "card_added": 1})
        self.assertEqual(b.listed(), ["The user doubts it", "The user keeps bees",
                                      "the user   SAILS"])
        self.assertEqual({c["session_id"] for c in b.fake.conclusions.values()
                          if c["content"] != "the user   SAILS"}, {memory_file.IMPORT_SESSION})
        self.assertIn(memory_file.IMPORT_SESSION,
                      {sid for ws, sid in b.fake.sessions if ws == "fresh-ws"})
        self.assertEqual(b.fake.cards[("agent-zero", "user")],
                         ["identity:  ada", "ATTRIBUTE: sails"])
        before = len(b.writes_sent())
        again = memory_file.import_memory(b.ctx, read)
        self.assertEqual((again["state"], again["created"], again["already"],
                          again["card_added"]), ("done", 0, 3, 0))
        self.assertEqual(len(b.writes_sent()), before)
        self.assertIn("created nothing", memory_file.report_text(again))

    def test_import_into_named_peers_and_session_says_what_the_server_does_not_keep(self):
        b = Bench(self, workspace_id="fresh-ws", agent_peer_id="helper", user_peer_id="ada")
        text = exported(self, ["The user sails"])
        report = memory_file.import_memory(b.ctx, memory_file.parse(text), session_id="my-import")
        self.assertEqual(report["created"], 1)
        [made] = b.fake.conclusions.values()
        self.assertEqual((made["observer_id"], made["observed_id"], made["session_id"]),
                         ("helper", "ada", "my-import"))
        said = memory_file.report_text(report)
        for fact in ("explicit", "its own time", "no metadata", "my-import",
                     "agent-zero's conclusions about user", "helper's about ada"):
            self.assertIn(fact, said)

    def test_texts_are_redacted_and_masked_before_they_are_sent(self):
        text = exported(self, ["plain"]).replace("plain", f"key {LEAKED} pw {HOST_SECRET}")
        memory_file.import_memory(self.b.ctx, memory_file.parse(text))
        self.assertEqual(self.b.listed(),
                         ["key [REDACTED:github_token] pw [secret-ref:DB_PASS]"])

    def test_a_failure_part_way_says_what_was_done_and_a_rerun_finishes_without_duplicates(self):
        b = self.b
        contents = [f"fact {n}" for n in range(memory_file.IMPORT_BATCH + 5)]
        read = memory_file.parse(exported(self, contents))
        b.fake.fail(match=r"/conclusions$", status=503)
        first = memory_file.import_memory(b.ctx, read)  # the first batch refused
        self.assertEqual((first["ok"], first["state"], first["created"], first["error"]),
                         (False, "failed", 0, "http_503"))
        stopped = self.stop_after_first_batch(read)
        self.assertEqual((stopped["ok"], stopped["state"], stopped["created"],
                          stopped["error"]), (False, "stopped", memory_file.IMPORT_BATCH,
                                              "http_503"))
        said = memory_file.report_text(stopped)
        self.assertIn(f"Stopped after creating {memory_file.IMPORT_BATCH} of", said)
        self.assertIn("run the import again", said)
        done = memory_file.import_memory(b.ctx, read)
        self.assertEqual((done["state"], done["created"], done["already"]),
                         ("done", 5, memory_file.IMPORT_BATCH))
        self.assertEqual(b.listed(), sorted(contents))

    def stop_after_first_batch(self, read):
        """An import whose second create request Honcho refuses."""
        fake, creates = self.b.fake, []
        answer = fake.handle

        def refuse_second(method, path, query, body, headers):
            if method == "POST" and path.endswith("/conclusions"):
                creates.append(path)
                if len(creates) == 2:
                    fake.requests.append((method, path))
                    return 503, {}, {"detail": "scripted 503"}, None
            return answer(method, path, query, body, headers)
        fake.handle = refuse_second
        try:
            return memory_file.import_memory(self.b.ctx, read)
        finally:
            fake.handle = answer

    def test_more_conclusions_in_honcho_than_can_be_checked_refuses_and_creates_nothing(self):
        b = self.b
        b.peers_seen()
        for n in range(30):
            b.conclusion(f"held {n}")
        report = memory_file.import_memory(b.ctx, memory_file.parse(exported(self, ["new"])),
                                           limit=20)
        self.assertEqual((report["ok"], report["state"], report["error"], report["created"]),
                         (False, "failed", "too_many", 0))
        self.assertIn("more than 20", memory_file.report_text(report))
        self.assertEqual(b.writes_sent(), [])

    def test_a_card_that_would_grow_past_its_bound_is_left_as_it_is(self):
        b = self.b
        b.peers_seen()
        b.fake.cards[("agent-zero", "user")] = [f"ATTRIBUTE: {n}" for n in range(39)]
        text = exported(self, ["x"], ["ATTRIBUTE: new one", "ATTRIBUTE: another"])
        report = memory_file.import_memory(b.ctx, memory_file.parse(text))
        self.assertEqual((report["card_state"], report["card_added"], report["created"]),
                         ("too_large", 0, 1))
        self.assertEqual(len(b.fake.cards[("agent-zero", "user")]), 39)
        self.assertIn("card was left as it is", memory_file.report_text(report))


class BadFileTest(unittest.TestCase):
    def good(self):
        return json.loads(exported(self, ["The user sails"], ["IDENTITY: Ada"]))

    def test_each_bad_file_is_refused_whole_with_a_reason_that_quotes_nothing_of_it(self):
        def changed(**parts):
            doc = self.good()
            doc.update(parts)
            return json.dumps(doc)
        long_text = "SECRETISH" * 10_000
        cases = {
            "not JSON": ("{SECRETISH", "not JSON"),
            "not an object": ("[1, 2]", "not a memory export"),
            "another format": (changed(format="SECRETISH"), "not a memory export"),
            "a newer version": (changed(version=2), "version 2"),
            "conclusions not a list": (changed(conclusions="SECRETISH"), "conclusions"),
            "a conclusion without text": (changed(conclusions=[{"id": "x"}]),
                                          "conclusions[0].text"),
            "a text too long": (changed(conclusions=[{"text": long_text}]),
                                "conclusions[0].text"),
            "too many conclusions": (changed(conclusions=[{"text": "x"}] * 5_001),
                                     "more than 5,000"),
            "a card not of texts": (changed(card=[1]), "card[0]"),
            "peers not ids": (changed(observer="SECRETISH <b>"), "observer"),
            "too large": (" " * (memory_file.MAX_FILE_BYTES + 1), "larger than"),
        }
        for name, (text, reason) in cases.items():
            with self.subTest(name):
                with self.assertRaises(MemoryFileError) as raised:
                    memory_file.parse(text)
                self.assertIn(reason, str(raised.exception))
                self.assertNotIn("SECRETISH", str(raised.exception))
                self.assertLess(len(str(raised.exception)), 200)

    def test_a_conclusion_that_could_not_be_made_safe_is_skipped_and_counted(self):
        doc = self.good()
        doc["conclusions"].append({"id": "c9", "text": None, "level": "explicit"})
        read = memory_file.parse(json.dumps(doc))
        b = Bench(self, workspace_id="fresh-ws")
        report = memory_file.import_memory(b.ctx, read)
        self.assertEqual((report["created"], report["skipped"]), (1, 1))

    def test_a_file_that_is_not_a_regular_file_is_refused(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, folder)
        with self.assertRaises(MemoryFileError) as raised:
            memory_file.read(folder)
        self.assertIn("not a regular file", str(raised.exception))


class CommandLineTest(unittest.TestCase):
    def setUp(self):
        self.server = serve(FakeHoncho())
        self.addCleanup(self.server.close)
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = folder.name
        self.env = {"HONCHO_API_URL": self.server.url, "HOME": folder.name,
                    "HONCHO_OUTBOX_PATH": os.path.join(folder.name, "outbox.sqlite3")}
        fake = self.server.fake
        for peer in ("agent-zero", "user"):
            fake.ensure_peer(WS, peer)
        fake.cards[("agent-zero", "user")] = ["IDENTITY: Ada"]
        fake.conclusions["c0001"] = {"id": "c0001", "content": "The user sails",
                                     "observer_id": "agent-zero", "observed_id": "user",
                                     "session_id": None, "workspace_id": WS,
                                     "created_at": CREATED.isoformat()}

    def run_cli(self, *args, env=None):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(list(args), environ=env or self.env, out=out)
        return code, out.getvalue(), err.getvalue()

    def test_export_to_a_file_then_import_into_another_workspace_twice(self):
        path = os.path.join(self.folder, "memory.json")
        code, out, err = self.run_cli("export", "--output", path)
        self.assertEqual(code, 0, err)
        self.assertIn("1 conclusion", out)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        with open(path, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["conclusions"][0]["text"], "The user sails")
        self.assertEqual(self.run_cli("export", "--output", path)[0], 1)  # never overwritten

        other = {**self.env, "HONCHO_WORKSPACE_ID": "other-ws"}
        code, out, err = self.run_cli("import", path, "--dry-run", env=other)
        self.assertEqual((code, err), (0, ""))
        self.assertIn("Dry run: would create 1 conclusion", out)
        code, out, err = self.run_cli("import", path, "--json", env=other)
        self.assertEqual((code, json.loads(out)["created"]), (0, 1), err)
        code, out, err = self.run_cli("import", path, env=other)
        self.assertEqual(code, 0, err)
        self.assertIn("created nothing", out)
        self.assertEqual(sorted(c["content"] for c in self.server.fake.conclusions.values()
                                if c["workspace_id"] == "other-ws"), ["The user sails"])

    def test_markdown_goes_to_standard_output(self):
        code, out, err = self.run_cli("export", "--format", "markdown")
        self.assertEqual(code, 0, err)
        self.assertTrue(out.startswith("# Honcho memory export"), out)
        self.assertIn("- The user sails", out)

    def test_a_bad_file_exits_2_and_names_the_problem(self):
        path = os.path.join(self.folder, "bad.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("{not json")
        code, out, err = self.run_cli("import", path)
        self.assertEqual((code, out), (2, ""))
        self.assertIn("not JSON", err)
        self.assertEqual([p for m, p in self.server.fake.requests if m != "GET"], [])


class InspectorApiTest(unittest.TestCase):
    """The inspector's export and import through its API handler as Agent Zero loads it (stub
    host), the fake Honcho over loopback."""

    def setUp(self):
        self.fake, self.server, self.host = api_world(self, KEY)
        self.handler = api_handler(self.host, "honcho_inspector")
        for peer in ("agent-zero", "user"):
            self.fake.ensure_peer(WS, peer)
        self.fake.cards[("agent-zero", "user")] = ["IDENTITY: Ada"]
        self.fake.conclusions["c0001"] = {"id": "c0001", "content": f"The user's token {LEAKED}",
                                          "observer_id": "agent-zero", "observed_id": "user",
                                          "session_id": None, "workspace_id": WS,
                                          "created_at": CREATED.isoformat()}

    def call(self, body):
        return asyncio.run(self.handler().process(body, None))

    def test_export_as_a_file_in_either_format_then_import_it_twice_elsewhere(self):
        got = self.call({"action": "export", "format": "json"})
        self.assertEqual((got["ok"], got["media_type"], got["complete"]),
                         (True, "application/json", True))
        self.assertRegex(got["filename"], r"^honcho-memory-agent-zero-\d{8}-\d{6}\.json$")
        self.assertNotIn(LEAKED, json.dumps(got))
        self.assertEqual(json.loads(got["content"])["conclusions"][0]["text"],
                         "The user's token [REDACTED:github_token]")
        markdown = self.call({"action": "export", "format": "markdown"})
        self.assertTrue(markdown["filename"].endswith(".md"))
        self.assertTrue(markdown["content"].startswith("# Honcho memory export"))
        self.assertFalse(self.call({"action": "export", "format": "pdf"})["ok"])

        self.host.config.update(workspace_id="other-ws")
        self.fake.cards.clear()  # the fake keeps cards across workspaces: the new one has none
        dry = self.call({"action": "import", "file": got["content"], "dry_run": True})
        self.assertEqual((dry["ok"], dry["state"], dry["to_create"]), (True, "dry_run", 1))
        self.assertIn("Dry run: would create 1 conclusion", dry["message"])
        done = self.call({"action": "import", "file": got["content"]})
        self.assertEqual((done["state"], done["created"], done["card_added"]), ("done", 1, 1))
        again = self.call({"action": "import", "file": got["content"]})
        self.assertEqual((again["state"], again["created"], again["already"]), ("done", 0, 1))
        self.assertEqual([c["content"] for c in self.fake.conclusions.values()
                          if c["workspace_id"] == "other-ws"],
                         ["The user's token [REDACTED:github_token]"])

    def test_a_bad_file_is_refused_with_its_reason(self):
        for text in ("{nope", 42, None):
            with self.subTest(text=text):
                answer = self.call({"action": "import", "file": text})
                self.assertEqual((answer["ok"], answer["error"]), (False, "bad_memory_file"))
                self.assertTrue(answer["message"].startswith("Not imported"), answer)


if __name__ == "__main__":
    unittest.main()
