"""The observation preset applied to existing sessions (honcho_hub/ops/observation.py): a dry run
says how many of the sessions this install made hold other flags than the settings and how; apply
sets the settings' flags on those, with `Session.set_peer_configuration`, a page at a time, within
one deadline per call; a peer not in a session is never added; sessions of the workspace this
install did not make are never read. The command line's `observation --apply-existing`.

Real honcho.Honcho over the fake (httpx.MockTransport), a real outbox file for the chat -> session
map, a manual monotonic clock the transport moves."""

import asyncio
import contextlib
import dataclasses
import io
import json
import os
import shutil
import tempfile
import unittest

import httpx
from api_world import api_handler, api_world
from delivery_helpers import with_api_url_problem
from fake_honcho import FakeHoncho
from hub_testkit import ROOT
from loopback import serve
from outbox_helpers import ManualClock, event, temp_outbox_path

from honcho_hub.cli import main as cli
from honcho_hub.gateway.gateway import HonchoGateway, Message
from honcho_hub.ops import observation
from honcho_hub.settings.config import build_settings
from honcho_hub.storage.outbox import Outbox

KEY = "hch-presets-key-13579"
USER, AGENT, WS = "user", "agent-zero", "agent-zero"


def flags(me, others):
    return {"observe_me": me, "observe_others": others}


class Bench:
    """Sessions made on the fake Honcho under one preset, the chat -> session map of a real outbox,
    and the gateway `observation` uses (requests kept; each answer moves the clock `step_s`)."""

    def __init__(self, test, **plugin):
        self.test = test
        self.fake = FakeHoncho(api_key=KEY)
        self.clock = ManualClock(1_000.0)
        self.step_s = 0.0
        self.sent: list[tuple[str, str]] = []
        self.settings = build_settings({"api_url": "https://honcho.test", "workspace_id": WS,
                                        "outbox_path": temp_outbox_path(test), **plugin},
                                       {"HONCHO_API_KEY": KEY}, {})
        self.gateway = self.gateway_for(self.settings, keep=True)

    def gateway_for(self, settings, keep=False):
        answer = self.fake.transport()

        def kept(request):
            if keep:
                self.sent.append((request.method, request.url.path))
                self.clock.advance(self.step_s)
            return answer.handle_request(request)
        gateway = HonchoGateway.for_settings(
            settings, http_client_factory=lambda: httpx.Client(transport=httpx.MockTransport(kept)))
        self.test.addCleanup(gateway.close)
        return gateway

    def made(self, session_id, preset="seed", mapped=True, with_human=True):
        """A session Honcho holds, created under `preset`; `mapped`: this install captured a chat
        into it."""
        made_by = self.gateway_for(dataclasses.replace(self.settings, observation=preset))
        peer, role = (USER, "user") if with_human else (AGENT, "agent")
        if not with_human:
            made_by = HonchoGateway.for_settings(
                dataclasses.replace(self.settings, observation=preset), with_human=False,
                http_client_factory=lambda: httpx.Client(transport=self.fake.transport()))
            self.test.addCleanup(made_by.close)
        made_by.send([Message(f"ev_{session_id}", session_id, peer, role, "hi", 1_700_000_000.0)])
        if mapped:
            box = Outbox.for_settings(self.settings)
            try:
                box.enqueue_batches([[dataclasses.replace(
                    event(1, session_id, dest=self.settings.destination()),
                    chat_id=f"c-{session_id}")]])
            finally:
                box.close()

    def server_flags(self, session_id):
        return self.fake.sessions[(WS, session_id)]["peers"]

    def puts(self):
        return [path for verb, path in self.sent if verb == "PUT"]

    def check(self, **kw):
        return observation.check(self.settings, self.gateway, monotonic=self.clock, **kw)

    def apply(self, **kw):
        return observation.apply(self.settings, self.gateway, monotonic=self.clock, **kw)


class DryRunTest(unittest.TestCase):
    def test_a_dry_run_counts_the_sessions_that_differ_and_says_how_and_changes_nothing(self):
        b = Bench(self, observation="directional")
        for sid in ("chat-a", "chat-b"):
            b.made(sid, "seed")
        b.made("chat-c", "directional")
        before = {sid: b.server_flags(sid) for sid in ("chat-a", "chat-b", "chat-c")}
        report = b.check()
        self.assertEqual((report["dry_run"], report["checked"], report["total"], report["differ"],
                          report["same"], report["absent"]), (True, 3, 3, 2, 1, 0))
        self.assertEqual(report["changes"], {"agent observe_me: off → on": 2})
        self.assertEqual([(s["session_id"], s["server"]["agent"]) for s in report["sessions"]],
                         [("chat-a", flags(False, True)), ("chat-b", flags(False, True))])
        self.assertEqual(b.puts(), [])
        self.assertEqual({sid: b.server_flags(sid) for sid in before}, before)
        text = observation.report_text(report)
        self.assertIn("2 of 3 sessions this install made hold other flags", text)
        self.assertIn("agent observe_me: off → on in 2 sessions", text)
        self.assertIn("Dry run: nothing changed", text)

    def test_a_peer_the_server_holds_without_flags_differs_from_the_settings(self):
        b = Bench(self)
        b.made("chat-a")
        b.fake.sessions[(WS, "chat-a")]["peers"][AGENT] = {}
        report = b.check()
        self.assertEqual(report["differ"], 1)
        self.assertEqual(report["changes"], {"agent observe_me: default → off": 1,
                                             "agent observe_others: default → on": 1})


class ApplyTest(unittest.TestCase):
    def test_apply_sets_the_settings_flags_on_the_sessions_that_differ_and_only_those(self):
        b = Bench(self, observation="directional")
        for sid in ("chat-a", "chat-b"):
            b.made(sid, "seed")
        b.made("chat-c", "directional")
        report = b.apply()
        self.assertEqual((report["dry_run"], report["differ"], report["applied"],
                          report["failed"]), (False, 2, 2, []))
        for sid in ("chat-a", "chat-b", "chat-c"):
            self.assertEqual(b.server_flags(sid), {USER: flags(True, True),
                                                   AGENT: flags(True, True)})
        # only the peer whose flags differ is set
        self.assertEqual(b.puts(), [f"/v3/workspaces/{WS}/sessions/chat-{s}/peers/{AGENT}/config"
                                    for s in "ab"])
        again = b.apply()
        self.assertEqual((again["differ"], again["applied"]), (0, 0))
        self.assertEqual(len(b.puts()), 2)
        self.assertIn("Applied the flags to 2 sessions", observation.report_text(report))

    def test_a_peer_not_in_the_session_is_never_added_to_it(self):
        # Honcho adds a peer to the session when its configuration is set: the human who never
        # spoke in a session stays out of it, and joins with the settings' flags when it speaks.
        b = Bench(self, observation="directional")
        b.made("chat-a", "seed", with_human=False)
        report = b.apply()
        self.assertEqual(report["applied"], 1)
        self.assertEqual(b.server_flags("chat-a"), {AGENT: flags(True, True)})
        self.assertEqual(report["sessions"][0]["server"]["user"], None)

    def test_sessions_this_install_did_not_make_are_never_read_or_changed(self):
        b = Bench(self, observation="directional")
        b.made("chat-mine", "seed")
        b.made("someone-elses", "seed", mapped=False)
        report = b.apply()
        self.assertEqual((report["total"], report["applied"]), (1, 1))
        self.assertFalse([path for _, path in b.sent if "someone-elses" in path])
        self.assertEqual(b.server_flags("someone-elses")[AGENT], flags(False, True))

    def test_a_session_honcho_no_longer_holds_is_counted_apart(self):
        b = Bench(self, observation="directional")
        b.made("chat-a", "seed")
        b.fake.sessions.pop((WS, "chat-a"))
        report = b.apply()
        self.assertEqual((report["absent"], report["differ"], report["applied"]), (1, 0, 0))
        self.assertEqual(b.puts(), [])


class BoundsTest(unittest.TestCase):
    def test_one_call_handles_one_page_of_sessions_and_names_the_next(self):
        b = Bench(self, observation="directional")
        count = observation.PAGE_SESSIONS + 3
        for n in range(count):
            b.made(f"chat-{n:03d}", "seed")
        first = b.apply()
        self.assertEqual((first["checked"], first["applied"], first["total"],
                          first["next_offset"]),
                         (observation.PAGE_SESSIONS, observation.PAGE_SESSIONS, count,
                          observation.PAGE_SESSIONS))
        self.assertIn("3 more sessions", observation.report_text(first))
        second = b.apply(offset=first["next_offset"])
        self.assertEqual((second["checked"], second["applied"], second["next_offset"]),
                         (3, 3, None))

    def test_a_call_stops_at_its_deadline_and_names_where_to_go_on(self):
        b = Bench(self, observation="directional")
        for n in range(6):
            b.made(f"chat-{n}", "seed")
        b.check()  # the client's workspace request is made
        b.step_s = 4.0  # each answer takes 4 s: two reads and a write per session
        report = b.apply(deadline_s=30.0)
        self.assertEqual(report["stopped"], "timed_out")
        self.assertEqual(report["checked"], report["next_offset"])
        self.assertLess(report["checked"], 6)
        self.assertGreaterEqual(report["applied"], 2)
        self.assertIn("run it again to go on", observation.report_text(report))
        b.step_s = 0.0
        rest = b.apply(offset=report["next_offset"])
        self.assertEqual(rest["applied"] + report["applied"], 6)

    def test_an_unreachable_or_refusing_server_stops_the_call_with_its_code(self):
        b = Bench(self, observation="directional")
        b.made("chat-a", "seed")
        b.made("chat-b", "seed")
        b.fake.fail(match=r"/config$", status=500)
        report = b.apply()
        self.assertEqual((report["stopped"], report["checked"], report["applied"]),
                         ("http_500", 0, 0))
        b.fake.fail(match=r"/config$", kind="connect")
        self.assertEqual(b.apply()["stopped"], "unreachable")
        refused = dataclasses.replace(b.settings, key_provider=lambda: "wrong-key-00")
        self.assertEqual(observation.check(refused, b.gateway_for(refused))["stopped"],
                         "auth_401")
        unusable = with_api_url_problem(b.settings, "api_url")
        self.assertEqual(observation.check(unusable, b.gateway_for(unusable))["stopped"],
                         "api_url_invalid")

    def test_a_session_honcho_refuses_is_named_and_the_others_go_on(self):
        b = Bench(self, observation="directional")
        b.made("chat-a", "seed")
        b.made("chat-b", "seed")
        b.fake.fail(match=r"/sessions/chat-a/peers/agent-zero/config$", status=422)
        report = b.apply()
        self.assertEqual(report["failed"], [{"session_id": "chat-a", "error": "http_422"}])
        self.assertEqual((report["applied"], report["stopped"]), (1, None))
        self.assertEqual(b.server_flags("chat-b")[AGENT], flags(True, True))
        self.assertIn("chat-a: not changed (http_422)", observation.report_text(report))

    def test_without_an_outbox_nothing_is_requested_and_none_is_created(self):
        b = Bench(self)
        report = b.check()
        self.assertEqual((report["total"], report["checked"]), (0, 0))
        self.assertEqual(b.sent, [])
        self.assertFalse(os.path.exists(b.settings.outbox_path))
        self.assertIn("no session made by this install", observation.report_text(report))


class CommandLineTest(unittest.TestCase):
    """`python -m honcho_hub observation [PRESET] --apply-existing [--dry-run]` on the plugin's
    config.json, against the fake served over loopback."""

    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.plugin_dir = os.path.join(folder.name, "honcho")
        os.mkdir(self.plugin_dir)
        shutil.copy(os.path.join(ROOT, "default_config.yaml"), self.plugin_dir)
        self.fake = FakeHoncho(api_key=KEY)
        server = serve(self.fake)
        self.addCleanup(server.close)
        self.outbox = os.path.join(folder.name, "outbox.sqlite3")
        with open(os.path.join(self.plugin_dir, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"api_url": server.url, "outbox_path": self.outbox}, f)
        self.env = {"HOME": folder.name, "HONCHO_API_KEY": KEY}
        self.bench = Bench(self)
        self.bench.fake = self.fake
        self.bench.settings = dataclasses.replace(self.bench.settings, api_url=server.url,
                                                  outbox_path=self.outbox)
        for sid in ("chat-a", "chat-b"):
            self.bench.made(sid, "seed")

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["observation", "--plugin-dir", self.plugin_dir, *argv],
                            environ=self.env, out=out)
        return code, out.getvalue(), err.getvalue()

    def test_a_dry_run_after_a_change_lists_what_differs_and_changes_nothing(self):
        code, out, err = self.cli("directional", "--apply-existing", "--dry-run")
        self.assertEqual(code, cli.EXIT_OK, err)
        self.assertIn("changed observation: seed -> directional", out)
        self.assertIn("2 of 2 sessions this install made hold other flags", out)
        self.assertIn("agent observe_me: off → on in 2 sessions", out)
        self.assertNotIn(KEY, out + err)
        self.assertEqual(self.fake.sessions[(WS, "chat-a")]["peers"][AGENT], flags(False, True))

    def test_apply_existing_sets_the_saved_presets_flags(self):
        self.cli("directional")
        code, out, err = self.cli("--apply-existing", "--json")
        self.assertEqual(code, cli.EXIT_OK, err)
        report = json.loads(out)["existing"]
        self.assertEqual((report["applied"], report["differ"]), (2, 2))
        for sid in ("chat-a", "chat-b"):
            self.assertEqual(self.fake.sessions[(WS, sid)]["peers"][AGENT], flags(True, True))

    def test_a_stopped_walk_exits_3(self):
        self.fake.fail(match=r"/config$", status=503, times=50)
        code, out, _ = self.cli("directional", "--apply-existing")
        self.assertEqual(code, cli.EXIT_DEGRADED)
        self.assertIn("Stopped (http_503)", out)

    def test_dry_run_goes_with_apply_existing_only(self):
        code, _, err = self.cli("--dry-run")
        self.assertEqual(code, cli.EXIT_USAGE)
        self.assertIn("--dry-run goes with --apply-existing", err)


class SidebarApiTest(unittest.TestCase):
    """The sidebar's `honcho_action` verbs `observation_check` and `observation_apply` (confirmed),
    through the plugin's API handler on a stub host, against the fake served over loopback."""

    def setUp(self):
        self.fake, server, self.host = api_world(self, KEY)
        self.host.config.update(observation="directional")
        self.handler = api_handler(self.host, "honcho_action")
        bench = Bench(self)
        bench.fake = self.fake
        bench.settings = dataclasses.replace(bench.settings, api_url=server.url,
                                             outbox_path=self.host.config["outbox_path"])
        for sid in ("chat-a", "chat-b"):
            bench.made(sid, "seed")

    def call(self, body):
        return asyncio.run(self.handler().process(body, None))

    def agent_flags(self, sid):
        return self.fake.sessions[(WS, sid)]["peers"][AGENT]

    def test_check_says_what_differs_as_text_and_changes_nothing(self):
        answer = self.call({"action": "observation_check"})
        self.assertEqual((answer["ok"], answer["result"]["differ"], answer["result"]["dry_run"]),
                         (True, 2, True))
        self.assertIn("agent observe_me: off → on in 2 sessions", answer["result"]["text"])
        self.assertEqual(self.agent_flags("chat-a"), flags(False, True))
        self.assertNotIn(KEY, json.dumps(answer))
        self.assertNotIn(self.host.config["outbox_path"], json.dumps(answer))

    def test_apply_needs_the_confirmation_then_sets_the_flags(self):
        refused = self.call({"action": "observation_apply"})
        self.assertEqual(refused["ok"], False)
        self.assertIn("confirm first", refused["error"])
        self.assertEqual(self.agent_flags("chat-a"), flags(False, True))
        answer = self.call({"action": "observation_apply", "confirmed": True, "offset": 0})
        self.assertEqual((answer["ok"], answer["result"]["applied"]), (True, 2))
        for sid in ("chat-a", "chat-b"):
            self.assertEqual(self.agent_flags(sid), flags(True, True))

    def test_a_bad_offset_is_read_as_the_first_page(self):
        for offset in (-3, "x", None, 1.5, True):
            with self.subTest(offset=offset):
                answer = self.call({"action": "observation_check", "offset": offset})
                self.assertEqual(answer["result"]["offset"], 0)


if __name__ == "__main__":
    unittest.main()
