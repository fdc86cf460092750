"""An empty hook where the Honcho plugin captures the final response (sorted right after its
_50_honcho_capture_response, inside the timing marks): the baseline of bench/a0_turn.py."""

from helpers.extension import Extension


class BenchEmptyResponseHook(Extension):
    def execute(self, response=None, tool_name="", **kwargs):
        return None
