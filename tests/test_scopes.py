"""Scopes: slugging rules, strategies, and sessions joining their scope before delivery (the
registrar: test_registrar.py)."""

import re
import unittest

from delivery_helpers import Bench

from honcho_hub.gateway.scopes import (
    MAX_SCOPE_ID,
    resolve_scope,
    scope_id,
    sdk_supports_scopes,
    slug,
)
from honcho_hub.settings.config import build_settings

VALID = re.compile(r"^[A-Za-z0-9_-]{1,506}$")


class SlugTest(unittest.TestCase):
    CASES = {
        "Alpha": "a0-alpha",
        "Client Work / 2026": "a0-client-work-2026",
        "Café Déjà Vu": "a0-cafe-deja-vu",
        "  spaced   out  ": "a0-spaced-out",
        "scope.secret": "a0-scope-secret",
        "under_score-dash": "a0-under_score-dash",
    }

    def test_names_become_safe_lowercase_ids(self):
        for name, expected in self.CASES.items():
            with self.subTest(name=name):
                self.assertEqual(scope_id("a0-", name), expected)

    def test_names_with_nothing_ascii_get_a_stable_distinct_digest(self):
        first, second = scope_id("a0-", "プロジェクト"), scope_id("a0-", "项目")
        self.assertRegex(first, r"^a0-x[0-9a-f]{12}$")
        self.assertNotEqual(first, second)
        self.assertEqual(first, scope_id("a0-", "プロジェクト"))
        self.assertRegex(scope_id("a0-", "🚀🚀"), r"^a0-x[0-9a-f]{12}$")

    def test_empty_names_have_no_scope(self):
        for name in ("", "   ", "\t\n"):
            with self.subTest(name=repr(name)):
                self.assertIsNone(scope_id("a0-", name))
        self.assertEqual(slug("---"), "x" + slug("---")[1:])  # only separators: a digest, not empty

    def test_very_long_names_stay_within_honchos_limit_and_distinct(self):
        a, b = scope_id("a0-", "p" * 2000 + "a"), scope_id("a0-", "p" * 2000 + "b")
        self.assertLessEqual(len(a), MAX_SCOPE_ID)
        self.assertRegex(a, VALID)
        self.assertNotEqual(a, b)

    def test_never_the_reserved_prefix(self):
        for prefix, name in (("", "scope.x"), ("", "SCOPE.x"), ("", "scope"), ("", ".scope.x")):
            with self.subTest(name=name):
                value = scope_id(prefix, name)
                self.assertFalse(value.startswith("scope."))
                self.assertRegex(value, VALID)


class StrategyTest(unittest.TestCase):
    def test_project_custom_and_off(self):
        project = build_settings({}, {}, {})
        custom = build_settings({"scope_strategy": "custom", "scope_custom": "Shared Notes"},
                                {}, {})
        custom_empty = build_settings({"scope_strategy": "custom"}, {}, {})
        off = build_settings({"scope_strategy": "off"}, {}, {})
        self.assertEqual(resolve_scope(project, "Alpha"), "a0-alpha")
        self.assertIsNone(resolve_scope(project, None))
        self.assertEqual(resolve_scope(custom, None), "a0-shared-notes")
        self.assertEqual(resolve_scope(custom, "Alpha"), "a0-shared-notes")
        self.assertIsNone(resolve_scope(custom_empty, "Alpha"))
        self.assertIsNone(resolve_scope(off, "Alpha"))
        self.assertEqual(resolve_scope(build_settings({"scope_prefix": ""}, {}, {}), "Beta"),
                         "beta")

    def test_feature_detection_looks_for_the_method_not_a_version(self):
        class New:
            class Honcho:
                def scope(self, scope_id):
                    return scope_id

        class Old:
            class Honcho:
                pass
        self.assertTrue(sdk_supports_scopes(New))
        self.assertFalse(sdk_supports_scopes(Old))
        self.assertFalse(sdk_supports_scopes(object()))


class DeliveryInScopeTest(unittest.TestCase):
    def capture(self, bench, chat, scope, n=1):
        bench.say(chat, n, scope=scope)

    def test_the_worker_puts_a_session_in_its_scope_before_its_first_batch(self):
        bench = Bench(self)
        self.capture(bench, "p1", "a0-alpha", 3)
        bench.run_until_idle()
        self.assertEqual(bench.fake.scopes[("agent-zero", "a0-alpha")], {"chat-p1"})
        paths = [path for _, path in bench.fake.requests]
        first_message = next(i for i, p in enumerate(paths)
                             if p.endswith("/sessions/chat-p1/messages"))
        joined = next(i for i, p in enumerate(paths) if p.endswith("/scopes/a0-alpha/sessions"))
        self.assertLess(joined, first_message)

    def test_a_project_attached_later_moves_new_batches_into_its_scope(self):
        bench = Bench(self)
        self.capture(bench, "p2", None, 2)  # before the chat had a project
        bench.run_until_idle()
        self.capture(bench, "p2", "a0-beta", 2)  # the project was attached afterwards
        bench.run_until_idle()
        self.assertEqual(bench.fake.scopes[("agent-zero", "a0-beta")], {"chat-p2"})
        self.assertEqual(len(bench.server_texts("p2")), 4)

    def test_a_refused_scope_does_not_stop_delivery(self):
        bench = Bench(self)
        bench.fake.fail(match=r"/scopes/a0-gamma/sessions$", status=403)
        self.capture(bench, "p3", "a0-gamma", 2)
        bench.run_until_idle()
        self.assertEqual(len(bench.server_texts("p3")), 2)
        self.assertEqual([gateway.scope_problem for gateway in bench.gateways], ["auth_403"])

    def test_an_old_sdk_skips_scopes_entirely(self):
        bench = Bench(self, supports_scopes=False)  # the capability check injected, nothing patched
        self.capture(bench, "p4", "a0-delta", 2)
        bench.run_until_idle()
        self.assertEqual(bench.fake.scopes, {})
        self.assertFalse(any("/scopes" in request.url.path for request in bench.sent))
        self.assertEqual(len(bench.server_texts("p4")), 2)


if __name__ == "__main__":
    unittest.main()
