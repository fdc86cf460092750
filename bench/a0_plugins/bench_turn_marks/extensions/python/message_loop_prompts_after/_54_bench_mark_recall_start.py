"""Before the Honcho plugin's _55_honcho_recall: starts the recall hook's timing."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks import marks


class BenchMarkRecallStart(Extension):
    async def execute(self, loop_data=None, **kwargs):
        if marks.first_call_of_turn(self.agent, loop_data):
            marks.start("recall")
