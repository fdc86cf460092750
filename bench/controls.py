"""Memory-controls benchmark: prints one JSON line.

Remote calls per turn: a scripted 20-turn conversation (one chat, each turn captured, delivered and
recalled as the plugin does it, tests/conversation.py) against the fake Honcho in this process, for
each combination of `context_cadence` (1, 2, 5) and the dialectic layer (off, or `dialectic_cadence`
1, 2, 5 × `dialectic_depth` 1, 2, 3); counted: the session context calls and the dialectic (peer
chat) calls. The fake's dialectic answer is short, so no pass ends early: these are the most calls a
combination makes.

Turn latency and note share: `bench/turn.py` (the plugin's Agent Zero hooks on one event loop, the
fake Honcho in its own process behind a proxy adding 56 ms to every answer, new chats every 5 turns)
run with the dialectic off, at its defaults (cadence 2, depth 1) and at its heaviest (cadence 1,
depth 3): `added_turn_ms_p50/p99` of each, and `dialectic_note_share`, the share of turns whose pack
carried a note. The dialectic's answers take the proxy's 56 ms here; a real LLM takes seconds, so on
a real server fewer turns find their note ready (the note of turn n reaches turn n + 1 or later).
The turn-latency target (issue 12) is `added_turn_ms_p50` ≤ 45 at 56 ms.

Same-run baselines (issue 27): the three settings run forth and back (off, default, heaviest,
heaviest, default, off), each run half of `--turns`, so a drift of the machine's load falls on
each alike; a setting's figure is the mean of its two runs. The dialectic-off runs are the
baseline of the others: `added_turn_ms_p50/p99_dialectic_<name>_baseline` (off's) and
`_over_baseline` (the dialectic's part; `dialectic_added_ms_p50_<name>` is the same difference,
kept under its older name). Each run's own baseline comes along from bench/turn.py: the loop probe
with the hooks off, as `loop_block_ms_p99_dialectic_<name>`, `..._baseline`, `..._over_baseline`.
`load_avg_start`, `load_avg`: the machine's load at the start and the end.

    python bench/controls.py [--turns 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from baseline import beside, mirrored  # noqa: E402
from conversation import Conversation  # noqa: E402
from load import load_avg  # noqa: E402

TURNS = 20
CONTEXT_CADENCES = (1, 2, 5)
DIALECTIC_CADENCES = (1, 2, 5)
DEPTHS = (1, 2, 3)
TURN_TARGET_MS_P50 = 45.0
LATENCY_RUNS = {"off": [], "default": ["dialectic_enabled=true"],
                "heaviest": ["dialectic_enabled=true", "dialectic_cadence=1", "dialectic_depth=3"]}


class _Owner(unittest.TestCase):
    """What Conversation needs of a test: assertions and cleanups."""

    def runTest(self) -> None:  # pragma: no cover - never run as a test
        pass


def calls_per_turn(context_cadence: int, dialectic: tuple[int, int] | None) -> dict:
    owner = _Owner()
    settings: dict = {"context_cadence": context_cadence}
    if dialectic is not None:
        settings.update(dialectic_enabled=True, dialectic_cadence=dialectic[0],
                        dialectic_depth=dialectic[1])
    try:
        conversation = Conversation(owner, **settings)
        for turn in range(TURNS):
            conversation.turn("bench", f"question {turn}: which tea should I buy for the winter?")
        context = sum(1 for r in conversation.bench.sent
                      if r.method == "GET" and "/sessions/" in r.url.path
                      and r.url.path.endswith("/context"))
        chats = conversation.count("POST", "/peers/agent-zero/chat")
    finally:
        owner.doCleanups()
    return {"context": round(context / TURNS, 3), "dialectic": round(chats / TURNS, 3)}


def turn_run(settings: list[str], turns: int) -> dict:
    command = [sys.executable, os.path.join(ROOT, "bench", "turn.py"),
               "--turns", str(turns), "--kills", "0"]
    for item in settings:
        command += ["--set", item]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_order() -> list[str]:
    """The latency runs' order: each setting twice, forth and back."""
    return mirrored(list(LATENCY_RUNS))


def latency_figures(runs: list[tuple[str, dict]]) -> dict:
    """The line's latency keys from bench/turn.py's lines, (setting, line) in run order: each
    setting's mean over its runs, beside the dialectic-off runs' mean."""
    def mean(name: str, key: str) -> float:
        values = [line[key] for ran, line in runs if ran == name]
        return sum(values) / len(values)

    names = list(dict.fromkeys(name for name, _ in runs))
    figures: dict = {"latency_ms": runs[0][1]["latency_ms"]}
    for q in ("p50", "p99"):
        key = f"added_turn_ms_{q}"
        for name in names:
            if name == "off":
                figures[f"{key}_dialectic_off"] = round(mean("off", key), 2)
            else:
                figures.update(beside(f"{key}_dialectic_{name}", mean(name, key),
                                      mean("off", key), digits=2))
    for name in names:
        if name != "off":
            figures[f"dialectic_added_ms_p50_{name}"] = figures[
                f"added_turn_ms_p50_dialectic_{name}_over_baseline"]
    figures["turn_target_ms_p50"] = TURN_TARGET_MS_P50
    for name in names:
        figures[f"dialectic_note_share_{name}"] = round(mean(name, "dialectic_note_share"), 3)
    for name in names:
        figures.update(beside(f"loop_block_ms_p99_dialectic_{name}",
                              mean(name, "loop_block_ms_p99"),
                              mean(name, "loop_block_ms_p99_baseline"), digits=2))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="turns of each bench/turn.py run")
    args = parser.parse_args()
    load_start = load_avg()
    calls = {}
    for context_cadence in CONTEXT_CADENCES:
        calls[f"context{context_cadence}_dialectic_off"] = calls_per_turn(context_cadence, None)
        for dialectic_cadence in DIALECTIC_CADENCES:
            for depth in DEPTHS:
                calls[f"context{context_cadence}_dialectic{dialectic_cadence}_depth{depth}"] = (
                    calls_per_turn(context_cadence, (dialectic_cadence, depth)))
    half = max(1, args.turns // 2)
    runs = [(name, turn_run(LATENCY_RUNS[name], half)) for name in run_order()]
    print(json.dumps({
        "turns_per_conversation": TURNS, "calls_per_turn": calls,
        "latency_turns": 2 * half, "latency_turns_per_run": half,
        **latency_figures(runs),
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


if __name__ == "__main__":
    main()
