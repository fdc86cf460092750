"""An argument of a call as Agent Zero's `@extensible` passes it to an extension (`data["args"]`,
`data["kwargs"]`), read by the one function every bridge module uses (host.call_argument)."""

import unittest

from hub_testkit import stub_agent_zero


class CallArgumentTest(unittest.TestCase):
    def setUp(self):
        stub = stub_agent_zero()
        stub.__enter__()
        self.addCleanup(stub.__exit__, None, None, None)
        from usr.plugins.honcho.extensions.honcho_bridge.host import call_argument
        self.argument = call_argument

    def test_an_argument_is_read_by_position_or_by_name(self):
        by_position = {"args": ("self", "hello"), "kwargs": {}}
        by_name = {"args": ("self",), "kwargs": {"message": "hello"}}
        for data in (by_position, by_name):
            with self.subTest(data=data):
                self.assertEqual(self.argument(data, 1, "message"), "hello")

    def test_a_missing_argument_is_the_default(self):
        for data in ({"args": ("self",), "kwargs": {"other": 1}}, {}, {"args": None,
                                                                      "kwargs": None}, None):
            with self.subTest(data=data):
                self.assertIsNone(self.argument(data, 1, "message"))
                self.assertFalse(self.argument(data, 2, "intervention", False))

    def test_an_argument_only_ever_passed_by_name_is_never_read_by_position(self):
        self.assertIsNone(self.argument({"args": ("self", "text", "an id")}, None, "llm_result"))
        self.assertEqual(self.argument({"kwargs": {"llm_result": "r"}}, None, "llm_result"), "r")

    def test_an_argument_passed_as_none_stays_none(self):
        self.assertIsNone(self.argument({"args": ("self", None)}, 1, "message", "default"))
        self.assertIsNone(self.argument({"kwargs": {"message": None}}, 1, "message", "default"))


if __name__ == "__main__":
    unittest.main()
