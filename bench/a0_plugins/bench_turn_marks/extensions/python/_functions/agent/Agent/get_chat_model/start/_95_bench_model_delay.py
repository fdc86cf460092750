"""After the scripted model's _90_: the chat model answers after BENCH_MODEL_DELAY_MS."""

from helpers.extension import Extension
from usr.plugins.bench_turn_marks.marks import DelayedModel


class BenchModelDelay(Extension):
    def execute(self, data: dict = {}, **kwargs):  # noqa: B006 (Agent Zero's signature)
        if isinstance(data, dict) and data.get("result") is not None:
            data["result"] = DelayedModel(data["result"])
