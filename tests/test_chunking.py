"""Splitting a long message into parts Honcho accepts, and cleaning its text
(capture/chunking.py)."""

import re
import unittest

from honcho_hub.capture.chunking import clean_text, split_message

_MARKER = re.compile(r"^\[continued, part \d+ of \d+\]\n")


def strip_marker(part):
    """A part's body without its continuation marker: the parts' bodies join back to the text."""
    return _MARKER.sub("", part, count=1)


class ChunkingTest(unittest.TestCase):
    def test_boundaries_in_order_of_preference(self):
        limit = 200
        cases = {
            "paragraph": ("word " * 25 + "\n\n") * 6,
            "sentence": "This is one sentence. " * 40,
            "word": "lorem " * 120,
            "none": "x" * 1000,
            "combining": ("e\u0301" * 400),
        }
        for name, text in cases.items():
            with self.subTest(name=name):
                parts = split_message(text, limit)
                self.assertTrue(all(len(p) <= limit for p in parts))
                self.assertEqual("".join(strip_marker(p) for p in parts), text)
                first = strip_marker(parts[0])
                if name == "paragraph":
                    self.assertTrue(first.endswith("\n\n"))
                elif name == "sentence":
                    self.assertTrue(first.endswith(". "))
                elif name == "word":
                    self.assertTrue(first.endswith(" "))
                elif name == "combining":
                    self.assertFalse(strip_marker(parts[1])[0] == "\u0301")

    def test_short_text_is_one_part_without_marker(self):
        self.assertEqual(split_message("short"), ["short"])

    def test_clean_text(self):
        self.assertEqual(clean_text("a\r\nb\x00c\x1f\ud83dd"), "a\nbc\ufffdd")


if __name__ == "__main__":
    unittest.main()
