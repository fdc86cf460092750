"""bench/recall.py's same-run baseline for a cache hit (issue 27): a bare dict lookup keyed by the
query's hash, what a hit costs without our code. No timing asserted."""

import unittest

from bench_testkit import load_bench


def bench():
    return load_bench("recall")


class BareLookupTest(unittest.TestCase):
    def test_the_bare_lookup_finds_the_block_by_the_querys_hash_only(self) -> None:
        recall = bench()
        import hashlib

        cache = {hashlib.sha256(recall.QUERY.encode()).hexdigest(): "the block"}
        self.assertEqual(recall.bare_lookup(cache, recall.QUERY), "the block")
        self.assertIsNone(recall.bare_lookup(cache, recall.QUERY + " again"))


if __name__ == "__main__":
    unittest.main()
