"""Sorts right before the Honcho plugin's _50_honcho_capture_response (after Agent Zero's bundled
_50_email_response): starts the response hook's timing for the `response` tool."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkResponseStart(Extension):
    def execute(self, response=None, tool_name="", **kwargs):
        if tool_name == "response":
            marks.start("response")
