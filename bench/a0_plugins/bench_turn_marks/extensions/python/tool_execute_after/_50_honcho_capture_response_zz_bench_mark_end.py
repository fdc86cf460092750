"""Sorts right after the Honcho plugin's _50_honcho_capture_response (and the empty hook named after
it; before the bundled _50_telegram_response): ends the response hook's timing, in microseconds."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkResponseEnd(Extension):
    def execute(self, response=None, tool_name="", **kwargs):
        if tool_name == "response":
            marks.end("response", 1_000)
