"""After the Honcho plugin's _55_honcho_recall: ends the recall hook's timing, in milliseconds."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkRecallEnd(Extension):
    async def execute(self, loop_data=None, **kwargs):
        if marks.first_call_of_turn(self.agent, loop_data):
            marks.end("recall", 1_000_000)
