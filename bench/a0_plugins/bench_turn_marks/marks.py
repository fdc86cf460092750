"""What the marks extensions recorded, read by bench/a0_turn.py in the same process.

Agent Zero runs a hook point's extensions in the order of their file names, whatever plugin holds
them, so a mark named just before the Honcho plugin's extension and one named just after it bracket
that extension alone (or, with the plugin off, the empty hook named between them).
"""

import asyncio
import os
import time

# hook -> microseconds (user, response) or milliseconds (recall) of each call, oldest first
samples: dict[str, list[float]] = {"user": [], "response": [], "recall": []}
# perf_counter() when each chat-model call started (before its delay)
model_calls: list[float] = []
_started: dict[str, int] = {}


def start(hook: str) -> None:
    _started[hook] = time.perf_counter_ns()


def end(hook: str, unit_ns: int) -> None:
    began = _started.pop(hook, None)
    if began is not None:
        samples[hook].append((time.perf_counter_ns() - began) / unit_ns)


def first_call_of_turn(agent, loop_data) -> bool:
    """Agent 0's first model call of a turn: the only call the Honcho plugin recalls for."""
    return getattr(agent, "number", None) == 0 and getattr(loop_data, "iteration", None) == 0


class DelayedModel:
    """The scripted chat model, answering after BENCH_MODEL_DELAY_MS (a model's own latency)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self._delay_s = float(os.environ.get("BENCH_MODEL_DELAY_MS", "0")) / 1000

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def unified_call(self, *args, **kwargs):
        model_calls.append(time.perf_counter())
        await asyncio.sleep(self._delay_s)
        return await self._inner.unified_call(*args, **kwargs)
