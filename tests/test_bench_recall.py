"""bench/recall.py's same-run baseline for a cache hit (issue 27): a bare dict lookup keyed by the
query's hash, what a hit costs without our code. No timing asserted."""

import importlib.util
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_recall",
                                                      os.path.join(ROOT, "bench", "recall.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    return module


class BareLookupTest(unittest.TestCase):
    def test_the_bare_lookup_finds_the_block_by_the_querys_hash_only(self) -> None:
        recall = bench()
        import hashlib

        cache = {hashlib.sha256(recall.QUERY.encode()).hexdigest(): "the block"}
        self.assertEqual(recall.bare_lookup(cache, recall.QUERY), "the block")
        self.assertIsNone(recall.bare_lookup(cache, recall.QUERY + " again"))


if __name__ == "__main__":
    unittest.main()
