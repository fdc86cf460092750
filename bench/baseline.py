"""Same-run baselines (issue 27): a bench times its own call and a baseline beside it, turn about,
so that the machine's load falls on both alike and the difference is ours."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def alternated(ours: Callable[[], object], baseline: Callable[[], object], runs: int,
               clock: Callable[[], int] = time.perf_counter_ns) -> tuple[list[float], list[float]]:
    """`runs` timings (microseconds) of `ours` and of `baseline`, turn about and in mirrored order
    (ours first on even runs, the baseline first on odd ones): neither always runs just after the
    other."""
    timings: dict[bool, list[float]] = {True: [], False: []}
    for run in range(runs):
        for is_ours in ((True, False) if run % 2 == 0 else (False, True)):
            call = ours if is_ours else baseline
            started = clock()
            call()
            timings[is_ours].append((clock() - started) / 1000)
    return timings[True], timings[False]


def mirrored(names: Sequence[str]) -> list[str]:
    """Whole runs in the order a, b, c, c, b, a: a drift of the machine over the runs falls on each
    alike."""
    return [*names, *reversed(names)]


def beside(key: str, ours: float, baseline: float, digits: int = 1) -> dict[str, float]:
    """`key` (ours), `key_baseline` and `key_over_baseline` (the difference)."""
    return {key: round(ours, digits), f"{key}_baseline": round(baseline, digits),
            f"{key}_over_baseline": round(ours - baseline, digits)}
