"""The plugin's settings files (settings/files.py): settings rebuilt only when a file or a HONCHO_*
variable changed, and a config file written whole or not at all."""

import os
import tempfile
import threading
import types
import unittest

from test_config import A0_USR

from honcho_hub.errors import ConfigFileError
from honcho_hub.settings.config import build_settings
from honcho_hub.settings.files import SettingsCache, read_config_file, write_config_file


class FakeFiles:
    """An injected `stat`: path -> (mtime_ns, size, inode); a missing path raises like os.stat."""

    def __init__(self, **files):
        self.files = {f"/cfg/{name}": info for name, info in files.items()}
        self.calls = 0

    def __call__(self, path):
        self.calls += 1
        if path not in self.files:
            raise FileNotFoundError(path)
        info = self.files[path]
        if isinstance(info, OSError):
            raise info
        mtime_ns, size, inode = info
        return types.SimpleNamespace(st_mtime_ns=mtime_ns, st_ctime_ns=mtime_ns, st_size=size,
                                     st_ino=inode)


class SettingsCacheTest(unittest.TestCase):
    FILES = ("/cfg/default.yaml", "/cfg/global.json", "/cfg/project.json", "/cfg/secrets.env")

    def setUp(self):
        self.stat = FakeFiles(**{"default.yaml": (100, 50, 1), "global.json": (200, 60, 2),
                                 "secrets.env": (300, 70, 3)})  # no project config saved yet
        self.environ = {"HONCHO_API_URL": "http://a:1", "PATH": "/bin"}
        self.cache = SettingsCache(max_entries=3, stat=self.stat, environ=self.environ)
        self.builds = []

    def get(self, key="chat-1"):
        def build():
            self.builds.append(key)
            return build_settings({}, {}, dict(self.environ), agent_zero_usr=A0_USR)
        return self.cache.get(key, self.FILES, build)

    def test_nothing_changed_gives_the_same_settings_without_building(self):
        first = self.get()
        self.assertIs(self.get(), first)
        self.assertEqual(self.builds, ["chat-1"])
        self.assertEqual(self.stat.calls, 2 * len(self.FILES))

    def test_each_change_of_a_file_or_a_honcho_variable_builds_again(self):
        changes = [
            ("mtime", lambda: self.stat.files.update({"/cfg/global.json": (201, 60, 2)})),
            ("size", lambda: self.stat.files.update({"/cfg/default.yaml": (100, 51, 1)})),
            ("replaced by rename",
             lambda: self.stat.files.update({"/cfg/secrets.env": (300, 70, 9)})),
            ("created", lambda: self.stat.files.update({"/cfg/project.json": (400, 10, 4)})),
            ("deleted", lambda: self.stat.files.pop("/cfg/global.json")),
            ("unreadable folder",
             lambda: self.stat.files.update({"/cfg/secrets.env": PermissionError(13, "no")})),
            ("variable changed", lambda: self.environ.update({"HONCHO_API_URL": "http://b:1"})),
            ("variable added", lambda: self.environ.update({"honcho_workspace_id": "w2"})),
            ("variable removed", lambda: self.environ.pop("HONCHO_API_URL")),
        ]
        for what, change in changes:
            with self.subTest(change=what):
                before = self.get()
                change()
                after = self.get()
                self.assertIsNot(after, before)
                self.assertIs(self.get(), after)
        self.assertEqual(len(self.builds), 1 + len(changes))

    def test_other_variables_do_not_count(self):
        first = self.get()
        self.environ["PATH"] = "/usr/bin"
        self.environ["OTHER_HONCHO_X"] = "1"
        self.assertIs(self.get(), first)

    def test_a_file_changed_while_building_is_seen_at_the_next_get(self):
        def build_during_a_save():
            self.builds.append("racing")
            # the file is saved while being read
            self.stat.files["/cfg/global.json"] = (999, 61, 2)
            return object()

        racing = self.cache.get("chat-1", self.FILES, build_during_a_save)
        self.assertIsNot(self.get(), racing)
        self.assertEqual(self.builds, ["racing", "chat-1"])

    def test_keys_are_independent_and_the_least_recently_used_goes_first(self):
        a, b, c = self.get("a"), self.get("b"), self.get("c")
        self.assertIs(self.get("a"), a)  # a is now the most recently used
        self.get("d")  # evicts b
        self.assertIs(self.get("a"), a)
        self.assertIs(self.get("c"), c)
        self.assertIsNot(self.get("b"), b)
        self.assertEqual(self.builds, ["a", "b", "c", "d", "b"])

    def test_real_files_with_the_real_stat(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        path = os.path.join(folder.name, "config.json")
        cache = SettingsCache(environ={})
        built = []

        def build():
            built.append(1)
            return read_config_file(path)

        self.assertEqual(cache.get("k", (path,), build), {})
        with open(path, "w") as handle:
            handle.write('{"batch_size": 5}')
        self.assertEqual(cache.get("k", (path,), build), {"batch_size": 5})
        self.assertEqual(cache.get("k", (path,), build), {"batch_size": 5})
        self.assertEqual(len(built), 2)

    def test_concurrent_gets_each_get_their_own_keys_settings(self):
        cache = SettingsCache(max_entries=4, stat=self.stat, environ=self.environ)
        keys = [f"chat-{n}" for n in range(10)]
        wrong = []

        def worker(offset):
            for n in range(300):
                key = keys[(n + offset) % len(keys)]
                value = cache.get(key, self.FILES, lambda key=key: ("built for", key))
                if value != ("built for", key):
                    wrong.append((key, value))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(wrong, [])


class WriteConfigFileTest(unittest.TestCase):
    def test_a_failed_replace_leaves_the_target_and_no_temporary_file(self):
        with tempfile.TemporaryDirectory() as folder:
            target = os.path.join(folder, "config.json")
            os.mkdir(target)  # a file cannot be renamed over a folder
            with self.assertRaises(ConfigFileError) as raised:
                write_config_file(target, {"batch_size": 5})
            self.assertEqual(str(raised.exception), "cannot be written (IsADirectoryError)")
            self.assertEqual(os.listdir(folder), ["config.json"])
            self.assertTrue(os.path.isdir(target))


if __name__ == "__main__":
    unittest.main()
