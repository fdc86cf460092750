"""What memory adds to a whole turn in the real Agent Zero v1.7, and what its hooks cost there;
prints one JSON line.

Runs under Agent Zero's own Python (`$A0_PYTHON`, with `A0_HARNESS` and `HONCHO_REAL_URL` set as for
the host tests): a fresh Agent Zero tree holding a copy of this checkout (tests/host/host_kit.py's
HostWorld: its own Honcho workspace and outbox), the scripted model and two bench plugins from
bench/a0_plugins: `bench_turn_marks` (timing marks around the plugin's hooks; the chat model answers
after `--delay-ms`) and `bench_empty_hook` (an empty extension on the plugin's capture points, the
baseline). Agent Zero reaches the real Honcho through a delaying proxy in its own process: 0 ms for
Honcho on loopback, `--one-way-ms` each way for a hosted Honcho far away.

Turns (item 2 of issue 27): in blocks of `--block-turns`, the plugin switched on and off with Agent
Zero's own toggle between blocks (on, off, off, on, ...), a new chat per block, for the default
`recall_wait_ms` and for `0`. Added time per turn = the on turns' wall-time percentile minus the off
turns'. `context_ms_p50`: the plugin's own context call (its gateway, as recall builds it) timed
after each on block. Pack shares come from the turns' receipts in the chat log. A turn is past the
recall deadline when its recall hook took longer than `recall_timeout_s`.

Hooks (item 3): the user hook (`hist_add_user_message`, in the chat's task on Agent Zero's loop) and
the response hook (`tool_execute_after` of the `response` tool) timed in place for 400-character,
16 KB and 1 MB messages with `outbox_synchronous` FULL and NORMAL, beside the empty hook (the plugin
off, bench_empty_hook on). A block's messages go in bursts that fill at most half the capture
journal (`journal_capacity`), and before each burst, and after the block, the bench waits (at most
30 s) for the writer to empty the journal: a full journal refuses messages, and a refused capture
takes another path than an accepted one. Each figure carries its block's `captures` (accepted,
refused, `not_accepted` and its outcomes, from the process's capture counters; shared by the
block's user and response hooks; `drain_timeouts`) and `clean` (every message accepted); a target
on a figure that is not clean is not judged (`met: null`), and `hooks_clean` says whether every
figure is.

    $A0_PYTHON bench/a0_turn.py [--delay-ms 200] [--one-way-ms 150] [--blocks 4] [--block-turns 6]
                                [--hook-samples 40] [--network both|loopback|remote] [--no-hooks]
                                [--smoke]

`--smoke` (CI): loopback only, two blocks of two turns per wait, a few hook samples; no targets.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/load.py
from load import load_avg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGINS = os.path.join(ROOT, "bench", "a0_plugins")
MARKS, EMPTY = "bench_turn_marks", "bench_empty_hook"
PLUGIN = "honcho"
CONTEXT_SLACK_MS = 15.0  # default wait: added p50 <= the context call's p50 + this
WAIT0_P50_MS, WAIT0_P95_MS = 5.0, 15.0
HOOK_SIZES = {"400": 400, "16k": 16 * 1024, "1mb": 1_000_000}
REDACT_ON_HOOK_MAX_BYTES = 4 * 1024  # honcho_hub/capture/service.py: the hook target's sizes
HOOK_P99_OVER_BASELINE_US = 2_000.0
CONTEXT_CALLS_PER_BLOCK = 3
# Counters only the capture writer moves (honcho_hub/capture/service.py's Outcome): every other
# one is a hook's outcome for one message.
WRITER_OUTCOMES = frozenset({"queued", "duplicate", "handed_off", "replayed"})
ACCEPTED_OUTCOMES = ("accepted", "accepted_in_memory")
REFUSED_OUTCOMES = ("refused_full", "refused_journal_full")
DRAIN_TIMEOUT_S = 30.0  # the longest wait for the writer to empty the journal between bursts
QUERY_AWARE = ("hit", "fresh")  # recall's own words for a pack searched with this turn's message
MESSAGES = ("Which tea did I say I like, and where should I buy it in Lisbon?",
            "Remind me what we planned for my sister's visit in June.",
            "Can you draft a short reply to the studio in Berlin about the deadline?",
            "What do you remember about my diet when suggesting restaurants?",
            "Summarise the Python examples you gave me last week in two lines.")


# -- figures (pure: tests/test_bench_a0_turn.py) ---------------------------------------------------

def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, as bench/turn.py takes it; 0 for no samples."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def p50_spread(on_ms: Sequence[float], off_ms: Sequence[float], resamples: int = 400) -> float:
    """Half the width of the middle 95 % of the added p50 over bootstrap resamples of both sides
    (seeded): how far the added p50 moves with which turns happened to be measured."""
    if not on_ms or not off_ms:
        return 0.0
    rng = random.Random(0)
    added = sorted(percentile(rng.choices(on_ms, k=len(on_ms)), 0.5)
                   - percentile(rng.choices(off_ms, k=len(off_ms)), 0.5)
                   for _ in range(resamples))
    return round((percentile(added, 0.975) - percentile(added, 0.025)) / 2, 2)


def scenario_summary(on_ms: list[float], off_ms: list[float], context_ms: list[float],
                     receipts: list[tuple[str, str] | None], recall_hook_ms: list[float],
                     deadline_ms: float) -> dict[str, Any]:
    """One wait setting's figures. `receipts`: (memory, recall) of each on turn's receipt, None
    when the turn logged none (counted as empty)."""
    on_turns = max(1, len(receipts))
    sources = [r[1] if r else "" for r in receipts]
    return {
        "added_turn_ms_p50": round(percentile(on_ms, 0.5) - percentile(off_ms, 0.5), 2),
        "added_turn_ms_p50_spread": p50_spread(on_ms, off_ms),
        "added_turn_ms_p95": round(percentile(on_ms, 0.95) - percentile(off_ms, 0.95), 2),
        "on_turn_ms_p50": round(percentile(on_ms, 0.5), 2),
        "off_turn_ms_p50": round(percentile(off_ms, 0.5), 2),
        "on_turn_ms_p95": round(percentile(on_ms, 0.95), 2),
        "off_turn_ms_p95": round(percentile(off_ms, 0.95), 2),
        "context_ms_p50": round(percentile(context_ms, 0.5), 2),
        "context_calls": len(context_ms),
        "recall_hook_ms_p50": round(percentile(recall_hook_ms, 0.5), 2),
        "recall_hook_ms_p95": round(percentile(recall_hook_ms, 0.95), 2),
        "recall_hook_ms_max": round(max(recall_hook_ms or [0.0]), 2),
        "recall_deadline_ms": deadline_ms,
        "turns_past_recall_deadline": sum(ms > deadline_ms for ms in recall_hook_ms),
        "query_aware_share": round(sum(s in QUERY_AWARE for s in sources) / on_turns, 3),
        "base_pack_share": round(sources.count("base") / on_turns, 3),
        "empty_pack_share": round(sum(r is None or r[0] == "none" for r in receipts) / on_turns,
                                  3),
        "sources": {s or "no_receipt": sources.count(s) for s in sorted(set(sources))},
        "turns": len(on_ms) + len(off_ms), "turns_on": len(on_ms), "turns_off": len(off_ms),
    }


def capture_outcomes(before: dict[str, int], after: dict[str, int],
                     messages: int) -> dict[str, Any]:
    """What the hooks did with the `messages` a block captured, from the process's capture counters
    before and after it: accepted, refused (the journal full), and every message not accepted by
    outcome (`no_outcome`: a message that moved no counter)."""
    moved = {name: after.get(name, 0) - before.get(name, 0) for name in after
             if name not in WRITER_OUTCOMES and after.get(name, 0) > before.get(name, 0)}
    accepted = sum(moved.pop(name, 0) for name in ACCEPTED_OUTCOMES)
    unseen = messages - accepted - sum(moved.values())
    if unseen > 0:
        moved["no_outcome"] = unseen
    return {"accepted": accepted, "refused": sum(moved.get(name, 0) for name in REFUSED_OUTCOMES),
            "not_accepted": sum(moved.values()), "outcomes": moved}


def bursts(samples: int, capacity: int) -> list[int]:
    """`samples` split into bursts whose messages (a user and a response message each) fill at
    most half the journal, which drains before each: a burst never meets a full journal."""
    per_burst = max(1, capacity // 4)
    return [min(per_burst, samples - start) for start in range(0, samples, per_burst)]


def wait_drained(backlog: Callable[[], int], timeout_s: float = DRAIN_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> bool:
    """Wait until `backlog()` (messages in the journal) is 0, at most `timeout_s`; whether it
    is."""
    deadline = clock() + timeout_s
    while backlog():
        if clock() >= deadline:
            return False
        sleep(0.01)
    return True


def hook_summary(ours_us: list[float], baseline_us: list[float],
                 captures: dict[str, Any] | None = None) -> dict[str, Any]:
    """A hook's p50/p99 in microseconds beside the empty hook's on the same point; with its block's
    `captures` (capture_outcomes), `clean` says whether the hooks accepted every message."""
    p50, p99 = percentile(ours_us, 0.5), percentile(ours_us, 0.99)
    base50, base99 = percentile(baseline_us, 0.5), percentile(baseline_us, 0.99)
    summary = {"p50_us": round(p50, 1), "p99_us": round(p99, 1),
               "baseline_p50_us": round(base50, 1), "baseline_p99_us": round(base99, 1),
               "p50_over_baseline_us": round(p50 - base50, 1),
               "p99_over_baseline_us": round(p99 - base99, 1), "samples": len(ours_us),
               "baseline_samples": len(baseline_us)}
    if captures is not None:
        summary.update(captures=captures, clean=captures["not_accepted"] == 0)
    return summary


def targets(default: dict[str, Any], wait0: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 27's targets, each with its limit, the measured figure and whether it was met."""
    def check(limit: float, measured: float) -> dict[str, Any]:
        return {"limit_ms": round(limit, 2), "measured_ms": measured, "met": measured <= limit}

    past = default["turns_past_recall_deadline"] + wait0["turns_past_recall_deadline"]
    return {
        "default_added_p50": check(default["context_ms_p50"] + CONTEXT_SLACK_MS,
                                   default["added_turn_ms_p50"]),
        "wait0_added_p50": check(WAIT0_P50_MS, wait0["added_turn_ms_p50"]),
        "wait0_added_p95": check(WAIT0_P95_MS, wait0["added_turn_ms_p95"]),
        "no_turn_past_recall_deadline": {"turns_past": past, "met": past == 0},
    }


def hook_targets(hooks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """p99 <= 2 ms over the empty hook, for the sizes redacted on the hook (up to 4 KB)."""
    checked = {}
    for durability, by_hook in hooks.items():
        for hook, by_size in by_hook.items():
            for size, figures in by_size.items():
                if HOOK_SIZES[size] <= REDACT_ON_HOOK_MAX_BYTES:
                    over = figures["p99_over_baseline_us"]
                    clean = figures.get("clean", True)
                    # A figure mixed with refused captures (their path is another) judges nothing.
                    checked[f"{hook}_{size}_{durability}_p99_over_baseline"] = {
                        "limit_us": HOOK_P99_OVER_BASELINE_US, "measured_us": over,
                        "clean": clean, "met": over <= HOOK_P99_OVER_BASELINE_US if clean else None}
    return checked


def bench_line(scenarios: dict[str, dict[str, Any]], delay_ms: float, load_avg: list[float],
               hooks: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """The JSON line: `default` and `wait0` (the remote Honcho's when measured, else loopback's),
    every scenario measured, the targets and whether each was met."""
    line: dict[str, Any] = {"bench": "a0_turn", "delay_ms": delay_ms, "load_avg": load_avg,
                            **extra, **scenarios}
    line["targets"] = targets(scenarios["default"], scenarios["wait0"])
    if hooks is not None:
        line["hooks"] = hooks
        line["hook_targets"] = hook_targets(hooks)
        line["hooks_clean"] = all(figures.get("clean", True) for by_hook in hooks.values()
                                  for by_size in by_hook.values() for figures in by_size.values())
    line["targets_met"] = all(t["met"] for t in (*line["targets"].values(),
                                                  *line.get("hook_targets", {}).values()))
    return line


# -- the run (Agent Zero's Python only) ------------------------------------------------------------

PROXY_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from fault_proxy import FaultProxy
proxy = FaultProxy(sys.argv[2], {}, seed=0)
print(proxy.url, flush=True)
for line in sys.stdin:  # each line: the delay, in seconds, of every answer from now on
    proxy.delay_s = float(line)
    print("ok", flush=True)
proxy.close()
"""


class DelayingProxy:
    """bench/fault_proxy.py without faults, in its own process (its threads must not share the
    measured process's interpreter), its delay changed between scenarios."""

    def __init__(self, upstream: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", PROXY_CHILD,
                                         os.path.join(ROOT, "bench"), upstream],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError("the delaying proxy did not start")

    def delay(self, seconds: float) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{seconds}\n")
        self.process.stdin.flush()
        self.process.stdout.readline()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        sys.path[:0] = [os.path.join(ROOT, "tests", "host")]
        import host_kit

        self.args = args
        self.proxy = DelayingProxy(host_kit.required_env("HONCHO_REAL_URL"))
        os.environ["BENCH_MODEL_DELAY_MS"] = str(args.delay_ms)
        self.world = host_kit.HostWorld(env={"HONCHO_API_URL": self.proxy.url},
                                        plugins=(os.path.join(PLUGINS, MARKS),
                                                 os.path.join(PLUGINS, EMPTY)))
        self.host = self.world.host
        self.marks = importlib.import_module(f"usr.plugins.{MARKS}.marks")
        self.host.toggle(EMPTY, False)
        self.host.toggle(PLUGIN, True)
        # Something to recall: the agent's card of the user (the workspace is new).
        self.world.honcho().peer("agent-zero").set_card(["Name: Ada", "Lives in Lisbon",
                                                         "Prefers green tea"], target="user")

    def close(self) -> None:
        self.host.toggle(PLUGIN, False)  # its worker stops before the proxy goes
        self.proxy.close()

    # -- settings, as the settings page saves them -------------------------------------------------

    def configure(self, **values: Any) -> None:
        config = dict(self.host.config(PLUGIN) or {})
        config.update(values)
        self.host.save_config(PLUGIN, config)

    def settings(self) -> Any:
        import host_kit

        return host_kit.plugin_module("extensions.honcho_bridge.process_hub").global_settings()

    # -- item 2: turns ---------------------------------------------------------------------------

    def scenario(self, wait_ms: int, blocks: int, block_turns: int) -> dict[str, Any]:
        self.configure(recall_wait_ms=wait_ms)
        on_ms: list[float] = []
        off_ms: list[float] = []
        receipts: list[tuple[str, str] | None] = []
        context_ms: list[float] = []
        recall_ms: list[float] = []
        on_pre: list[float] = []  # turn start -> the first model call
        off_pre: list[float] = []
        cpu_ms = {True: 0.0, False: 0.0}  # the process's CPU (every thread) in on / off blocks
        recall = self.marks.samples["recall"]  # the marks run with the plugin off too
        gateway = self.context_gateway()
        try:
            for block in range(blocks):
                on = block % 4 in (0, 3)  # on, off, off, on: a drift cancels out
                self.host.toggle(PLUGIN, on)
                # Unmeasured: the first turn after a toggle loads Agent Zero's extensions again
                # and, switched on, the plugin's modules (a one-off a user pays per toggle).
                self.host.script("Noted.")
                self.host.turn(self.host.new_chat(), "Hello.", timeout=60)
                ctx = self.host.new_chat()
                self.host.script(*[f"Noted ({i})." for i in range(block_turns)])
                cpu_started = time.process_time()
                for turn in range(block_turns):
                    text = f"{MESSAGES[turn % len(MESSAGES)]} ({block}.{turn})"
                    logged, recalled = len(ctx.log.logs), len(recall)
                    called = len(self.marks.model_calls)
                    started = time.perf_counter()
                    self.host.turn(ctx, text, timeout=60)
                    elapsed = (time.perf_counter() - started) * 1000
                    (on_ms if on else off_ms).append(elapsed)
                    first_call = self.marks.model_calls[called:][:1] or [started]
                    (on_pre if on else off_pre).append((first_call[0] - started) * 1000)
                    if on:
                        receipts.append(receipt_of(ctx.log.logs[logged:]))
                        recall_ms += recall[recalled:]
                cpu_ms[on] += (time.process_time() - cpu_started) * 1000
                if on:
                    context_ms += self.time_context(gateway, f"chat-{ctx.id}", text)
        finally:
            gateway.close()
        self.host.toggle(PLUGIN, True)
        deadline_ms = self.settings().recall_timeout_s * 1000
        summary = scenario_summary(on_ms, off_ms, context_ms, receipts, recall_ms, deadline_ms)
        # Where the added time goes: before the model's first call (recall, the prompt) or after.
        summary["added_before_model_ms_p50"] = round(percentile(on_pre, 0.5)
                                                     - percentile(off_pre, 0.5), 2)
        # CPU the process spent per turn, all threads: what the machine's load multiplies.
        on_cpu, off_cpu = (cpu_ms[on] / max(1, len(turns))
                           for on, turns in ((True, on_ms), (False, off_ms)))
        summary.update(cpu_ms_per_turn_on=round(on_cpu, 1), cpu_ms_per_turn_off=round(off_cpu, 1),
                       added_cpu_ms_per_turn=round(on_cpu - off_cpu, 1))
        return summary

    def context_gateway(self) -> Any:
        """A gateway as recall builds its own; its first call (the workspace's get-or-create, a
        new connection), which recall's gateway made long before, is not timed."""
        import host_kit

        gateway_class = host_kit.plugin_module("honcho_hub.gateway.gateway").HonchoGateway
        settings = self.settings()
        gateway = gateway_class.for_settings(settings, settings.recall_timeout_s)
        self.time_context(gateway, "chat-bench-warmup", "warm up", calls=1)
        return gateway

    def time_context(self, gateway: Any, session_id: str, query: str,
                     calls: int = CONTEXT_CALLS_PER_BLOCK) -> list[float]:
        """The plugin's context call for the chat (as recall makes it, unscoped), timed."""
        settings = self.settings()
        timed = []
        for _ in range(calls):
            started = time.perf_counter()
            gateway.context(session_id, query=query, tokens=settings.max_context_tokens,
                            target=settings.user_peer_id, perspective=settings.agent_peer_id,
                            top_k=settings.search_top_k, max_conclusions=settings.max_conclusions,
                            limit_to_session=settings.recall_limit_to_session)
            timed.append((time.perf_counter() - started) * 1000)
        return timed

    # -- item 3: hooks ---------------------------------------------------------------------------

    def hooks(self, samples: int, sizes: dict[str, int]) -> dict[str, Any]:
        """{durability: {hook: {size: figures}}}; the baseline (plugin off, empty hook on) is timed
        between the two durabilities' blocks, for each size. Each figure of ours carries what the
        hooks of its block did with the messages (`captures`, shared by the user and response hook
        of the block) and whether they accepted all (`clean`)."""
        ours: dict[str, dict[str, dict[str, list[float]]]] = {
            d: {"user": {}, "response": {}} for d in ("full", "normal")}
        empty: dict[str, dict[str, list[float]]] = {"user": {}, "response": {}}
        captures: dict[str, dict[str, dict[str, Any]]] = {"full": {}, "normal": {}}
        for size_name, size in sizes.items():
            count = max(2, samples // 10) if size >= 1_000_000 else samples
            for durability in ("full", "baseline", "normal", "baseline"):
                if durability == "baseline":
                    self.host.toggle(PLUGIN, False)
                    self.host.toggle(EMPTY, True)
                else:
                    self.host.toggle(EMPTY, False)
                    self.host.toggle(PLUGIN, True)
                    self.configure(outbox_synchronous=durability.upper())
                timed, block = self.time_hooks(size, count)
                if durability == "baseline":
                    into = empty
                else:
                    into = ours[durability]
                    captures[durability][size_name] = block
                for hook, values in timed.items():
                    into[hook].setdefault(size_name, []).extend(values)
        self.host.toggle(EMPTY, False)
        self.host.toggle(PLUGIN, True)
        self.configure(outbox_synchronous="FULL")
        return {d: {hook: {size: hook_summary(values, empty[hook][size], captures[d][size])
                           for size, values in by_size.items()}
                    for hook, by_size in by_hook.items()}
                for d, by_hook in ours.items()}

    def time_hooks(self, size: int, count: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
        """`count` typed messages and final responses of `size` characters in a new chat, in
        bursts the journal holds (it drains before each); the samples, and what the hooks did with
        the messages (capture_outcomes, plus `drain_timeouts`: drains that ran out of time)."""
        import host_kit

        samples = self.marks.samples
        kept = host_kit.plugin_module("honcho_hub.capture.kept")
        state = host_kit.plugin_module("honcho_hub.runtime").process_state()

        def backlog() -> int:
            journal = kept.JOURNAL.of(state)  # None while the plugin has captured nothing
            return len(journal) if journal is not None else 0

        ctx = self.host.new_chat()
        # Unmeasured: the first capture after a switch-on or a settings change builds the capture
        # service again (a one-off, not the hook's cost per message).
        typed_in_task(ctx, message_of(size, -1))
        self.host.run_tool(ctx, "response", text=message_of(size, -2))
        drain_timeouts = 0
        drain_timeouts += not wait_drained(backlog)
        counted = kept.COUNTERS.of(state).snapshot()
        user_from, response_from = len(samples["user"]), len(samples["response"])
        done = 0
        for burst in bursts(count, self.settings().journal_capacity):
            drain_timeouts += not wait_drained(backlog)
            for i in range(done, done + burst):
                typed_in_task(ctx, message_of(size, i))
                self.host.run_tool(ctx, "response", text=message_of(size, i + count))
            done += burst
        drain_timeouts += not wait_drained(backlog)  # the next block starts with an empty journal
        block = capture_outcomes(counted, kept.COUNTERS.of(state).snapshot(), messages=2 * count)
        return ({"user": samples["user"][user_from:],
                 "response": samples["response"][response_from:]},
                {**block, "drain_timeouts": drain_timeouts})


def typed_in_task(ctx: Any, text: str) -> None:
    """Agent 0's hist_add_user_message in the chat's task, on Agent Zero's loop, as a typed
    message reaches it (the model is not called)."""
    import agent

    async def typed() -> None:
        ctx.get_agent().hist_add_user_message(agent.UserMessage(message=text, attachments=[]))

    ctx.run_task(typed).result_sync(60)


def message_of(size: int, n: int) -> str:
    """`size` characters of prose and code, different every time."""
    line = (f"{n}: def handler(event): return {{'ok': True}}  # note for Ada in Lisbon, "
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n")
    return (line * (size // len(line) + 1))[:size]


def receipt_of(items: Sequence[Any]) -> tuple[str, str] | None:
    """(memory, recall) of the turn's receipt among its new log items, None without one."""
    for item in items:
        if str(getattr(item, "id", "") or "").startswith("honcho-receipt-"):
            kvps = dict(getattr(item, "kvps", None) or {})
            return str(kvps.get("memory", "")), str(kvps.get("recall", ""))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=200.0,
                        help="the chat model answers after this long")
    parser.add_argument("--one-way-ms", type=float, default=150.0,
                        help="the remote Honcho's delay each way")
    parser.add_argument("--blocks", type=int, default=4, help="blocks per wait setting")
    parser.add_argument("--block-turns", type=int, default=6)
    parser.add_argument("--hook-samples", type=int, default=40,
                        help="per size, durability and baseline block (a tenth for 1 MB)")
    parser.add_argument("--network", choices=("both", "loopback", "remote"), default="both")
    parser.add_argument("--no-hooks", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help="CI: loopback, 2 blocks of 2 turns, 3 hook samples of 400 and 16k")
    args = parser.parse_args()
    sizes = HOOK_SIZES
    if args.smoke:
        args.network, args.blocks, args.block_turns, args.hook_samples = "loopback", 2, 2, 3
        sizes = {k: v for k, v in HOOK_SIZES.items() if v < 1_000_000}

    # Agent Zero prints every streamed reply and tool result to stdout: only the JSON line goes
    # there.
    line_out = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    load_start = load_avg()
    started = time.monotonic()
    bench = Bench(args)
    try:
        networks = {"loopback": 0.0, "remote": 2 * args.one_way_ms / 1000}
        chosen = list(networks) if args.network == "both" else [args.network]
        scenarios: dict[str, dict[str, Any]] = {}
        for network in chosen:
            bench.proxy.delay(networks[network])
            for name, wait_ms in (("default", -1), ("wait0", 0)):
                key = name if network == chosen[-1] else f"{network}_{name}"
                scenarios[key] = {"network": network,
                                  **bench.scenario(wait_ms, args.blocks, args.block_turns)}
        bench.proxy.delay(0.0)
        hooks = None if args.no_hooks else bench.hooks(args.hook_samples, sizes)
    finally:
        bench.close()
    line = bench_line(scenarios, args.delay_ms, load_avg(), hooks, load_avg_start=load_start,
                      one_way_ms=args.one_way_ms,
                      smoke=args.smoke, seconds=round(time.monotonic() - started, 1))
    print(json.dumps(line), file=line_out, flush=True)


if __name__ == "__main__":
    main()
