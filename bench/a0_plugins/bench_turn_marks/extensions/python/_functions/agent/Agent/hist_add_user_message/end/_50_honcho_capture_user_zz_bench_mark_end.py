"""Sorts right after the Honcho plugin's _50_honcho_capture_user (and the empty hook named after
it): ends the user hook's timing, in microseconds."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkUserEnd(Extension):
    def execute(self, data=None, **kwargs):
        marks.end("user", 1_000)
