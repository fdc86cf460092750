"""Turn benchmark: how long our hooks hold a turn and Agent Zero's event loop; prints one JSON line.

Drives user turns through the plugin's Agent Zero code paths, loaded as Agent Zero loads them (a
stub host, see tests/hub_testkit.py) and run on one asyncio loop as Agent Zero runs every chat: the
capture hook (`hist_add_user_message`), a 20 ms gap standing for Agent Zero's own prompt building,
the recall hook (`message_loop_prompts_after`), then the final response's capture
(`tool_execute_after`). Each chat starts with the agent-init hook. Honcho is the fake in its own
process behind a proxy (its own process too) that delays every answer by `--latency-ms`, or a real
server with `--url`.

The middle third of the turns runs while another process holds the outbox's write lock, and every
tenth message is a 1 MB paste. A loop-lag probe (a 1 ms timer) measures how long the loop could not
run. Then `--kills` times a process that accepted messages while the outbox was locked is killed
with SIGKILL, and what it accepted is looked for in the outbox after its journal was replayed.

    python bench/turn.py [--url URL] [--latency-ms 300] [--wait-ms W] [--turns 200] [--kills 20]
                         [--set SETTING=VALUE ...]

Before each chat's turns, as many turns run with the plugin's hooks off (the same waits, no hook
called), under the same load and outbox lock: the probe's same-run baseline.

Figures: `added_turn_ms_p50/p99/max` — time the three hooks held the turn (the 20 ms gap excluded:
memory on − off); `loop_block_ms_p99/max` — event-loop lateness of the probe while turns ran;
`loop_block_ms_p99_baseline`, `loop_block_ms_max_baseline` — the same in the turns with the hooks
off; `loop_block_ms_p99_over_baseline` — the difference, what the targets apply to;
`load_avg_start`, `load_avg` — the machine's 1/5/15-minute load averages at the start and the end;
`query_aware_first_call_share` — turns whose recall was searched with the current message;
`base_pack_share` — turns that got the base pack instead; `empty_pack_share` — turns with nothing
injected, after `warmup_turns`; `accepted` — messages the capture hook accepted; `lost_after_kill` —
accepted by a killed process, missing after the replay; `dialectic_note_share` — turns whose pack
carried the dialectic's note (with `--set dialectic_enabled=true`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import random
import signal
import sys
import tempfile
import time
import types
from datetime import UTC, datetime

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

import httpx  # noqa: E402
from delivery import client, start_loopback, stop_loopback  # noqa: E402
from fault_proxy import start_delaying  # noqa: E402
from hub_testkit import StubAgent, StubContext, StubHistoryMessage, stub_agent_zero  # noqa: E402
from idle import wait_idle  # noqa: E402
from load import load_avg  # noqa: E402
from outbox_helpers import (  # noqa: E402
    hold_write_lock,
    read_outbox,
    release_lock,
    run_child,
    write_journal,
)

from honcho_hub.recall.pack import NOTE_TITLE  # noqa: E402

KEY = "bench-turn-key"
GAP_S = 0.020
CHAT_TURNS = 5  # turns per chat: every fifth turn is a new chat's first
PASTE_EVERY = 10
WARMUP_TURNS = 5
PROBE_S = 0.001
MESSAGES = ["Which tea did I say I like, and where should I buy it in Lisbon?",
            "Remind me what we planned for my sister's visit in June.",
            "Can you draft a short reply to the studio in Berlin about the deadline?",
            "What do you remember about my diet when suggesting restaurants?",
            "Summarise the Python examples you gave me last week in two lines."]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def paste(n: int) -> str:
    """About 1 MB of mixed scripts and code, different every time."""
    line = (f"{n}: def handler(event): return {{'ok': True}}  "
            "# Grüße, привет, 你好, مرحبا, こんにちは 🙂 "
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n")
    return (line * (1_000_000 // len(line) + 1))[:1_000_000]


def seed_memory(url: str, workspace: str, fake: bool) -> None:
    """Something to recall: the agent's representation and card of the user."""
    if fake:
        headers = {"Authorization": f"Bearer {KEY}"}
        httpx.post(f"{url}/v3/workspaces", json={"id": workspace}, headers=headers)
        for peer in ("agent-zero", "user"):  # they exist: earlier chats were delivered
            httpx.post(f"{url}/v3/workspaces/{workspace}/peers", json={"id": peer},
                       headers=headers)
        httpx.post(f"{url}/_fake/remember", json={
            "observer": "agent-zero", "target": "user", "card": ["Name: Ada", "Lives in Lisbon"],
            "representation": "The user prefers green tea and short answers."})
        return
    honcho = client(url, KEY, workspace)
    honcho.peer("agent-zero").set_card(["Name: Ada", "Lives in Lisbon"], target="user")


class GcPauses:
    """The interpreter's garbage-collection passes (any thread's allocations trigger one, and it
    holds every thread), so a loop stall can be told apart from one our hooks or threads caused."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.spans.append((self._started, time.perf_counter()))

    def overlaps(self, start: float, end: float) -> bool:
        return any(s < end and e > start for s, e in self.spans)


class Probe:
    """How late a 1 ms timer fires: how long something held the loop. Samples (start, end, lag ms)
    go to the phase being measured: "on" (turns with the plugin's hooks), "off" (the same turns
    without them: the same-run baseline), none between turns."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[float, float, float]]] = {"on": [], "off": []}
        self.phase: str | None = None

    async def run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            end = time.perf_counter()
            if self.phase is not None:
                lag_ms = max(0.0, end - start - PROBE_S) * 1000
                self.samples[self.phase].append((start, end, lag_ms))


async def turn_without_hooks(probe: Probe) -> None:
    """A turn as Agent Zero runs it with the plugin's hooks off: the same waits, no hook."""
    probe.phase = "off"
    await asyncio.sleep(GAP_S)  # Agent Zero builds the prompt meanwhile
    probe.phase = None
    await asyncio.sleep(0.005)  # between turns: the user reads the answer


async def drive(bridge: dict, turns: int, outbox_path: str) -> dict:
    capture, recall, worker = bridge["capture"], bridge["recall"], bridge["process_hub"]
    probe = Probe()
    prober = asyncio.create_task(probe.run())
    added, sources, outcomes, empty, notes = [], [], [], 0, 0
    lock_from, lock_to = turns // 3, 2 * turns // 3
    # spawned now: a process start is not ours to count
    holder = run_child(CHILD_LOCK_ON_REQUEST, outbox_path)
    agent = None
    await start_up(worker, recall)
    try:
        for turn in range(turns):
            # lock, then release, the outbox from the other process
            if turn in (lock_from, lock_to):
                holder.stdin.write("\n")
                holder.stdin.flush()
                await asyncio.to_thread(holder.stdout.readline)
            if turn % CHAT_TURNS == 0:
                # a chat's turns without the hooks before each chat's with them: the baseline
                for _ in range(CHAT_TURNS):
                    await turn_without_hooks(probe)
                agent = StubAgent(0, StubContext(id=f"bench{turn:04d}",
                                                 created_at=datetime.now(UTC)))
                worker.ensure_worker()
                recall.register_chat(agent)  # agent_init: warms the base pack
            pasted = turn % PASTE_EVERY == PASTE_EVERY - 1
            text = paste(turn) if pasted else f"{MESSAGES[turn % len(MESSAGES)]} ({turn})"
            message = types.SimpleNamespace(message=text, attachments=[], system_message=[], id="")
            data = {"args": (agent, message), "kwargs": {},
                    "result": StubHistoryMessage(False, f"h{turn}"), "exception": None}
            probe.phase = "on"
            start = time.perf_counter()
            outcomes.append(str(getattr(capture.capture_user_message(agent, data), "value", "")))
            held = time.perf_counter() - start
            await asyncio.sleep(GAP_S)  # Agent Zero builds the prompt meanwhile
            loop_data = types.SimpleNamespace(
                iteration=0, extras_persistent={}, user_message=types.SimpleNamespace(
                    content={"user_message": text, "system_message": [], "attachments": []}))
            start = time.perf_counter()
            sources.append(await recall.inject_recall(agent, loop_data))
            held += time.perf_counter() - start
            block = loop_data.extras_persistent.get("honcho_memory") or ""
            if turn >= WARMUP_TURNS and not block:
                empty += 1
            notes += NOTE_TITLE in block
            agent.history.current.messages.append(StubHistoryMessage(True, f"ai{turn}"))
            start = time.perf_counter()
            capture.capture_final_response(agent, "response",
                                           types.SimpleNamespace(message=f"Answer {turn}."))
            held += time.perf_counter() - start
            probe.phase = None
            added.append(held * 1000)
            await asyncio.sleep(0.005)  # between turns: the user reads the answer
    finally:
        holder.kill()
        holder.wait(30)
        prober.cancel()
    return {"added": added, "sources": sources, "outcomes": outcomes, "empty": empty,
            "lags": probe.samples["on"], "baseline_lags": probe.samples["off"], "notes": notes}


async def start_up(worker, recall) -> None:
    """Agent Zero's start: the first chat's agent-init hook loads the plugin's delivery and recall
    modules in the background; the user types a moment later. Waits (at most 60 s) until they are
    loaded."""
    worker.ensure_worker()
    recall.register_chat(StubAgent(0, StubContext(id="benchstart")))
    the_hub = worker.hub()
    deadline = time.monotonic() + 60
    while ((the_hub.ready_recaller() is None or the_hub.worker() is None)
           and time.monotonic() < deadline):
        await asyncio.sleep(0.05)
    if the_hub.ready_recaller() is not None:
        # the base pack's first load
        await asyncio.to_thread(wait_idle, 60, the_hub.ready_recaller())


CHILD_LOCK_ON_REQUEST = r"""
import sqlite3, sys
sys.stdin.readline()
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
sys.stdin.readline()
"""


CHILD_ACCEPT_UNTIL_KILLED = r"""
import sys
sys.path.insert(0, sys.argv[1])
from honcho_hub.capture.service import CaptureRequest, CaptureService, Role
from honcho_hub.settings.config import build_settings
settings = build_settings({"outbox_path": sys.argv[2], "capture_wait_ms": 10}, {}, {})
service = CaptureService(settings, fallback_journal_folder=sys.argv[3])
for i in range(1000):
    outcome = service.accept(CaptureRequest(sys.argv[4], Role.USER, f"k{i}", f"kill test {i}"),
                             settings)
    print(outcome.value, i, flush=True)
sys.stdin.readline()
"""


def kills(outbox_path: str, fallback: str, count: int, seed: int) -> dict:
    """Accept messages in a child while the outbox is locked, SIGKILL it, replay, look for them."""
    from honcho_hub.capture.service import CaptureService
    from honcho_hub.settings.config import build_settings
    from honcho_hub.storage.outbox import Outbox

    rng = random.Random(seed)
    settings = build_settings({"outbox_path": outbox_path}, {}, {})
    Outbox(outbox_path).close()  # the file the other process locks
    accepted, lost = 0, 0
    for trial in range(count):
        chat = f"killed{trial:03d}"
        holder = hold_write_lock(outbox_path)
        child = run_child(CHILD_ACCEPT_UNTIL_KILLED, ROOT, outbox_path, fallback, chat)
        lines = [child.stdout.readline() for _ in range(rng.randint(1, 40))]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        # printed after our last read: accepted too
        lines += child.stdout.read().splitlines(keepends=True)
        ids = [int(line.split()[1]) for line in lines
               if line.endswith("\n") and line.startswith("accepted ")]
        release_lock(holder)
        accepted += len(ids)
        service = CaptureService(settings, fallback_journal_folder=fallback)
        service.write_pending(settings)
        service.close()
        stored = {row[0] for row in read_outbox(
            outbox_path, "SELECT content FROM events WHERE session_id = ?", (f"chat-{chat}",))}
        lost += sum(1 for i in ids if f"kill test {i}" not in stored)
    return {"accepted": accepted, "lost": lost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a real Honcho (default: the fake in its own process)")
    parser.add_argument("--latency-ms", type=float, default=56.0)
    parser.add_argument("--wait-ms", type=int, default=-1,
                        help="recall_wait_ms (-1: the whole recall deadline)")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a plugin setting for the run (repeatable), "
                             "e.g. dialectic_enabled=true")
    args = parser.parse_args()
    chosen = {name: yaml.safe_load(value)
              for name, _, value in (item.partition("=") for item in args.set)}

    load_start = load_avg()
    fake_process = None
    pauses = GcPauses()
    upstream = args.url
    if upstream is None:
        fake_process, upstream = start_loopback(KEY)
    workspace = f"bench-turn-{int(time.time())}"
    proxy_process, proxy_url = start_delaying(upstream, args.latency_ms / 1000)
    if fake_process is not None:
        # It stands for a server elsewhere: on this 2-core machine it must not take the CPU the
        # measured process needs (it runs whenever that process waits, which is what a turn does).
        os.setpriority(os.PRIO_PROCESS, fake_process.pid, 19)
    try:
        seed_memory(upstream, workspace, fake=args.url is None)
        with tempfile.TemporaryDirectory() as folder, stub_agent_zero() as host:
            outbox_path = os.path.join(folder, "outbox.sqlite3")
            host.config.update(outbox_path=outbox_path, api_url=proxy_url, mcp_url=proxy_url,
                               workspace_id=workspace, recall_wait_ms=args.wait_ms, **chosen)
            host.secrets = {"HONCHO_API_KEY": KEY}
            # The bridge functions the extension files call (each file adds only a try/except
            # around it).
            bridge = {
                name: importlib.import_module(f"usr.plugins.honcho.extensions.honcho_bridge.{name}")
                for name in ("capture", "recall", "process_hub")}
            gc.callbacks.append(pauses)
            run = asyncio.run(drive(bridge, args.turns, outbox_path))
            gc.callbacks.remove(pauses)
            settings = bridge["process_hub"].global_settings()
            recall_timeout_ms = settings.recall_timeout_s * 1000
            write_journal(bridge["process_hub"].hub().capture(settings))
            killed = kills(os.path.join(folder, "kills", "outbox.sqlite3"),
                           os.path.join(folder, "kills-state"), args.kills, seed=1)
    finally:
        for process in (proxy_process, fake_process):
            stop_loopback(process)

    turns = len(run["added"])
    sources = run["sources"]
    lags = [lag for _, _, lag in run["lags"]]
    baseline = [lag for _, _, lag in run["baseline_lags"]]
    lags_without_gc = [lag for start, end, lag in run["lags"] if not pauses.overlaps(start, end)]
    gc_ms = [(end - start) * 1000 for start, end in pauses.spans]
    print(json.dumps({
        "target": "real" if args.url else "fake", "latency_ms": args.latency_ms,
        "wait_ms": args.wait_ms,
        "settings": chosen, "dialectic_note_share": round(run["notes"] / turns, 3),
        "recall_timeout_ms": recall_timeout_ms, "turns": turns, "warmup_turns": WARMUP_TURNS,
        "added_turn_ms_p50": round(percentile(run["added"], 0.5), 2),
        "added_turn_ms_p99": round(percentile(run["added"], 0.99), 2),
        "added_turn_ms_max": round(max(run["added"]), 2),
        "loop_block_ms_p99": round(percentile(lags, 0.99), 2),
        "loop_block_ms_max": round(max(lags or [0.0]), 2),
        "loop_probe_samples": len(lags),
        "loop_block_ms_p99_baseline": round(percentile(baseline, 0.99), 2),
        "loop_block_ms_max_baseline": round(max(baseline or [0.0]), 2),
        "loop_probe_samples_baseline": len(baseline),
        "loop_block_ms_p99_over_baseline": round(
            percentile(lags, 0.99) - percentile(baseline, 0.99), 2),
        "loop_block_ms_max_outside_gc": round(max(lags_without_gc or [0.0]), 2),
        "gc_pauses": len(gc_ms), "gc_pause_ms_max": round(max(gc_ms or [0.0]), 2),
        "query_aware_first_call_share": round(
            sum(s in ("fresh", "hit") for s in sources) / turns, 3),
        "base_pack_share": round(sources.count("base") / turns, 3),
        "empty_pack_share": round(run["empty"] / max(1, turns - WARMUP_TURNS), 3),
        "sources": {s: sources.count(s) for s in sorted(set(sources))},
        "accepted": run["outcomes"].count("accepted"),
        "capture_outcomes": {o: run["outcomes"].count(o) for o in sorted(set(run["outcomes"]))},
        "kills": args.kills, "accepted_before_kill": killed["accepted"],
        "lost_after_kill": killed["lost"],
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


if __name__ == "__main__":
    main()
