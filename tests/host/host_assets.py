"""The plugin's web files as Agent Zero's own Flask app serves them (run_ui's routes).

v2.x's web UI registers a service worker that caches same-origin JS, CSS and HTML; v1.7's is empty,
so the caching itself cannot be reproduced here. What the plugin controls is tested instead: every
URL our HTML and JS use for our own files carries the version of our web files (a digest of their
content), so an update is fetched under new URLs, and each of our files is served with
`Cache-Control: no-cache` and an ETag that a conditional request answers with 304; a file whose
URLs were rewritten carries no `Last-Modified` (its body changes when another file does). Other
plugins' files are served as Agent Zero serves them.
"""

from __future__ import annotations

import os
import re
import unittest

import host_kit

OUR_URL = re.compile(r"""["'](/(?:usr/)?plugins/honcho/(?:webui|extensions/webui)/[^"'?\s]+)"""
                     r"""(\?[^"'\s]*)?["']""")
SERVED = {  # how Agent Zero's front end asks for each of our files
    "sidebar": "/usr/plugins/honcho/extensions/webui/sidebar-bottom-wrapper-start/"
               "honcho-sidebar.html",
    "settings": "/plugins/honcho/webui/config.html",
    "store": "/plugins/honcho/webui/honcho-store.js",
    "inspector": "/plugins/honcho/webui/honcho-inspector.html",
    "inspector store": "/plugins/honcho/webui/honcho-inspector-store.js",
    "toast": "/plugins/honcho/webui/honcho-toast.js",
    # Agent Zero's JS extension loader imports it by the path /api/load_webui_extensions names
    "receipts": "/usr/plugins/honcho/extensions/webui/set_messages_after_loop/honcho-receipts.js",
}
OTHER_PLUGIN_FILE = "/plugins/_chat_compaction/webui/compact-store.js"

world: host_kit.HostWorld


def setUpModule() -> None:
    global world
    world = host_kit.HostWorld()


def client():
    """A test client of Agent Zero's own Flask app (the harness builds it with the API's routes)."""
    world.host.api("plugins/honcho/honcho_status")
    return world.host._api[0]


def versions_in(text: str) -> dict[str, str]:
    """Each URL of our own files in `text`, with the query it carries ('' without one)."""
    return {match.group(1): match.group(2) or "" for match in OUR_URL.finditer(text)}


class AssetsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.client = client()
        cls.responses = {name: cls.client.get(url) for name, url in SERVED.items()}

    def test_each_of_our_files_is_served_for_revalidation(self) -> None:
        for name, response in self.responses.items():
            with self.subTest(file=name):
                self.assertEqual(response.status_code, 200)
                self.assertIn("no-cache", response.headers.get("Cache-Control", ""))
                self.assertTrue(response.headers.get("ETag"))

    def test_a_rewritten_file_carries_no_last_modified(self) -> None:
        # Its body depends on the other files' versions too: its own file's date would lie.
        for name, response in self.responses.items():
            with self.subTest(file=name):
                self.assertNotIn("Last-Modified", response.headers)

    def test_a_conditional_request_with_the_etag_gets_304(self) -> None:
        for name, url in SERVED.items():
            with self.subTest(file=name):
                etag = self.responses[name].headers["ETag"]
                again = self.client.get(url, headers={"If-None-Match": etag})
                self.assertEqual(again.status_code, 304)

    def test_every_url_of_our_own_files_carries_one_version(self) -> None:
        found: dict[str, str] = {}
        for response in self.responses.values():
            found.update(versions_in(response.get_data(as_text=True)))
        self.assertGreaterEqual(len(found), 4, found)  # store, toast, inspector and its store
        queries = set(found.values())
        self.assertEqual(len(queries), 1, found)
        self.assertRegex(queries.pop(), r"^\?v=[0-9a-f]{12,}$")
        for url, query in found.items():
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url + query).status_code, 200)

    def test_another_plugins_file_is_served_as_agent_zero_serves_it(self) -> None:
        response = self.client.get(OTHER_PLUGIN_FILE)
        self.assertEqual(response.status_code, 200)
        with open(os.path.join(world.tree, OTHER_PLUGIN_FILE.lstrip("/")), "rb") as handle:
            self.assertEqual(response.get_data(), handle.read())


class UpdateTest(unittest.TestCase):
    """After AssetsTest (alphabetical order): it changes one of the tree's files."""

    def test_a_changed_file_changes_the_version_and_the_etag(self) -> None:
        web = client()
        sidebar, toast = web.get(SERVED["sidebar"]), web.get(SERVED["toast"])
        before = versions_in(sidebar.get_data(as_text=True))
        with open(os.path.join(world.plugin_dir, "webui", "honcho-toast.js"), "a",
                  encoding="utf-8") as handle:
            handle.write("\n// changed by an update\n")
        sidebar_after = web.get(SERVED["sidebar"])
        after = versions_in(sidebar_after.get_data(as_text=True))
        self.assertEqual(set(after), set(before))
        self.assertNotEqual(set(after.values()), set(before.values()))
        self.assertNotEqual(sidebar_after.headers["ETag"], sidebar.headers["ETag"])
        changed = web.get(SERVED["toast"], headers={"If-None-Match": toast.headers["ETag"]})
        self.assertEqual(changed.status_code, 200)
        self.assertTrue(changed.get_data(as_text=True).endswith("// changed by an update\n"))
        # The sidebar's file did not change, its body did (the URLs it names): a client that
        # revalidates by date alone must get the new body, not 304.
        by_date = web.get(SERVED["sidebar"], headers={
            "If-Modified-Since": sidebar.headers.get("Last-Modified") or sidebar.headers["Date"]})
        self.assertEqual(by_date.status_code, 200)
        self.assertEqual(versions_in(by_date.get_data(as_text=True)), after)


if __name__ == "__main__":
    unittest.main()
