"""One validator for the settings model and the settings page's save: bounds per field, then the
relations between fields."""

import unittest

from honcho_hub.settings.config import build_settings
from honcho_hub.settings.files import save_problems


class RelationsTest(unittest.TestCase):
    def test_a_broken_relation_is_kept_with_a_warning_saying_what_it_does(self):
        cases = [
            ({"retry_base_s": 500, "retry_max_s": 100},
             "retry_base_s must not exceed retry_max_s"
             " (kept: every backoff waits up to retry_max_s)"),
            ({"circuit_base_s": 400, "circuit_max_s": 100},
             "circuit_base_s must not exceed circuit_max_s"
             " (kept: every circuit wait is up to circuit_max_s)"),
            ({"scope_strategy": "custom", "scope_custom": ""},
             "scope_strategy custom needs a scope_custom name"
             " (kept: chats get no scope)"),
        ]
        for plugin, warning in cases:
            with self.subTest(plugin=plugin):
                settings = build_settings(plugin, {}, {})
                self.assertEqual({name: getattr(settings, name) for name in plugin},
                                 {k: (float(v) if isinstance(v, int) else v)
                                  for k, v in plugin.items()})
                self.assertIn(warning, settings.warnings)

    def test_a_lease_under_three_sdk_timeouts_falls_back_with_one_warning_naming_the_key(self):
        warning = ("lease_s must be at least 3 × sdk_timeout_s (used instead: the default lease_s,"
                   " or 3 × sdk_timeout_s when that is longer)")
        for plugin, lease_s in (({"lease_s": 20, "sdk_timeout_s": 10}, 120.0),
                                ({"sdk_timeout_s": 60}, 180.0),
                                ({"lease_s": 29.9, "sdk_timeout_s": 10}, 120.0)):
            with self.subTest(plugin=plugin):
                settings = build_settings(plugin, {}, {})
                self.assertEqual(settings.lease_s, lease_s)
                self.assertEqual(settings.warnings, (warning,))
        self.assertEqual(build_settings({"lease_s": 30, "sdk_timeout_s": 10}, {}, {}).lease_s,
                         30.0)
        self.assertEqual(save_problems({"lease_s": 20}, False, {"sdk_timeout_s": 10}),
                         ["lease_s must be at least 3 × sdk_timeout_s"])

    def test_relations_that_hold_keep_the_values(self):
        settings = build_settings({"retry_base_s": 100, "retry_max_s": 100,
                                   "scope_strategy": "custom", "scope_custom": "team"}, {}, {})
        self.assertEqual((settings.retry_base_s, settings.scope_strategy,
                          settings.scope_custom),
                         (100.0, "custom", "team"))


class SaveProblemsTest(unittest.TestCase):
    def test_each_bad_field_is_named_with_what_it_accepts(self):
        problems = save_problems({"batch_size": 999, "debug": "maybe", "workspace_id": "a b",
                                  "max_attempts": 3},
                                 False, {})
        self.assertEqual(problems, ["batch_size: out of range 1–100",
                                    "debug: expected true or false",
                                    "workspace_id: expected 1–512 of A-Z a-z 0-9 _ -"])

    def test_a_zero_cache_ttl_is_refused_with_the_bound_the_model_uses(self):
        for is_project in (True, False):
            with self.subTest(is_project=is_project):
                self.assertEqual(save_problems({"cache_ttl_s": 0}, is_project, {}),
                                 ["cache_ttl_s: out of range 1–3,600"])
                self.assertEqual(save_problems({"cache_ttl_s": 1}, is_project, {}), [])

    def test_a_recall_wait_past_the_recall_deadline_is_refused(self):
        self.assertEqual(save_problems({"recall_wait_ms": 3000}, True, {}),
                         ["recall_wait_ms must not exceed recall_timeout_s"])
        self.assertEqual(save_problems({"recall_wait_ms": 3000, "recall_timeout_s": 3}, True, {}),
                         [])
        self.assertEqual(save_problems({"recall_wait_ms": -1, "recall_timeout_s": 0.1}, True, {}),
                         [])
        self.assertEqual(save_problems({"recall_wait_ms": -5}, True, {}),
                         ["recall_wait_ms: out of range -1–60,000"])

    def test_relations_use_the_saved_global_values_for_what_the_form_does_not_change(self):
        self.assertEqual(save_problems({"retry_base_s": 50}, False, {"retry_max_s": 10}),
                         ["retry_base_s must not exceed retry_max_s"])
        self.assertEqual(save_problems({"retry_base_s": 5}, False, {"retry_max_s": 10}), [])

    def test_a_project_save_checks_only_what_a_project_keeps(self):
        self.assertEqual(save_problems({"batch_size": 999, "cache_ttl_s": 30}, True, {}), [])
        self.assertEqual(save_problems({"scope_strategy": "custom", "scope_custom": ""}, True, {}),
                         ["scope_strategy custom needs a scope_custom name"])

    def test_unknown_keys_are_not_problems_and_a_non_object_is(self):
        self.assertEqual(save_problems({"colour": "red"}, False, {}), [])
        self.assertEqual(save_problems(["batch_size"], False, {}), ["settings must be an object"])


if __name__ == "__main__":
    unittest.main()
