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
    runs = {name: turn_run(settings, args.turns) for name, settings in LATENCY_RUNS.items()}
    off = runs["off"]["added_turn_ms_p50"]
    print(json.dumps({
        "turns_per_conversation": TURNS, "calls_per_turn": calls,
        "latency_turns": args.turns, "latency_ms": runs["off"]["latency_ms"],
        **{f"added_turn_ms_p50_dialectic_{name}": run["added_turn_ms_p50"]
           for name, run in runs.items()},
        **{f"added_turn_ms_p99_dialectic_{name}": run["added_turn_ms_p99"]
           for name, run in runs.items()},
        **{f"dialectic_added_ms_p50_{name}": round(run["added_turn_ms_p50"] - off, 2)
           for name, run in runs.items() if name != "off"},
        "turn_target_ms_p50": TURN_TARGET_MS_P50,
        **{f"dialectic_note_share_{name}": run["dialectic_note_share"]
           for name, run in runs.items()},
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


if __name__ == "__main__":
    main()
