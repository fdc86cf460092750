"""Versioned URLs of the plugin's own web files (extensions/honcho_bridge/assets.py): which URLs get
the version, and the version following the files' content. Served through Agent Zero's real Flask
app in tests/host/host_assets.py."""

import os
import shutil
import tempfile
import unittest

from hub_testkit import stub_agent_zero


class VersionedUrlsTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        from usr.plugins.honcho.extensions.honcho_bridge import assets

        self.assets = assets

    def test_only_urls_of_our_own_web_files_get_the_version(self):
        cases = {
            'import { a } from "/plugins/honcho/webui/honcho-toast.js";':
                'import { a } from "/plugins/honcho/webui/honcho-toast.js?v=abc";',
            "<script src='/usr/plugins/honcho/extensions/webui/x/y.html'>":
                "<script src='/usr/plugins/honcho/extensions/webui/x/y.html?v=abc'>",
            'url("/plugins/honcho/webui/img/logo.png")':
                'url("/plugins/honcho/webui/img/logo.png?v=abc")',
            'const API = "/plugins/honcho/honcho_status";': None,  # an API route, not a file
            'import "/plugins/other/webui/store.js";': None,  # another plugin's
            'import "/plugins/honchoish/webui/store.js";': None,
            'import "/plugins/honcho/webui/store.js?v=old";': None,  # already carries a query
            'import "/js/AlpineStore.js";': None,  # Agent Zero's own
        }
        for text, expected in cases.items():
            with self.subTest(text=text):
                self.assertEqual(self.assets.versioned_urls(text, "abc"), expected or text)

    def test_the_version_changes_with_any_web_file_and_only_with_them(self):
        folder = tempfile.mkdtemp(prefix="honcho-web-")
        self.addCleanup(shutil.rmtree, folder, True)
        for relative in ("webui/a.js", "extensions/webui/slot/b.html", "api/c.py"):
            os.makedirs(os.path.dirname(os.path.join(folder, relative)), exist_ok=True)
            with open(os.path.join(folder, relative), "w", encoding="utf-8") as handle:
                handle.write("one\n")
        first = self.assets.web_version(folder)
        self.assertRegex(first, r"^[0-9a-f]{12}$")
        with open(os.path.join(folder, "api", "c.py"), "a", encoding="utf-8") as handle:
            handle.write("not served\n")
        self.assertEqual(self.assets.web_version(folder), first)
        with open(os.path.join(folder, "extensions/webui/slot/b.html"), "a",
                  encoding="utf-8") as handle:
            handle.write("two\n")
        self.assertNotEqual(self.assets.web_version(folder), first)


if __name__ == "__main__":
    unittest.main()
