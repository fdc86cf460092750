"""The memory-control verbs of the command line (`mode`, `strategy`, `tokens`, `peer`,
`observation`, `identity`, `sessions`): each shows the effective value and where it comes from, and
sets it in the plugin's global config.json — the file Agent Zero's settings page writes — validated
as the page validates, written atomically, every other setting kept."""

import contextlib
import fcntl
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

from hub_testkit import ROOT
from outbox_helpers import DEST, temp_outbox_path

from honcho_hub.cli import main as cli
from honcho_hub.settings.effective import effective_settings, read_layers
from honcho_hub.settings.files import merged_config
from honcho_hub.storage import chats
from honcho_hub.storage.outbox import NewEvent, Outbox

KEY = "hch-knob-key-97531975319753"
SECRET_TEXT = "the queued words of a private message"


class KnobCase(unittest.TestCase):
    """A temporary plugin folder holding the plugin's default_config.yaml, as Agent Zero's does."""

    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.plugin_dir = os.path.join(folder.name, "honcho")
        os.mkdir(self.plugin_dir)
        shutil.copy(os.path.join(ROOT, "default_config.yaml"), self.plugin_dir)
        self.config = os.path.join(self.plugin_dir, "config.json")
        self.env = {"HOME": folder.name}

    def cli(self, verb, *argv, env=None, as_json=False):
        """(exit code, stdout, stderr) of `python -m honcho_hub <verb> --plugin-dir <temp>
        [argv]`."""
        out, err = io.StringIO(), io.StringIO()
        args = [verb, "--plugin-dir", self.plugin_dir, *(["--json"] if as_json else []), *argv]
        with contextlib.redirect_stderr(err):
            try:
                code = cli.main(args, environ=self.env if env is None else env, out=out)
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue(), err.getvalue()

    def view(self, verb, env=None):
        """The controls a verb shows, by name: (value, source)."""
        code, out, err = self.cli(verb, env=env, as_json=True)
        self.assertEqual(code, cli.EXIT_OK, err)
        return {shown["name"]: (shown["value"], shown["source"])
                for shown in json.loads(out)["controls"]}

    def save(self, settings):
        with open(self.config, "w", encoding="utf-8") as handle:
            json.dump(settings, handle)

    def saved(self):
        with open(self.config, encoding="utf-8") as handle:
            return json.load(handle)

    def raw(self):
        with open(self.config, "rb") as handle:
            return handle.read()


# (verb and its arguments, what config.json holds afterwards for the controls it sets)
SETS = [
    (("mode", "context"), {"recall_mode": "context"}),
    (("mode", "Tools"), {"recall_mode": "tools"}),
    (("strategy", "per-project"), {"session_strategy": "per-project"}),
    (("strategy", "global"), {"session_strategy": "global"}),
    (("tokens", "800"), {"max_context_tokens": 800}),
    (("tokens", "--agent-share", "0.3"), {"agent_representation_share": 0.3}),
    (("tokens", "1200", "--agent-share", "0"),
     {"max_context_tokens": 1200, "agent_representation_share": 0.0}),
    (("peer", "--user", "alice", "--agent", "helper", "--reasoning", "medium"),
     {"user_peer_id": "alice", "agent_peer_id": "helper", "dialectic_reasoning_level": "medium"}),
    (("peer", "--reasoning", "max"), {"dialectic_reasoning_level": "max"}),
    (("observation", "directional"), {"observation": "directional"}),
    (("observation", "unified"), {"observation": "unified"}),
]


class ViewTest(KnobCase):
    def test_each_verb_without_a_value_shows_the_defaults_as_such(self):
        cases = [
            ("mode", {"recall_mode": ("hybrid", "default")}),
            ("strategy", {"session_strategy": ("per-chat", "default")}),
            ("tokens", {"max_context_tokens": (500, "default"),
                        "agent_representation_share": (0.25, "default")}),
            ("peer", {"user_peer_id": ("user", "default"),
                      "agent_peer_id": ("agent-zero", "default"),
                      "dialectic_reasoning_level": ("low", "default")}),
            ("observation", {"observation": ("seed", "default"),
                             "observe_user_me": (True, "preset seed"),
                             "observe_user_others": (True, "preset seed"),
                             "observe_agent_me": (False, "preset seed"),
                             "observe_agent_others": (True, "preset seed")}),
        ]
        for verb, shown in cases:
            with self.subTest(verb=verb):
                self.assertEqual(self.view(verb), shown)
        self.assertFalse(os.path.exists(self.config), "looking changed nothing")

    def test_the_text_view_names_each_control_its_value_and_source(self):
        self.save({"recall_mode": "context"})
        code, out, _ = self.cli("mode")
        self.assertEqual((code, out), (cli.EXIT_OK, "recall_mode: context  (config.json)\n"))
        code, out, _ = self.cli("tokens")
        self.assertEqual(out, "max_context_tokens: 500  (default)\n"
                              "agent_representation_share: 0.25  (default)\n")

    def test_without_a_default_config_file_the_built_in_defaults_are_shown(self):
        os.remove(os.path.join(self.plugin_dir, "default_config.yaml"))
        self.assertEqual(self.view("strategy"), {"session_strategy": ("per-chat", "default")})

    def test_recall_enabled_false_shows_as_mode_tools_saying_why(self):
        self.save({"recall_enabled": False, "recall_mode": "hybrid"})
        self.assertEqual(self.view("mode"),
                         {"recall_mode": ("tools", "recall_enabled false in config.json")})

    def test_custom_observation_shows_the_saved_flags(self):
        self.save({"observation": "custom", "observe_agent_me": True, "observe_user_others": False})
        self.assertEqual(self.view("observation"), {
            "observation": ("custom", "config.json"), "observe_user_me": (True, "default"),
            "observe_user_others": (False, "config.json"),
            "observe_agent_me": (True, "config.json"),
            "observe_agent_others": (True, "default")})

    def test_a_bad_saved_value_shows_the_default_and_a_warning_naming_the_setting_not_value(self):
        self.save({"max_context_tokens": 10, "user_peer_id": KEY + " !"})
        code, out, _ = self.cli("tokens")
        self.assertIn("max_context_tokens: 500  (default)", out)
        self.assertIn("warning: max_context_tokens in config.json is ignored:"
                      " out of range 50–100,000", out)
        code, out, _ = self.cli("peer")
        self.assertIn("user_peer_id: user  (default)", out)
        self.assertNotIn(KEY, out)

    def test_an_unusable_config_file_is_shown_as_ignored(self):
        with open(self.config, "w", encoding="utf-8") as handle:
            handle.write("{not json")
        code, out, _ = self.cli("mode")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertIn("recall_mode: hybrid  (default)", out)
        self.assertIn("warning: config.json cannot be used (not valid YAML or JSON):"
                      " Agent Zero ignores it", out)


class SetTest(KnobCase):
    def test_each_verb_with_a_value_saves_it_in_config_json_and_then_shows_it_from_there(self):
        for argv, expected in SETS:
            with self.subTest(argv=argv):
                self.save({})
                code, out, err = self.cli(*argv)
                self.assertEqual(code, cli.EXIT_OK, err)
                self.assertEqual({name: self.saved().get(name) for name in expected}, expected)
                shown = self.view(argv[0])
                for name, value in expected.items():
                    self.assertEqual(shown[name], (value, "config.json"))

    def test_what_is_saved_is_what_agent_zeros_config_hook_and_the_settings_read(self):
        code, _, _ = self.cli("strategy", "global")
        self.assertEqual(code, cli.EXIT_OK)
        self.cli("tokens", "900")
        layers = read_layers(os.path.join(self.plugin_dir, "default_config.yaml"), self.config,
                             strict=True)
        merged = merged_config(layers.default_config, layers.global_config)
        self.assertEqual((merged["session_strategy"], merged["max_context_tokens"]),
                         ("global", 900))
        settings = effective_settings(layers, secrets={}, environ={})
        self.assertEqual((settings.session_strategy, settings.max_context_tokens), ("global", 900))

    def test_a_change_prints_before_and_after_and_that_it_is_global(self):
        code, out, _ = self.cli("mode", "context")
        self.assertIn("recall_mode: context  (config.json)", out)
        self.assertIn("changed recall_mode: hybrid -> context", out)
        self.assertIn("saved in the plugin's global settings (config.json); a project's own"
                      " recall_mode still wins in its chats", out)
        code, out, _ = self.cli("strategy", "global")
        self.assertIn("saved in the plugin's global settings (config.json); session_strategy is"
                      " global only", out)

    def test_setting_the_value_already_saved_writes_nothing(self):
        self.save({"recall_mode": "tools"})
        before = os.stat(self.config)
        code, out, _ = self.cli("mode", "tools")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertIn("unchanged: config.json already holds recall_mode tools", out)
        self.assertEqual(os.stat(self.config).st_ino, before.st_ino)

    def test_a_saved_number_is_not_taken_for_the_flag_asked_for(self):
        # 0 is no valid flag: Agent Zero uses observe_user_me's default, true, so false must be
        # written.
        self.save({"observation": "custom", "observe_user_me": 0, "observe_user_others": True,
                   "observe_agent_me": False, "observe_agent_others": True})
        code, _, _ = self.cli("observation", "custom", "--user-me", "false")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertIs(self.saved()["observe_user_me"], False)
        self.assertEqual(self.view("observation")["observe_user_me"], (False, "config.json"))

    def test_a_mode_that_injects_turns_recall_enabled_back_on(self):
        self.save({"recall_enabled": False})
        code, out, _ = self.cli("mode", "hybrid")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertEqual(self.saved(), {"recall_enabled": True, "recall_mode": "hybrid"})
        self.assertIn("recall_enabled was false, which reads as recall_mode tools:"
                      " it is now true", out)
        self.assertEqual(self.view("mode"), {"recall_mode": ("hybrid", "config.json")})

    def test_a_session_strategy_change_prints_its_costs(self):
        cases = [
            ("per-project", ["one session per project serialises delivery of the project's chats",
                             "one failing message holds every chat of the project",
                             "a project attached after a chat's first message splits that chat"
                             " over two sessions"]),
            ("global", ["one shared session serialises delivery",
                        "one failing message holds every chat",
                        "its summary and messages span all the chats it holds, so project scopes"
                        " stop isolating them"]),
            ("per-chat", []),
        ]
        for strategy, costs in cases:
            with self.subTest(strategy=strategy):
                code, out, _ = self.cli("strategy", strategy)
                self.assertEqual(code, cli.EXIT_OK)
                for cost in costs:
                    self.assertIn(cost, out)
                self.assertIn("messages already captured keep the session they were queued for;"
                              " events already delivered are never re-sent", out)
                self.assertEqual("serialises" in out, bool(costs))

    def test_renaming_a_peer_says_what_happens_to_what_honcho_holds(self):
        code, out, _ = self.cli("peer", "--user", "alice")
        self.assertIn("messages already captured keep the peer id they were captured with; what"
                      " Honcho holds under the old id is not recalled under the new one", out)
        code, out, _ = self.cli("peer", "--reasoning", "high")
        self.assertNotIn("old id", out)

    def test_observation_flags_make_the_preset_custom_from_the_current_flags(self):
        self.save({"observation": "directional"})
        code, out, err = self.cli("observation", "--agent-others", "false")
        self.assertEqual(code, cli.EXIT_OK, err)
        self.assertEqual(self.saved(), {"observation": "custom", "observe_user_me": True,
                                        "observe_user_others": True, "observe_agent_me": True,
                                        "observe_agent_others": False})
        self.assertIn("sessions Honcho already holds keep the peer configuration they have", out)
        code, _, _ = self.cli("observation", "custom", "--user-me", "no", "--agent-me", "yes")
        self.assertEqual(self.saved(), {"observation": "custom", "observe_user_me": False,
                                        "observe_user_others": True, "observe_agent_me": True,
                                        "observe_agent_others": False})

    def test_custom_without_flags_keeps_what_the_current_preset_observes(self):
        self.save({"observation": "unified"})
        code, _, _ = self.cli("observation", "custom")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertEqual(self.saved(), {"observation": "custom", "observe_user_me": True,
                                        "observe_user_others": False, "observe_agent_me": False,
                                        "observe_agent_others": True})

    def test_the_agent_share_says_when_the_self_model_is_off(self):
        code, out, _ = self.cli("tokens", "--agent-share", "0.4")
        self.assertIn("agent_representation_share only counts while include_agent_representation"
                      " is on (it is off)", out)
        self.save({"include_agent_representation": True})
        code, out, _ = self.cli("tokens", "--agent-share", "0.4")
        self.assertNotIn("only counts", out)

    def test_a_change_can_be_read_as_json(self):
        code, out, _ = self.cli("tokens", "700", as_json=True)
        report = json.loads(out)
        self.assertEqual(code, cli.EXIT_OK)
        self.assertEqual(report["changed"],
                         [{"name": "max_context_tokens", "from": 500, "to": 700}])
        self.assertEqual(report["controls"][0],
                         {"name": "max_context_tokens", "value": 700, "source": "config.json"})


class KeepTest(KnobCase):
    def test_every_other_setting_of_the_file_is_kept_as_it_was(self):
        others = {"batch_size": 5, "scope_strategy": "custom", "scope_custom": "team",
                  "max_queued_rows": "lots", "dialectic_pass_levels": "low,high",
                  "recall_timeout_s": "1.5", "debug": True}
        for argv, expected in SETS:
            with self.subTest(argv=argv):
                self.save(others)
                code, _, err = self.cli(*argv)
                self.assertEqual(code, cli.EXIT_OK, err)
                saved = self.saved()
                self.assertEqual({name: saved[name] for name in others}, others)
                self.assertEqual(set(saved) - set(others), set(expected))

    def test_a_credential_in_the_file_is_not_written_back_nor_shown(self):
        self.save({"api_key": KEY, "HONCHO_API_KEY": KEY, "batch_size": 7})
        code, out, err = self.cli("mode", "tools")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertNotIn(KEY.encode(), self.raw())
        self.assertEqual(self.saved(), {"batch_size": 7, "recall_mode": "tools"})
        self.assertIn("2 entries that are not settings of this plugin were dropped", out)
        self.assertNotIn(KEY, out + err)

    def test_the_file_keeps_its_mode_and_no_temporary_file_is_left(self):
        self.save({"batch_size": 5})
        os.chmod(self.config, 0o640)
        code, _, _ = self.cli("strategy", "global")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertEqual(stat.S_IMODE(os.stat(self.config).st_mode), 0o640)
        # the writers' lock file stays (see config_write_lock); no temporary file does
        self.assertEqual(sorted(os.listdir(self.plugin_dir)),
                         ["config.json", "config.json.lock", "default_config.yaml"])

    def test_a_file_not_saved_yet_is_created_with_the_one_setting(self):
        code, _, _ = self.cli("mode", "context")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertEqual(self.saved(), {"recall_mode": "context"})

    def test_a_linked_config_file_is_changed_where_it_points(self):
        elsewhere = os.path.join(os.path.dirname(self.plugin_dir), "kept-config.json")
        with open(elsewhere, "w", encoding="utf-8") as handle:
            json.dump({"batch_size": 9}, handle)
        os.symlink(elsewhere, self.config)
        code, _, _ = self.cli("mode", "tools")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertTrue(os.path.islink(self.config))
        self.assertEqual(self.saved(), {"batch_size": 9, "recall_mode": "tools"})


# A writer as `python -m honcho_hub`, imported first and then held at a barrier: a shared lock on
# argv[1], which the parent holds exclusively until every writer is waiting, so they start at once.
CHILD_WRITER = r"""
import fcntl, io, sys
# imported before the first barrier: the writers race on the file
from honcho_hub.cli.main import main
for path in sys.argv[1].split(","):  # one barrier a round
    with open(path, "rb") as barrier:
        print("ready", flush=True)
        fcntl.flock(barrier, fcntl.LOCK_SH)
    print(main(sys.argv[2:], out=io.StringIO()), flush=True)  # the exit code; stdout is ours
"""
# Eight writers, each of a setting no other one writes, and what config.json holds for it
# afterwards.
CONCURRENT_SETS = [(("mode", "context"), {"recall_mode": "context"}),
                   (("strategy", "global"), {"session_strategy": "global"}),
                   (("tokens", "800"), {"max_context_tokens": 800}),
                   (("tokens", "--agent-share", "0.3"), {"agent_representation_share": 0.3}),
                   (("peer", "--user", "alice"), {"user_peer_id": "alice"}),
                   (("peer", "--agent", "helper"), {"agent_peer_id": "helper"}),
                   (("peer", "--reasoning", "medium"), {"dialectic_reasoning_level": "medium"}),
                   (("observation", "unified"), {"observation": "unified"})]


class ConcurrentWritersTest(KnobCase):
    ROUNDS = 6

    def test_eight_writer_processes_started_at_once_lose_no_change(self):
        # The same eight processes write in every round (a spawn costs more than a round), each
        # round behind its own barrier: every writer waits at it before the round's config.json is
        # gone.
        expected = {key: value for _, held in CONCURRENT_SETS for key, value in held.items()}
        gates = [self.locked_barrier(n) for n in range(self.ROUNDS)]
        children = self.writers(",".join(gate.name for gate in gates))
        for round_, gate in enumerate(gates):
            with self.subTest(round=round_):
                if os.path.exists(self.config):
                    os.unlink(self.config)
                self.assertEqual([child.stdout.readline().strip() for child in children],
                                 ["ready"] * len(children))
                gate.close()  # its lock goes with it: every writer starts at once
                self.assertEqual([child.stdout.readline().strip() for child in children],
                                 [str(cli.EXIT_OK)] * len(children))
                self.assertEqual({key: self.saved().get(key) for key in expected}, expected)
        self.assertEqual([child.communicate(timeout=120)[1] for child in children],
                         [""] * len(children))

    def locked_barrier(self, n: int):
        # closed by its round
        gate = open(os.path.join(self.plugin_dir, "..", f"barrier-{n}"), "wb")
        self.addCleanup(gate.close)
        fcntl.flock(gate, fcntl.LOCK_EX)
        return gate

    def writers(self, barriers: str) -> list[subprocess.Popen]:
        """One writer process of each set, started behind the barriers."""
        children = []
        for (verb, *argv), _ in CONCURRENT_SETS:
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD_WRITER, barriers, verb, "--plugin-dir",
                 self.plugin_dir, *argv],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                cwd=tempfile.gettempdir(),
                env={**self.env, "PATH": os.environ.get("PATH", ""), "PYTHONPATH": ROOT})
            self.addCleanup(child.wait, 30)
            self.addCleanup(child.kill)
            self.addCleanup(child.stderr.close)
            self.addCleanup(child.stdout.close)
            children.append(child)
        return children


class RefuseTest(KnobCase):
    def test_an_invalid_value_is_refused_naming_what_is_accepted_and_nothing_changes(self):
        cases = [
            (("mode", "fast"), "recall_mode: expected one of hybrid, context, tools"),
            (("strategy", "per-user"),
             "session_strategy: expected one of per-chat, per-project, global"),
            (("tokens", "49"), "max_context_tokens: out of range 50–100,000"),
            (("tokens", "100001"), "max_context_tokens: out of range 50–100,000"),
            (("tokens", "many"), "max_context_tokens: expected a number"),
            (("tokens", "500.5"), "max_context_tokens: expected a whole number"),
            (("tokens", "--agent-share", "0.6"), "agent_representation_share: out of range 0–0.5"),
            (("tokens", "nan"), "max_context_tokens: expected a finite number"),
            (("peer", "--user", "al ice"), "user_peer_id: expected 1–512 of A-Z a-z 0-9 _ -"),
            (("peer", "--agent", ""), "agent_peer_id: expected 1–512 of A-Z a-z 0-9 _ -"),
            (("peer", "--user", "alice", "--reasoning", "extreme"),
             "dialectic_reasoning_level: expected one of minimal, low, medium, high, max"),
            (("observation", "everything"),
             "observation: expected one of seed, directional, unified, custom"),
            (("observation", "custom", "--user-me", "maybe"),
             "observe_user_me: expected true or false"),
            (("observation", "seed", "--agent-me", "true"),
             "observation: the --user-me, --user-others, --agent-me and --agent-others flags go"
             " with custom (or no preset)"),
        ]
        self.save({"batch_size": 5, "recall_mode": "context"})
        before = self.raw()
        for argv, problem in cases:
            with self.subTest(argv=argv):
                code, out, err = self.cli(*argv)
                self.assertEqual(code, cli.EXIT_USAGE)
                self.assertEqual(out, "")
                self.assertEqual(err, f"python -m honcho_hub {argv[0]}: error: {problem};"
                                      " nothing changed\n")
                self.assertEqual(self.raw(), before)

    def test_a_refusal_never_repeats_the_value(self):
        code, _, err = self.cli("peer", "--user", KEY + "!")
        self.assertEqual(code, cli.EXIT_USAGE)
        self.assertNotIn(KEY, err)

    def test_a_change_is_refused_only_for_a_rule_it_breaks_not_one_the_file_already_breaks(self):
        # The file already breaks retry_base_s <= retry_max_s (edited by hand): Agent Zero keeps it
        # with a warning, and changing the recall mode does not make it worse.
        self.save({"retry_base_s": 500, "retry_max_s": 100})
        code, _, err = self.cli("mode", "tools")
        self.assertEqual(code, cli.EXIT_OK, err)
        self.assertEqual(self.saved(),
                         {"retry_base_s": 500, "retry_max_s": 100, "recall_mode": "tools"})

    def test_an_unusable_config_file_is_not_overwritten(self):
        cases = [("not JSON", b"{not json", "not valid YAML or JSON"),
                 ("a list", b"[1, 2]", "not a mapping of settings")]
        for what, content, reason in cases:
            with self.subTest(what=what):
                with open(self.config, "wb") as handle:
                    handle.write(content)
                code, out, err = self.cli("mode", "tools")
                self.assertEqual(code, cli.EXIT_FAILED)
                self.assertEqual(err, f"python -m honcho_hub mode: error: config.json {reason}:"
                                      " fix or remove it; nothing changed\n")
                self.assertEqual(self.raw(), content)

    def test_a_config_file_that_cannot_be_written_is_reported_and_leaves_no_temporary_file(self):
        os.symlink(os.path.join(self.plugin_dir, "absent-folder", "config.json"), self.config)
        code, out, err = self.cli("mode", "tools")
        self.assertEqual(code, cli.EXIT_FAILED)
        self.assertEqual(err, "python -m honcho_hub mode: error: config.json cannot be written"
                              " (FileNotFoundError); nothing changed\n")
        self.assertEqual(sorted(os.listdir(self.plugin_dir)),
                         ["config.json", "default_config.yaml"])

    def test_a_config_option_or_a_missing_plugin_folder_is_a_usage_error(self):
        cases = [
            (["--config", os.path.join(self.plugin_dir, "default_config.yaml"), "mode",
              "--plugin-dir", self.plugin_dir, "tools"],
             "--config: the memory-control verbs read and write the plugin's config.json"
             " (see --plugin-dir)"),
            (["mode", "--plugin-dir", os.path.join(self.plugin_dir, "absent"), "tools"],
             "--plugin-dir: not a folder"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv[0]):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as raised:
                    cli.main(argv, environ=self.env, out=io.StringIO())
                self.assertEqual(raised.exception.code, cli.EXIT_USAGE)
                self.assertEqual(err.getvalue().strip().splitlines()[-1],
                                 f"python -m honcho_hub: error: {message}")
        self.assertFalse(os.path.exists(self.config))


class EnvironmentTest(KnobCase):
    # (verb and a value, the control, its variable, the variable's value, the value it wins with)
    CASES = [
        (("mode", "tools"), "recall_mode", "HONCHO_RECALL_MODE", "context", "context"),
        (("strategy", "global"), "session_strategy", "HONCHO_SESSION_STRATEGY", "per-project",
         "per-project"),
        (("tokens", "900"), "max_context_tokens", "HONCHO_MAX_CONTEXT_TOKENS", "700", 700),
        (("observation", "unified"), "observation", "HONCHO_OBSERVATION", "directional",
         "directional"),
        (("peer", "--user", "alice"), "user_peer_id", "HONCHO_USER_ID", "bob", "bob"),
        (("peer", "--agent", "helper"), "agent_peer_id", "HONCHO_AGENT_PEER_ID", "zed", "zed"),
    ]

    def test_a_variable_wins_and_the_view_says_a_saved_value_has_no_effect_while_it_is_set(self):
        for argv, name, var, raw, value in self.CASES:
            with self.subTest(var=var):
                env = {**self.env, var: raw}
                self.assertEqual(self.view(argv[0], env=env)[name], (value, var))
                code, out, _ = self.cli(argv[0], env=env)
                self.assertIn(f"warning: {var} is set in this environment and wins over the"
                              f" setting: a saved {name} has no effect until {var}"
                              " is removed", out)

    def test_setting_a_value_a_variable_overrides_saves_it_warns_and_exits_3(self):
        for argv, name, var, raw, value in self.CASES:
            with self.subTest(var=var):
                self.save({})
                code, out, _ = self.cli(*argv, env={**self.env, var: raw})
                self.assertEqual(code, cli.EXIT_DEGRADED)
                self.assertIn(name, self.saved())
                self.assertIn(f"warning: {var} is set in this environment and wins over the"
                              f" setting: a saved {name} has no effect until {var}"
                              " is removed", out)
                self.assertEqual(self.view(argv[0], env={**self.env, var: raw})[name], (value, var))
                # without the variable, the same change is plainly done
                code, _, _ = self.cli(*argv)
                self.assertEqual(code, cli.EXIT_OK)

    def test_a_change_under_a_variable_is_shown_from_what_the_files_gave(self):
        code, out, _ = self.cli("mode", "tools", env={**self.env, "HONCHO_RECALL_MODE": "context"},
                                as_json=True)
        report = json.loads(out)
        self.assertEqual((code, report["changed"], report["overridden"]),
                         (cli.EXIT_DEGRADED,
                          [{"name": "recall_mode", "from": "hybrid", "to": "tools"}],
                          ["recall_mode"]))
        self.assertEqual(report["controls"], [{"name": "recall_mode", "value": "context",
                                               "source": "HONCHO_RECALL_MODE"}])

    def test_an_invalid_variable_does_not_win_and_is_named_as_ignored(self):
        self.save({"recall_mode": "tools"})
        env = {**self.env, "HONCHO_RECALL_MODE": "sometimes"}
        self.assertEqual(self.view("mode", env=env), {"recall_mode": ("tools", "config.json")})
        code, out, _ = self.cli("mode", env=env)
        self.assertIn("warning: HONCHO_RECALL_MODE is set but ignored: expected one of hybrid,"
                      " context, tools", out)
        self.assertNotIn("sometimes", out)

    def test_an_empty_variable_counts_as_unset(self):
        code, out, _ = self.cli("mode", env={**self.env, "HONCHO_RECALL_MODE": "  "})
        self.assertEqual((code, out), (cli.EXIT_OK, "recall_mode: hybrid  (default)\n"))


class SessionsTest(KnobCase):
    def setUp(self):
        super().setUp()
        self.outbox_path = temp_outbox_path(self)
        self.env["HONCHO_OUTBOX_PATH"] = self.outbox_path

    def capture(self, *messages):
        """Store each (chat, project, session, captured_at) as one message, as capture stores it."""
        box = Outbox(self.outbox_path)
        self.addCleanup(box.close)
        box.enqueue_batches([[NewEvent(id=f"ev-{i}", destination=DEST, workspace_id="agent-zero",
                                       session_id=session, peer_id="user", role="user",
                                       content=f"{SECRET_TEXT} {i}", captured_at=at,
                                       chat_id=chat, project=project)]
                             for i, (chat, project, session, at) in enumerate(messages)])

    def test_the_known_chat_sessions_are_listed_newest_first_without_content_or_path(self):
        self.capture(("ab12cd34", None, "chat-ab12cd34", 1_800_000_000.0),
                     ("ef56gh78", "alpha", "project-alpha", 1_800_000_060.0),
                     ("ab12cd34", "alpha", "project-alpha", 1_800_000_120.0))
        code, out, err = self.cli("sessions")
        self.assertEqual(code, cli.EXIT_OK, err)
        self.assertEqual(out.splitlines(), [
            "session_strategy: per-chat  (default)",
            "chat ab12cd34 (project alpha) -> session project-alpha, captured 2027-01-15 08:02:00Z"
            " to 2027-01-15 08:02:00Z",
            "chat ef56gh78 (project alpha) -> session project-alpha, captured 2027-01-15 08:01:00Z"
            " to 2027-01-15 08:01:00Z",
            "chat ab12cd34 (no project) -> session chat-ab12cd34, captured 2027-01-15 08:00:00Z"
            " to 2027-01-15 08:00:00Z"])
        code, out, err = self.cli("sessions", as_json=True)
        box = Outbox(self.outbox_path)
        self.addCleanup(box.close)
        self.assertEqual(json.loads(out)["sessions"], chats.known_sessions(box.db))
        for text in (out, err):
            self.assertNotIn(SECRET_TEXT, text)
            self.assertNotIn(self.outbox_path, text)

    def test_the_limit_keeps_the_newest(self):
        self.capture(("chat0001", None, "chat-chat0001", 1_800_000_000.0),
                     ("chat0002", None, "chat-chat0002", 1_800_000_030.0))
        code, out, _ = self.cli("sessions", "--limit", "1", as_json=True)
        self.assertEqual([row["chat_id"] for row in json.loads(out)["sessions"]], ["chat0002"])

    def test_nothing_captured_yet_says_so_and_creates_no_outbox(self):
        code, out, _ = self.cli("sessions")
        self.assertEqual(code, cli.EXIT_OK)
        self.assertIn("no chat -> session mapping recorded yet", out)
        self.assertFalse(os.path.exists(self.outbox_path))

    def test_an_outbox_that_cannot_be_read_is_an_error_naming_its_code_not_its_path(self):
        os.makedirs(os.path.dirname(self.outbox_path))
        with open(self.outbox_path, "wb") as handle:
            handle.write(b"not a database at all, just bytes" * 200)
        code, out, err = self.cli("sessions")
        self.assertEqual((code, out), (cli.EXIT_FAILED, ""))
        self.assertEqual(err, "python -m honcho_hub sessions: error: cannot read the outbox"
                              " (outbox_corrupt)\n")


class IdentityTest(KnobCase):
    def test_identity_shows_workspace_peers_url_and_whether_a_key_is_set_never_the_key(self):
        env = {**self.env, "HONCHO_API_KEY": KEY, "HONCHO_WORKSPACE_ID": "team-ws",
               "HONCHO_API_URL": "http://127.0.0.1:8000/"}
        self.save({"user_peer_id": "alice"})
        for as_json in (False, True):
            with self.subTest(as_json=as_json):
                code, out, err = self.cli("identity", env=env, as_json=as_json)
                self.assertEqual(code, cli.EXIT_OK)
                self.assertNotIn(KEY, out + err)
        self.assertEqual(self.view("identity", env=env), {
            "workspace_id": ("team-ws", "HONCHO_WORKSPACE_ID"),
            "user_peer_id": ("alice", "config.json"),
            "agent_peer_id": ("agent-zero", "default"), "endpoint_mode": ("hosted", "default"),
            "api_url": ("http://127.0.0.1:8000", "HONCHO_API_URL"),
            "api_key": ("set", "HONCHO_API_KEY")})

    def test_without_a_key_identity_says_so_and_where_the_key_usually_is(self):
        shown = self.view("identity")
        self.assertEqual(shown["api_key"], ("not set", "HONCHO_API_KEY"))
        self.assertEqual(shown["api_url"],
                         ("https://api.honcho.dev", "default of endpoint_mode hosted"))
        code, out, _ = self.cli("identity")
        self.assertIn("api_key: not set  (HONCHO_API_KEY)", out)
        self.assertIn("the command line does not read Agent Zero's Settings → Secrets", out)

    def test_a_url_carrying_credentials_is_shown_unusable_without_them(self):
        self.save({"api_url": "https://me:" + KEY + "@honcho.example"})
        code, out, err = self.cli("identity")
        self.assertNotIn(KEY, out + err)
        self.assertEqual(self.view("identity")["api_url"],
                         (None, "setting 'api_url': not a usable URL (URL must not carry"
                                " credentials; use HONCHO_API_KEY)"))

    def test_identity_takes_no_value(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as raised:
            cli.main(["identity", "--plugin-dir", self.plugin_dir, "other"], environ=self.env,
                     out=io.StringIO())
        self.assertEqual(raised.exception.code, cli.EXIT_USAGE)


if __name__ == "__main__":
    unittest.main()
