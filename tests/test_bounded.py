import unittest

from honcho_hub.bounded import BoundedMap


class BoundedMapTest(unittest.TestCase):
    def test_a_put_past_the_bound_drops_the_least_recently_put(self):
        kept = BoundedMap(3)
        for key in "abcd":
            kept.put(key, key.upper())
        self.assertEqual(list(kept.items()), [("b", "B"), ("c", "C"), ("d", "D")])

    def test_putting_a_known_key_again_makes_it_the_newest(self):
        kept = BoundedMap(2)
        kept.put("a", 1)
        kept.put("b", 2)
        kept.put("a", 3)
        kept.put("c", 4)
        self.assertEqual(dict(kept), {"a": 3, "c": 4})

    def test_a_read_that_counts_as_a_use_keeps_its_entry(self):
        kept = BoundedMap(2)
        kept.put("a", 1)
        kept.put("b", 2)
        kept.move_to_end("a")
        kept.put("c", 3)
        self.assertEqual(list(kept), ["a", "c"])

    def test_a_bound_given_at_the_put_wins_and_at_least_one_entry_is_kept(self):
        cases = [(5, 5), (2, 2), (1, 1), (0, 1), (-3, 1)]  # (bound at the put, entries kept)
        for bound, size in cases:
            with self.subTest(bound=bound):
                kept: BoundedMap[int, int] = BoundedMap()
                for n in range(6):
                    kept.put(n, n, bound)
                self.assertEqual(list(kept), list(range(6 - size, 6)))

    def test_a_map_without_a_bound_refuses_a_put_without_one(self):
        with self.assertRaises(TypeError):
            BoundedMap().put("a", 1)


if __name__ == "__main__":
    unittest.main()
