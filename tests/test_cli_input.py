"""What the command line is given: a `--config` file it cannot use is a usage error, and
`demo --real` never shows what the user's own outbox holds."""

import contextlib
import io
import json
import logging
import os
import tempfile
import unittest

from fake_honcho import FakeHoncho
from loopback import serve
from outbox_helpers import temp_outbox_path

from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.cli import main as cli
from honcho_hub.settings import log_level
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.files import MAX_CONFIG_BYTES
from honcho_hub.storage.outbox import Outbox

KEY = "hch-cli-key-8642086420"


class ConfigFileTest(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = folder.name
        # Nothing listens on port 9: a command that ran anyway could not reach anything.
        self.env = {"HONCHO_API_URL": "http://127.0.0.1:9",
                    "HONCHO_OUTBOX_PATH": temp_outbox_path(self), "HOME": self.folder}

    def write(self, name, data: bytes) -> str:
        path = os.path.join(self.folder, name)
        with open(path, "wb") as handle:
            handle.write(data)
        return path

    def fifo(self, name) -> str:
        """A named pipe no one writes to: opening it to read the usual way would wait for ever."""
        path = os.path.join(self.folder, name)
        os.mkfifo(path)
        return path

    def run_cli(self, config):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = cli.main(["--config", config, "status", "--json"], environ=self.env, out=out)
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue(), err.getvalue()

    def test_a_config_file_that_cannot_be_used_is_a_usage_error_saying_why(self):
        cases = [
            ("missing", os.path.join(self.folder, "absent.yaml"), "--config: no such file"),
            ("folder", self.folder, "--config: not a regular file"),
            ("FIFO", self.fifo("fifo.yaml"), "--config: not a regular file"),
            ("oversized", self.write("big.yaml", b"# pad\n" * (MAX_CONFIG_BYTES // 6 + 1)),
             f"--config: larger than {MAX_CONFIG_BYTES:,} bytes"),
            ("a list", self.write("list.yaml", b"- workspace_id: a\n- batch_size: 5\n"),
             "--config: not a mapping of settings"),
            ("a scalar", self.write("scalar.yaml", b"just words\n"),
             "--config: not a mapping of settings"),
            ("a JSON list", self.write("list.json", b"[1, 2]"),
             "--config: not a mapping of settings"),
            ("bad YAML", self.write("bad.yaml", b"workspace_id: [unclosed\n"),
             "--config: not valid YAML or JSON"),
            ("bad JSON", self.write("bad.json", b"{\"workspace_id\": }"),
             "--config: not valid YAML or JSON"),
            ("not UTF-8", self.write("latin.yaml", b"scope_custom: caf\xe9\n"),
             "--config: not valid YAML or JSON"),
        ]
        for what, path, message in cases:
            with self.subTest(what=what):
                code, out, err = self.run_cli(path)
                self.assertEqual(code, cli.EXIT_USAGE)
                self.assertEqual(out, "")  # the command did not run
                self.assertEqual(err.strip().splitlines()[-1],
                                 f"python -m honcho_hub: error: {message}")
                self.assertNotIn(self.folder, err)

    def test_a_mapping_file_is_used_and_an_empty_one_means_no_settings(self):
        code, out, _ = self.run_cli(
            self.write("ok.yaml", b"workspace_id: from-file\nbatch_size: 5\n"))
        self.assertEqual((code, json.loads(out)["identity"]["workspace_id"]),
                         (cli.EXIT_OK, "from-file"))
        code, out, _ = self.run_cli(self.write("ok.json", b"{\"workspace_id\": \"from-json\"}"))
        self.assertEqual((code, json.loads(out)["identity"]["workspace_id"]),
                         (cli.EXIT_OK, "from-json"))
        code, out, _ = self.run_cli(self.write("empty.yaml", b""))
        self.assertEqual((code, json.loads(out)["identity"]["workspace_id"]),
                         (cli.EXIT_OK, "agent-zero"))


class RealDemoTest(unittest.TestCase):
    def test_a_real_demo_prints_nothing_queued_in_the_users_outbox(self):
        fake = FakeHoncho(api_key=KEY)
        server = serve(fake)
        self.addCleanup(server.close)
        path = temp_outbox_path(self)
        env = {"HONCHO_API_URL": server.url, "HONCHO_MCP_URL": server.url, "HONCHO_API_KEY": KEY,
               "HONCHO_OUTBOX_PATH": path, "HOME": os.path.dirname(path)}
        settings = build_settings({}, {}, env)
        service = CaptureService(settings)  # the user's own message, queued before the demo runs
        service.capture(CaptureRequest("mine1", Role.USER, "m-1",
                                       "Dear diary, my password=Hunter2-Private ok"), settings)
        service.close()
        box = Outbox(path)
        stored = box.contents()[0]
        box.close()
        self.assertIn("REDACTED", stored)  # so it is what the old demo would have printed
        out = io.StringIO()
        code = cli.main(["demo", "--real"], environ=env, out=out)
        self.assertEqual(code, 0, out.getvalue())
        for text in ("Dear diary", stored, "Hunter2"):
            self.assertNotIn(text, out.getvalue())


class DebugFromTheCommandLineTest(unittest.TestCase):
    def test_honcho_debug_raises_the_plugins_loggers_for_the_command(self):
        plugin = logging.getLogger("honcho_hub")
        self.addCleanup(plugin.setLevel, plugin.level)
        plugin.setLevel(logging.WARNING)
        self.addCleanup(log_level.follow, build_settings({}, {}, {}))  # debug off: the level it had
        env = {"HONCHO_API_URL": "http://127.0.0.1:9", "HONCHO_OUTBOX_PATH": temp_outbox_path(self),
               "HONCHO_DEBUG": "1"}
        with contextlib.redirect_stderr(io.StringIO()):
            cli.main(["status", "--json"], environ=env, out=io.StringIO())
        self.assertEqual(plugin.getEffectiveLevel(), logging.DEBUG)


if __name__ == "__main__":
    unittest.main()
