import threading
import unittest
from dataclasses import dataclass, replace

from honcho_hub.keyed import Keyed, KeyedMany, fields


@dataclass(frozen=True)
class Conf:
    url: str = "http://a"
    timeout: float = 5.0
    unrelated: int = 0


class Thing:
    def __init__(self, conf: Conf) -> None:
        self.conf, self.closed = conf, 0

    def close(self) -> None:
        self.closed += 1


class Builder:
    def __init__(self) -> None:
        self.built: list[Thing] = []
        self.fail = False

    def __call__(self, conf: Conf) -> Thing:
        if self.fail:
            raise OSError("cannot build")
        thing = Thing(conf)
        self.built.append(thing)
        return thing


class FieldsTest(unittest.TestCase):
    def test_key_is_a_tuple_of_the_named_settings(self):
        for names, expected in ((("url",), ("http://a",)), (("url", "timeout"), ("http://a", 5.0))):
            with self.subTest(names=names):
                self.assertEqual(fields(*names)(Conf()), expected)

    def test_no_names_is_refused(self):
        with self.assertRaises(ValueError):
            fields()


class KeyedTest(unittest.TestCase):
    def setUp(self):
        self.build = Builder()
        self.keyed = Keyed(fields("url", "timeout"), self.build)

    def test_same_key_returns_the_same_resource(self):
        first = self.keyed.get(Conf())
        self.assertIs(self.keyed.get(Conf()), first)
        self.assertEqual(len(self.build.built), 1)

    def test_a_change_outside_the_key_rebuilds_nothing(self):
        first = self.keyed.get(Conf())
        self.assertIs(self.keyed.get(Conf(unrelated=7)), first)
        self.assertEqual(first.closed, 0)

    def test_a_change_of_the_key_closes_the_old_and_builds_a_new_one(self):
        for change in ({"url": "http://b"}, {"timeout": 9.0}):
            with self.subTest(change=change):
                keyed = Keyed(fields("url", "timeout"), Builder())
                first = keyed.get(Conf())
                second = keyed.get(replace(Conf(), **change))
                self.assertIsNot(second, first)
                self.assertEqual((first.closed, second.closed), (1, 0))
                self.assertEqual(second.conf, replace(Conf(), **change))

    def test_peek_builds_nothing(self):
        self.assertIsNone(self.keyed.peek())
        self.assertEqual(self.build.built, [])
        made = self.keyed.get(Conf())
        self.assertIs(self.keyed.peek(), made)

    def test_reset_closes_once_and_the_next_get_builds_anew(self):
        first = self.keyed.get(Conf())
        self.keyed.reset()
        self.keyed.reset()
        self.assertEqual(first.closed, 1)
        self.assertIsNone(self.keyed.peek())
        self.assertIsNot(self.keyed.get(Conf()), first)

    def test_a_failing_build_keeps_the_old_resource(self):
        first = self.keyed.get(Conf())
        self.build.fail = True
        with self.assertRaises(OSError):
            self.keyed.get(Conf(url="http://b"))
        self.assertEqual(first.closed, 0)
        self.assertIs(self.keyed.peek(), first)

    def test_custom_close_is_used(self):
        released = []
        keyed = Keyed(fields("url"), lambda conf: conf.url, close=released.append)
        keyed.get(Conf())
        keyed.get(Conf(url="http://b"))
        self.assertEqual(released, ["http://a"])

    def test_concurrent_callers_share_one_build(self):
        gate = threading.Event()
        builds = []

        def slow_build(conf):
            builds.append(conf)
            gate.wait(5)
            return Thing(conf)

        keyed = Keyed(fields("url"), slow_build)
        got: list[Thing] = []
        threads = [threading.Thread(target=lambda: got.append(keyed.get(Conf()))) for _ in range(4)]
        for thread in threads:
            thread.start()
        gate.set()
        for thread in threads:
            thread.join(5)
        self.assertEqual(len(builds), 1)
        self.assertEqual(len(got), 4)
        self.assertTrue(all(thing is got[0] for thing in got))


class KeyedManyTest(unittest.TestCase):
    def test_one_resource_per_key(self):
        build = Builder()
        many = KeyedMany(fields("url"), build, limit=8)
        a, b = many.get(Conf(url="http://a")), many.get(Conf(url="http://b"))
        self.assertIsNot(a, b)
        self.assertIs(many.get(Conf(url="http://a", unrelated=3)), a)
        self.assertEqual((len(build.built), len(many)), (2, 2))

    def test_past_the_limit_every_held_resource_is_closed(self):
        build = Builder()
        many = KeyedMany(fields("url"), build, limit=2)
        held = [many.get(Conf(url=f"http://{n}")) for n in range(2)]
        newest = many.get(Conf(url="http://2"))
        self.assertEqual([thing.closed for thing in held], [1, 1])
        self.assertEqual((newest.closed, len(many)), (0, 1))
        self.assertIs(many.get(Conf(url="http://2")), newest)

    def test_reset_closes_all(self):
        many = KeyedMany(fields("url"), Builder(), limit=4)
        held = [many.get(Conf(url=f"http://{n}")) for n in range(3)]
        many.reset()
        self.assertEqual([thing.closed for thing in held], [1, 1, 1])
        self.assertEqual(len(many), 0)

    def test_limit_below_one_is_refused(self):
        with self.assertRaises(ValueError):
            KeyedMany(fields("url"), Builder(), limit=0)


if __name__ == "__main__":
    unittest.main()
