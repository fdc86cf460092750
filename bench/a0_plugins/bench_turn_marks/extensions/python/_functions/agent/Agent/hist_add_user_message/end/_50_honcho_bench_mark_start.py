"""Sorts right before the Honcho plugin's _50_honcho_capture_user: starts the user hook's timing."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkUserStart(Extension):
    def execute(self, data=None, **kwargs):
        marks.start("user")
