"""Soak benchmark: concurrent chats against a Honcho for a bounded time; prints one JSON line.

`--chats` (8) chats run at once on one asyncio loop, as Agent Zero runs every chat, through the
plugin's Agent Zero code paths loaded as Agent Zero loads them (the stub host of
tests/hub_testkit.py; the loop keeps Python's default executor, so the recall and tool hooks' thread
hops share it as they do in Agent Zero). Each turn of a chat: the capture hook for what the human
typed (`hist_add_user_message`), a 20 ms gap standing for Agent Zero's own prompt building, the
recall hook (`message_loop_prompts_after`: the recaller), in a quarter of the turns one
`honcho_memory` tool call (search conclusions, search the session, recall or status: through
`run_action`, never remember or forget), the model's time (0.1-0.6 s), then the capture of the final
response (`tool_execute_after`) and the user's time to read it (0.1-0.6 s). A chat ends after 5-15
turns and a new one opens. The real delivery worker, started as the adapters start it, drains the
outbox all along; every message is 3-4,000 characters (every 25th the longest), so each is one
event.

Honcho is the fake in its own process (tests/loopback.py), or the server at `--url`; either way a
new workspace `honcho-hub-soak-<hex>`. With `--faults`, every request of the plugin goes through the
fault-injecting loopback proxy of bench/fault_proxy.py, in its own process (its threads must not
share this process's interpreter lock or memory): each request draws its fate from
`random.Random(seed)` in arrival order (the mix of bench/faults.py: 5% answered 503, 5% reset before
forwarding, 5% reset after the server answered, 3% answered 429 with `Retry-After: 1`), and
independently, from its own seeded source, 5% wait 0.2-3 s before they are served (latency; shorter
than the SDK's 10 s timeout, longer than recall's 2.5 s deadline). All routes draw: message adds,
reconciliation lookups, session and peer creation, recall's context calls, the tool's requests.

After `--seconds` the chats stop (a turn under way finishes), the proxy stops injecting (it still
forwards), and the worker drains until the capture journal is empty and no event is pending or
leased, at most `--drain-s`. Then every message of the run's sessions is read from the server
directly (not through the proxy) and counted by `metadata.event_id`.

Figures:
- `captured`: messages the capture hooks accepted (outcome `accepted`: in the journal); each one's
  event id is derived as capture derives it (chat id, role, history message id, part 0).
- `delivered`: captured event ids the server holds at least once; `duplicated`: captured event ids
  it holds more than once (`duplicate_copies`: the copies beyond the first); `dead_lettered`:
  captured ids the outbox holds as dead letters; `lost`: captured ids neither on the server nor
  dead-lettered after the drain (`still_queued` says how many of them were still pending or leased:
  a drain that ran out of time).
- `recall_p50_ms`, `recall_p99_ms`: the recall hook's wall time as a turn waits for it, thread hop
  included. `capture_p50_us`, `capture_p99_us`: both capture hooks' wall time on the loop (what a
  turn waits for; the writer and the worker run on their own threads). `tool_p50_ms`,
  `tool_p99_ms`: the tool hook's wall time.
- `worker_rss_mb`: VmRSS of this process (from /proc/self/status) after the drain, the worker still
  running. The delivery worker is a thread of the simulated Agent Zero process, so this is that
  whole process: the worker and its sender threads, the capture journal and writer, the recaller and
  its cache, the tool's clients, the SDK, the interpreter and this bench's own samples.
  `worker_rss_mb_after_warmup` is the same after the first chat's start-up, `worker_rss_peak_mb` the
  run's VmHWM.
- Over time: a sampler thread reads this process every `--sample-s` (60) from the chats' start
  to their end and prints each sample to stderr as it goes (`soak t_s=... rss_mb=...`).
  `rss_mb_per_minute`: VmRSS at each sample (per sample when `--sample-s` is not 60);
  `rss_slope_mb_per_h`: the least-squares slope of the samples from `--slope-after-s` (600) on;
  `threads_start`/`threads_end`, `fds_start`/`fds_end` (OS threads, open descriptors): the
  first and last of those samples (`*_at_chats_start`: at t=0, before the worker's threads and
  clients started); `sqlite_mb_per_minute`: SQLite's own allocations (page caches, which
  tracemalloc does not see). The bench's own samples and ids go to files, not lists, so that it
  does not measure itself. `--tracemalloc` prints the allocation sites that grew most between
  the slope's first sample and the last (slow; the snapshots themselves add to RSS).
- `faults`: what the proxy injected (per kind and route), `latency_injected`; `duplicate_paths` and
  `lost_paths` explain any duplicate or lost event from the proxy's log of every request.

    python bench/soak.py [--url URL] [--key KEY] [--seconds 300] [--faults] [--chats 8] [--seed 1]
                         [--drain-s 900] [--set SETTING=VALUE ...] [--sample-s 60]
                         [--slope-after-s 600] [--tracemalloc]

`--set` gives a plugin setting for the run (as bench/turn.py takes it); the JSON's `settings.set`
lists them.
"""

from __future__ import annotations

import _sqlite3
import argparse
import asyncio
import ctypes
import importlib
import json
import os
import random
import select
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
import types
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Generic, TypeVar

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from delivery import event_copies_on_server, on_server, rss_mb  # noqa: E402
from fault_proxy import DEFAULT_MIX, RETRY_AFTER_S, FaultProxy, ProxiedRequest, summarize  # noqa: E402
from faults import delivery_counts, duplicate_paths, worker_metrics  # noqa: E402
from hub_testkit import StubAgent, StubContext, StubHistoryMessage, stub_agent_zero  # noqa: E402
from turn import GAP_S, MESSAGES, percentile, start_up  # noqa: E402

from honcho_hub.capture.service import event_id  # noqa: E402
from honcho_hub.names import MAX_CONTENT_CHARS, session_for  # noqa: E402
from honcho_hub.storage.outbox import Outbox  # noqa: E402

LATENCY_SHARE = 0.05
LATENCY_S = (0.2, 3.0)
TOOL_SHARE = 0.25
TOOL_CALLS = ({"action": "search", "target": "conclusions"},
              {"action": "search", "target": "session"},
              {"action": "recall"}, {"action": "status"})
MODEL_S = (0.1, 0.6)
THINK_S = (0.1, 0.6)
TURNS_PER_CHAT = (5, 15)
PASTE_EVERY = 25
PASTE_CHARS = 4_000
DRAIN_POLL_S = 0.5
CHILD_LINE_TIMEOUT_S = 60.0
T = TypeVar("T")
TRACE_FRAMES = 16  # frames kept per traced allocation (--tracemalloc)
OUR_CODE = "/usr/plugins/honcho/"  # where the stub host loads the plugin's files from
MAX_EXPLAINED = 10  # lost_paths keeps this many patterns and example ids


# -- the proxy, in its own process -----------------------------------------------------------------

class LatencyProxy(FaultProxy):
    """The fault proxy, plus latency: a seeded share of requests waits before it is served. The draw
    has its own random source, so the fault draws stay those of FaultProxy for the same seed."""

    def __init__(self, upstream_url: str, mix: dict[str, float], seed: int, latency_share: float,
                 latency_s: tuple[float, float]) -> None:
        super().__init__(upstream_url, mix, seed)
        self.latency_share, self.latency_s = latency_share, latency_s
        self.delays: dict[int, float] = {}  # request seq -> injected wait, s
        self._latency_rng = random.Random(f"latency-{seed}")
        self._latency_lock = threading.Lock()

    def arrived(self, route: str, session_id: str | None,
                event_ids: tuple[str, ...]) -> ProxiedRequest:
        record = super().arrived(route, session_id, event_ids)
        with self._latency_lock:
            delay = (self._latency_rng.uniform(*self.latency_s)
                     if self._latency_rng.random() < self.latency_share else 0.0)
            if delay:
                self.delays[record.seq] = delay
        if delay:
            # on this request's handler thread, before it is forwarded or answered
            time.sleep(delay)
        return record

    def calm(self) -> None:
        """Stop injecting: every later request is forwarded and answered as the server answers."""
        with self._latency_lock:
            self.latency_share = 0.0
        self.mix = {}  # one assignment: a draw sees the old mix or the new one


def proxy_child(config_json: str) -> None:
    """In its own process: serve, print the URL; 'calm' on stdin stops the faults (answered 'calm');
    at the end of stdin write every request's record to `records` (JSON lines) and print the
    summary."""
    config = json.loads(config_json)
    proxy = LatencyProxy(config["upstream"], config["mix"], config["seed"], config["latency_share"],
                         tuple(config["latency_s"]))
    print(proxy.url, flush=True)
    calm_at = None
    for line in sys.stdin:
        if line.strip() == "calm":
            proxy.calm()
            calm_at = len(proxy.records)
            print("calm", flush=True)
    proxy.close()
    records = list(proxy.records)
    with open(config["records"], "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps({**asdict(record), "delay_s": proxy.delays.get(record.seq, 0.0)})
                      + "\n")
    injected = records[:calm_at] if calm_at is not None else records
    print(json.dumps({**summarize(injected), "latency_injected": len(proxy.delays),
                      "latency_injected_s": round(sum(proxy.delays.values()), 1),
                      "requests_after_calm": len(records) - len(injected)}), flush=True)


class ProxyProcess:
    """The parent's handle on the proxy child: its URL, calm(), finish() -> summary; every wait
    bounded."""

    def __init__(self, config: dict) -> None:
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--proxy-child",
                                         json.dumps(config)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.records_path = config["records"]
        self.url = self._line()
        if not self.url.startswith("http"):
            self.kill()
            raise RuntimeError("the fault proxy did not start")

    def _line(self, timeout_s: float = CHILD_LINE_TIMEOUT_S) -> str:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        return self.process.stdout.readline().strip() if ready else ""

    def calm(self) -> None:
        self.process.stdin.write("calm\n")
        self.process.stdin.flush()
        if self._line() != "calm":
            raise RuntimeError("the fault proxy did not stop injecting")

    def finish(self) -> dict:
        self.process.stdin.close()
        line = self._line(300)
        self.kill()
        if not line.startswith("{"):
            raise RuntimeError("the fault proxy gave no summary")
        return json.loads(line)

    def records(self) -> list[ProxiedRequest]:
        with open(self.records_path, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        return [ProxiedRequest(**{k: v for k, v in row.items() if k != "delay_s"} | {
            "event_ids": tuple(row["event_ids"])}) for row in rows]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


# -- the process over time ------------------------------------------------------------------------

def sqlite_memory_used() -> Callable[[], int] | None:
    """SQLite's own count of the bytes it holds now (page caches, statements: memory tracemalloc
    does not see), from the library the sqlite3 module is linked with; None where it cannot be
    reached."""
    try:
        function = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int64
    return function


SQLITE_MEMORY_USED = sqlite_memory_used()


def process_sample() -> dict:
    """This process now: VmRSS and its anonymous part (MB), SQLite's memory (MB), OS threads and
    open file descriptors (from /proc/self)."""
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle if ":" in line)
    sample = {"rss_mb": int(status["VmRSS"].split()[0]) / 1024,
              "rss_anon_mb": int(status["RssAnon"].split()[0]) / 1024,
              "threads": int(status["Threads"]), "fds": len(os.listdir("/proc/self/fd"))}
    if SQLITE_MEMORY_USED is not None:
        sample["sqlite_mb"] = SQLITE_MEMORY_USED() / 2**20
    return sample


def slope_per_h(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per hour; None under two distinct times."""
    if len({t for t, _ in points}) < 2:
        return None
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den * 3600


class Sampler:
    """A thread that samples the process every `every_s` from start() to stop(), printing each
    sample to stderr as it goes (a long run can be watched). With `trace`, each sample also takes a
    tracemalloc snapshot; growth() compares the one at `settle_s` with the last."""

    def __init__(self, every_s: float, settle_s: float, trace: bool = False) -> None:
        self.every_s, self.settle_s, self.trace = every_s, settle_s, trace
        self.samples: list[dict] = []  # {"t_s", "rss_mb", "threads", "fds"}
        self.snapshots: list[tuple[float, object]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.take()
            if self._stop.wait(self.every_s):
                return

    def take(self) -> None:
        t_s = time.monotonic() - self._started
        sample = {"t_s": round(t_s, 1), **process_sample()}
        self.samples.append(sample)
        if self.trace:
            sample["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 2)
            # the first settled snapshot and the latest: snapshots are large, keeping all would
            # grow what is measured
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)])
            if len(self.snapshots) == 2 or (self.snapshots
                                            and self.snapshots[0][0] < self.settle_s):
                self.snapshots.pop()
            self.snapshots.append((t_s, snapshot))
        shown = {k: round(v, 1) if isinstance(v, float) else v for k, v in sample.items()}
        print("soak " + " ".join(f"{k}={v}" for k, v in shown.items())
              + f" load1={os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)

    def figures(self) -> dict:
        """The JSON's keys: RSS each sample, the slope after `settle_s`, threads and fds."""
        settled = [s for s in self.samples if s["t_s"] >= self.settle_s] or self.samples[-1:]
        slope = slope_per_h([(s["t_s"], s["rss_mb"]) for s in settled])
        # threads and descriptors from where the slope starts (the worker's threads and clients
        # start with the first chats), and at the chats' start
        first, last = settled[0], settled[-1]
        return {
            "rss_mb_per_minute": [round(s["rss_mb"], 1) for s in self.samples],
            "rss_slope_mb_per_h": round(slope, 2) if slope is not None else None,
            "rss_slope_samples": len(settled),
            "threads_start": first["threads"], "threads_end": last["threads"],
            "threads_max": max(s["threads"] for s in settled),
            "fds_start": first["fds"], "fds_end": last["fds"],
            "fds_max": max(s["fds"] for s in settled),
            "threads_at_chats_start": self.samples[0]["threads"],
            "fds_at_chats_start": self.samples[0]["fds"],
            "sqlite_mb_per_minute": [round(s.get("sqlite_mb", -1), 1) for s in self.samples],
            "sample_every_s": self.every_s, "slope_after_s": self.settle_s}

    def growth(self, top: int = 25) -> list[str]:
        """The allocation sites that grew most between the settled snapshot and the last one."""
        if len(self.snapshots) < 2:
            return []
        stats = self.snapshots[-1][1].compare_to(self.snapshots[0][1], "traceback")
        # each site summed under the newest frame of the plugin's or the bench's own code
        owners: Counter = Counter()
        for stat in stats:
            ours = next((f for f in reversed(stat.traceback) if OUR_CODE in f.filename
                         or f.filename.endswith("soak.py")), None)
            owners[f"{ours.filename.rsplit('/', 2)[-1]}:{ours.lineno}" if ours else "-"] += (
                stat.size_diff)
        return ([f"{size / 1024:+.1f} KiB under {owner}" for owner, size in owners.most_common(top)]
                + [f"{s.size_diff / 1024:+.1f} KiB {s.count_diff:+d} blocks: "
                   + " < ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                                for f in list(reversed(s.traceback))[:8])  # newest first
                   for s in stats[:top]])


# -- the chats -------------------------------------------------------------------------------------

class Spilled(Generic[T]):
    """Values of one kind appended to a file as the run goes, not kept in memory: the soak measures
    this process's memory, and samples and ids held in lists would grow it by several MB an hour.
    Iterating reads them back, parsed."""

    def __init__(self, path: str, parse: Callable[[str], T]) -> None:
        self._file = open(path, "w+", encoding="utf-8")  # noqa: SIM115 -- open for the whole run
        self._parse = parse
        self._count = 0

    def append(self, value: T) -> None:
        self._file.write(f"{value}\n")
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[T]:
        self._file.flush()
        self._file.seek(0)
        values = [self._parse(line.rstrip("\n")) for line in self._file]
        self._file.seek(0, os.SEEK_END)
        return iter(values)


class Tally:
    """What the chats did: samples, the captured event ids, outcomes; one asyncio loop writes it.
    The samples, ids and chat ids go to files in `folder` (Spilled)."""

    def __init__(self, folder: str) -> None:
        def spilled(name: str, parse: Callable[[str], T]) -> Spilled[T]:
            return Spilled(os.path.join(folder, f"tally-{name}.txt"), parse)

        self.capture_us = spilled("capture_us", float)
        self.recall_ms = spilled("recall_ms", float)
        self.tool_ms = spilled("tool_ms", float)
        self.captured = spilled("captured", str)  # event ids, in capture order
        self.chats = spilled("chats", str)
        self.outcomes: Counter = Counter()
        self.sources: Counter = Counter()
        self.tools: Counter = Counter()
        self.tool_errors = 0
        self.turns = 0
        self.rss_after_warmup_mb = 0.0

    def capture(self, call, chat_id: str, role: str, source_id: str) -> None:
        start = time.perf_counter_ns()
        outcome = call()
        self.capture_us.append((time.perf_counter_ns() - start) / 1000)
        value = str(getattr(outcome, "value", outcome))
        self.outcomes[value] += 1
        if value == "accepted":
            self.captured.append(event_id(chat_id, role, source_id, 0))


def message_text(chat: int, turn: int) -> str:
    text = f"{MESSAGES[turn % len(MESSAGES)]} (chat {chat}, turn {turn})"
    if turn % PASTE_EVERY == PASTE_EVERY - 1:
        text = (text + " ") * (PASTE_CHARS // (len(text) + 1) + 1)
    return text[:PASTE_CHARS]


async def one_turn(bridge: dict, agent: StubAgent, chat: int, turn: int, rng: random.Random,
                   tally: Tally) -> None:
    chat_id = str(agent.context.id)
    text = message_text(chat, turn)
    message = types.SimpleNamespace(message=text, attachments=[], system_message=[], id="")
    data = {"args": (agent, message), "kwargs": {},
            "result": StubHistoryMessage(False, f"u{turn}"), "exception": None}
    tally.capture(lambda: bridge["capture"].capture_user_message(agent, data), chat_id, "user",
                  f"u{turn}")
    await asyncio.sleep(GAP_S)  # Agent Zero builds the prompt meanwhile
    loop_data = types.SimpleNamespace(
        iteration=0, extras_persistent={}, user_message=types.SimpleNamespace(
            content={"user_message": text, "system_message": [], "attachments": []}))
    start = time.perf_counter()
    tally.sources[await bridge["recall"].inject_recall(agent, loop_data)] += 1
    tally.recall_ms.append((time.perf_counter() - start) * 1000)
    if rng.random() < TOOL_SHARE:
        call = dict(rng.choice(TOOL_CALLS))
        if call["action"] != "status":
            call["query"] = MESSAGES[rng.randrange(len(MESSAGES))]
        start = time.perf_counter()
        answer = await bridge["tool"].run_tool(agent, call)
        tally.tool_ms.append((time.perf_counter() - start) * 1000)
        tally.tools[call["action"] + (f":{call['target']}" if "target" in call else "")] += 1
        tally.tool_errors += answer.startswith("honcho_memory")  # the tool's one-line failures
    await asyncio.sleep(rng.uniform(*MODEL_S))  # the model answers
    # the AI message calling response
    agent.history.current.messages.append(StubHistoryMessage(True, f"a{turn}"))
    reply = types.SimpleNamespace(
        message=f"Answer to turn {turn} of chat {chat}: noted, here is what I found.")
    tally.capture(lambda: bridge["capture"].capture_final_response(agent, "response", reply),
                  chat_id, "agent", f"a{turn}")
    tally.turns += 1
    await asyncio.sleep(rng.uniform(*THINK_S))  # the user reads the answer


async def one_chat_stream(bridge: dict, chat: int, seed: int, deadline: float,
                          tally: Tally) -> None:
    """Chat after chat in one slot until the deadline."""
    rng = random.Random(f"chat-{seed}-{chat}")
    opened = 0
    while time.monotonic() < deadline:
        chat_id = f"soak{chat:02d}x{opened:04d}"  # Agent Zero's ids are short and alphanumeric
        opened += 1
        agent = StubAgent(0, StubContext(id=chat_id, created_at=datetime.now(UTC)))
        tally.chats.append(chat_id)
        bridge["process_hub"].ensure_worker()  # agent_init
        bridge["recall"].register_chat(agent)
        for turn in range(rng.randint(*TURNS_PER_CHAT)):
            if time.monotonic() >= deadline:
                break
            await one_turn(bridge, agent, chat, turn, rng, tally)


async def soak(bridge: dict, chats: int, seconds: float, seed: int, tally: Tally,
               sampler: Sampler) -> float:
    """The chats, sampled by `sampler`, then the wall time they took (the last turns finish after
    the deadline)."""
    await start_up(bridge["process_hub"], bridge["recall"])
    tally.rss_after_warmup_mb = rss_mb()
    started = time.monotonic()
    deadline = started + seconds
    sampler.start()
    try:
        await asyncio.gather(*(one_chat_stream(bridge, c, seed, deadline, tally)
                               for c in range(chats)))
    finally:
        sampler.stop()
    return time.monotonic() - started


# -- the drain and the counts ----------------------------------------------------------------------

def drain(the_hub, journal, outbox_path: str, bound_s: float) -> dict:
    """Until the journal is empty and no event is pending or leased, or `bound_s` passed: the
    worker delivers on its own thread; this only moves the journal along and wakes the worker now
    and then."""
    started = time.monotonic()
    box = Outbox(outbox_path, busy_timeout_s=5.0, max_rows=1_000_000)  # for counting only
    try:
        while True:
            the_hub.flush_capture()
            counts = box.stats()["counts"]
            if len(journal) == 0 and counts["pending"] == 0 and counts["leased"] == 0:
                return {"drain_s": time.monotonic() - started, "drain_timed_out": False}
            if time.monotonic() - started >= bound_s:
                return {"drain_s": time.monotonic() - started, "drain_timed_out": True}
            worker = the_hub.ensure_worker()
            if worker is not None:
                worker.wake()
            time.sleep(DRAIN_POLL_S)
    finally:
        box.close()


def outbox_rows(path: str) -> dict[str, tuple[str, str | None, int]]:
    """event id -> (state, error code, attempts) of every row, read-only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0]: (r[1], r[2], r[3])
                for r in conn.execute("SELECT id, state, error_code, attempts FROM events")}
    finally:
        conn.close()


def lost_paths(lost: list[str], rows: dict, records: list[ProxiedRequest] | None) -> dict:
    """For each lost event: its outbox row (state/error code, or 'never queued') and what the proxy
    did with each request that carried it (its fault, else the server's status; '+stored' when the
    server accepted it). The commonest patterns, with a few example ids."""
    sends: dict[str, list[str]] = {}
    for record in records or []:
        if record.route == "message_add":
            token = f"{record.fault or record.upstream_error or record.upstream_status}" + (
                "+stored" if record.stored else "")
            for eid in record.event_ids:
                sends.setdefault(eid, []).append(token)
    patterns: Counter = Counter()
    examples: dict[str, list[str]] = {}
    for eid in lost:
        state, code, attempts = rows.get(eid, ("never queued", None, 0))
        where = f"{state}/{code or '-'}/attempts {attempts}"
        trail = (" > ".join(sends.get(eid, []))
                 or ("no send seen" if records is not None else "no proxy"))
        key = f"{where}: {trail}"
        patterns[key] += 1
        examples.setdefault(key, []).append(eid)
    return {key: {"count": n, "examples": examples[key][:3]}
            for key, n in patterns.most_common(MAX_EXPLAINED)}


# -- the run ---------------------------------------------------------------------------------------

def run(args: argparse.Namespace, upstream: str, key: str, folder: str) -> dict:
    workspace = f"honcho-hub-soak-{uuid.uuid4().hex[:12]}"  # never a user's own workspace
    outbox_path = os.path.join(folder, "outbox.sqlite3")
    proxy = None
    if args.faults:
        proxy = ProxyProcess({"upstream": upstream, "mix": DEFAULT_MIX, "seed": args.seed,
                              "latency_share": LATENCY_SHARE, "latency_s": list(LATENCY_S),
                              "records": os.path.join(folder, "proxy-records.jsonl")})
    tally = Tally(folder)
    sampler = Sampler(args.sample_s, args.slope_after_s, trace=args.tracemalloc)
    try:
        api_url = proxy.url if proxy else upstream
        with stub_agent_zero() as host:
            host.config.update(outbox_path=outbox_path, api_url=api_url, mcp_url=api_url,
                               workspace_id=workspace, **args.chosen)
            host.secrets = {"HONCHO_API_KEY": key}
            bridge = {
                name: importlib.import_module(f"usr.plugins.honcho.extensions.honcho_bridge.{name}")
                for name in ("capture", "recall", "process_hub", "tool")}
            soak_s = asyncio.run(soak(bridge, args.chats, args.seconds, args.seed, tally, sampler))
            if proxy:
                proxy.calm()
            from usr.plugins.honcho.honcho_hub import runtime
            from usr.plugins.honcho.honcho_hub.capture import kept

            the_hub = bridge["process_hub"].hub()
            drained = drain(the_hub, kept.JOURNAL.of(runtime.process_state()), outbox_path,
                            args.drain_s)
            rss_end = rss_mb()
            with open("/proc/self/status") as handle:
                rss_peak = next(int(line.split()[1]) / 1024 for line in handle
                                if line.startswith("VmHWM:"))
            settings = bridge["process_hub"].global_settings()
            worker = the_hub.worker()
            metrics = worker_metrics(worker) if worker is not None else {}
            capture_counters = kept.COUNTERS.of(runtime.process_state()).snapshot()
        traffic = proxy.finish() if proxy else None
    finally:
        if proxy:
            proxy.kill()
    sessions = sorted({session_for(settings.session_strategy, chat_id, None)
                       for chat_id in tally.chats})
    copies = event_copies_on_server(upstream, key, workspace, sessions)
    rows = outbox_rows(outbox_path)
    dead = {eid for eid, (state, _, _) in rows.items() if state == "dead"}
    counts = delivery_counts(tally.captured, copies, dead)
    captured = set(tally.captured)
    lost = sorted(captured - {eid for eid in copies if eid in captured} - dead)
    duplicated = sorted(eid for eid in captured if copies.get(eid, 0) > 1)
    records = proxy.records() if proxy and (lost or duplicated) else None
    result = {
        "bench": "soak", "server": "loopback-fake" if args.url is None else "given-url",
        "captured": len(tally.captured), "delivered": counts["delivered"],
        "duplicated": len(duplicated),
        "lost": len(lost), "dead_lettered": len(dead & captured),
        "recall_p50_ms": round(percentile(tally.recall_ms, 0.5), 1),
        "recall_p99_ms": round(percentile(tally.recall_ms, 0.99), 1),
        "capture_p99_us": round(percentile(tally.capture_us, 0.99), 1),
        "worker_rss_mb": round(rss_end, 1),
        **sampler.figures(), "load_avg": [round(v, 2) for v in os.getloadavg()],
        "duplicate_copies": counts["duplicates"], "still_queued": sum(
            1 for eid in lost if rows.get(eid, ("",))[0] in ("pending", "leased")),
        "never_queued": sum(1 for eid in captured if eid not in rows),
        "dead_letter_codes": dict(Counter(rows[eid][1] for eid in dead)),
        "dead_but_on_server": counts["dead_but_on_server"],
        "unexpected_on_server": counts["unexpected_on_server"],
        "capture_p50_us": round(percentile(tally.capture_us, 0.5), 1),
        "capture_calls": len(tally.capture_us),
        "capture_outcomes": dict(tally.outcomes), "capture_counters": capture_counters,
        "recall_calls": len(tally.recall_ms), "recall_sources": dict(tally.sources),
        "tool_calls": dict(tally.tools), "tool_error_lines": tally.tool_errors,
        "tool_p50_ms": round(percentile(tally.tool_ms, 0.5), 1) if tally.tool_ms else None,
        "tool_p99_ms": round(percentile(tally.tool_ms, 0.99), 1) if tally.tool_ms else None,
        "turns": tally.turns, "chats_opened": len(tally.chats), "sessions": len(sessions),
        "soak_s": round(soak_s, 1),
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in drained.items()},
        "worker_rss_mb_after_warmup": round(tally.rss_after_warmup_mb, 1),
        "worker_rss_peak_mb": round(rss_peak, 1),
        "worker_metrics": metrics,
        "faults": traffic if traffic is not None else "off",
        "settings": {
            "seconds": args.seconds, "chats": args.chats, "seed": args.seed, "faults": args.faults,
            "drain_bound_s": args.drain_s, "set": args.chosen,
            "fault_mix": {**DEFAULT_MIX, "retry_after_s": RETRY_AFTER_S} if args.faults else None,
            "latency": {"share": LATENCY_SHARE, "wait_s": list(LATENCY_S)} if args.faults else None,
            "turns_per_chat": list(TURNS_PER_CHAT), "tool_share": TOOL_SHARE,
            "tool_calls": [c["action"] + (f":{c['target']}" if "target" in c else "")
                           for c in TOOL_CALLS],
            "gap_s": GAP_S, "model_s": list(MODEL_S), "think_s": list(THINK_S),
            "message_chars_max": PASTE_CHARS,
            "default_executor_workers": min(32, (os.cpu_count() or 1) + 4),
            "batch_size": settings.batch_size, "concurrency": settings.concurrency,
            "max_attempts": settings.max_attempts, "lease_s": settings.lease_s,
            "sdk_timeout_s": settings.sdk_timeout_s, "recall_timeout_s": settings.recall_timeout_s,
            "poll_interval_s": settings.poll_interval_s, "cpu_count": os.cpu_count(),
        },
        "workspace": workspace,
    }
    if duplicated:
        result["duplicate_paths"] = duplicate_paths(records or [], copies, [])
    if lost:
        result["lost_paths"] = lost_paths(lost, rows, records)
    for line in sampler.growth():
        print(f"soak grew {line}", file=sys.stderr, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="Honcho API URL (default: the fake in its own process)")
    parser.add_argument("--key", default=(os.environ.get("HONCHO_API_KEY")
                                          or os.environ.get("HONCHO_REAL_ADMIN_KEY")),
                        help="API key (default: HONCHO_API_KEY, else HONCHO_REAL_ADMIN_KEY)")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the chats run")
    parser.add_argument("--faults", action="store_true", help="through the fault-injecting proxy")
    parser.add_argument("--chats", type=int, default=8, help="chats at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--drain-s", type=float, default=900.0,
                        help="bound of the final drain, seconds")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                        help="a plugin setting for the run (repeatable), "
                             "e.g. outbox_synchronous=NORMAL")
    parser.add_argument("--sample-s", type=float, default=60.0,
                        help="seconds between samples of RSS, threads and descriptors")
    parser.add_argument("--slope-after-s", type=float, default=600.0,
                        help="the RSS slope is fitted over the samples from this second on")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="trace allocations; print the sites that grew most to stderr")
    parser.add_argument("--proxy-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.chosen = {name: yaml.safe_load(value)
                   for name, _, value in (item.partition("=") for item in args.set)}
    if args.proxy_child:
        return proxy_child(args.proxy_child)
    owned = sorted(set(args.chosen) & {"outbox_path", "api_url", "mcp_url", "workspace_id"})
    if owned:
        parser.error(f"--set cannot change what the bench sets itself: {', '.join(owned)}")
    if args.seconds <= 0 or args.chats < 1 or args.drain_s < 0:
        parser.error("--seconds and --chats must be positive, --drain-s not negative")
    if len(message_text(0, PASTE_EVERY - 1)) > MAX_CONTENT_CHARS:
        raise SystemExit("soak: a message would be split into parts; "
                         "its event id would not be part 0")
    if args.tracemalloc:
        tracemalloc.start(TRACE_FRAMES)
    result = on_server(args.url, args.key or "", "honcho-hub-soak-",
                       lambda upstream, key, folder: run(args, upstream, key, folder))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
