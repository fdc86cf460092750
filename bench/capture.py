"""Capture benchmark: prints one JSON line.

Measures, in one run on the same disk: the capture hook as Agent Zero runs it (the journal write the
turn waits for, settings lookup included); capture of a 400-character message all the way into the
outbox (journal, redaction, enqueue through CaptureService) against a bare one-row insert into a WAL
database with the same `synchronous` setting (the physical floor, its same-run baseline: one of each
in turn; `capture_p50_over_bare_insert_us` is the difference) and against a synchronous
`session.add_messages` over loopback HTTP to a local server answering in one buffered write (what a
naive plugin does). Also 10,000 captures from 4 threads in each of 2 processes must leave exactly
10,000 rows.

The hook by message size (400 B, `redact_on_hook_max_bytes`, 16 KB and 1 MB, the last every tenth
round), with FULL and with NORMAL durability (`outbox_synchronous`: FULL syncs the journal on the
hook): its p99 against a same-run baseline, the same probe around an empty hook, the two timed in
turn. Each size's own `synchronous` says whether the message was redacted and journaled before the
hook returned (up to `redact_on_hook_max_bytes`) or handed to the writer in memory. The limit is
right when, at that size, the p99 stays within 2 ms of the baseline's; `--hook-only --hook-limit B
--hook-sizes ...` times other sizes redacted on the hook. Top-level `hook_us_p99_over_baseline_400`,
`hook_us_p99_over_baseline_16k`, `hook_ms_1mb` (p99) and `hook_ms_1mb_over_baseline` are FULL's;
the line's `synchronous` object holds them, with every size's figures, for each durability.
`load_avg_start`, `load_avg`: the machine's 1/5/15-minute load averages at the start and the end.

    python bench/capture.py [--runs 2000] [--sync-runs 500] [--hook-runs 1000]
    python bench/capture.py --hook-only [--hook-limit BYTES] [--hook-sizes 400,8192,16384]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from load import load_avg  # noqa: E402

from honcho_hub.capture.service import (  # noqa: E402
    REDACT_ON_HOOK_MAX_BYTES,
    CaptureRequest,
    CaptureService,
    Role,
)
from honcho_hub.settings.config import build_settings  # noqa: E402

MESSAGE = ("I moved to Lisbon last spring and I work remotely for a design studio in Berlin. "
           "Please remember that I prefer short answers, metric units and examples in Python. "
           "My sister visits in June; we want a quiet beach within an hour of the city by train. "
           "Budget is moderate, no car, and I am vegetarian, "
           "so restaurant tips should fit that too! "
           "Thanks a lot for all the help so far, see you soon, and say hello to the team from Ada."
           )[:400]
MB = 1024 * 1024


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def capture_and_bare_insert(folder: str, synchronous: str,
                            runs: int) -> tuple[list[float], list[float]]:
    """Microseconds of capture all the way into the outbox (CaptureService.capture) and of a bare
    one-row insert into a WAL database with the same `synchronous` (the physical floor, the
    capture's same-run baseline), one of each in turn on the same disk."""
    settings = build_settings(
        {"outbox_path": os.path.join(folder, f"capture-{synchronous}.sqlite3"),
         "outbox_synchronous": synchronous, "max_queued_rows": 1_000_000}, {}, {})
    service = CaptureService(settings)
    conn = sqlite3.connect(os.path.join(folder, f"bare-{synchronous}.sqlite3"),
                           isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, content TEXT NOT NULL)")
    for i in range(50):  # warm-up: open, migrate, first pages
        service.capture(CaptureRequest("warm", Role.USER, f"w{i}", MESSAGE), settings)
        conn.execute("INSERT INTO t VALUES (?, ?)", (f"w{i}", MESSAGE))
    captures, inserts = [], []
    for i in range(runs):
        request = CaptureRequest("bench0001", Role.USER, f"m{i}", MESSAGE)
        start = time.perf_counter_ns()
        service.capture(request, settings)
        captures.append((time.perf_counter_ns() - start) / 1000)
        start = time.perf_counter_ns()
        conn.execute("INSERT INTO t VALUES (?, ?)", (f"m{i}", MESSAGE))
        inserts.append((time.perf_counter_ns() - start) / 1000)
    service.close()
    conn.close()
    return captures, inserts


def paste(size: int) -> str:
    """`size` bytes (ASCII) of what people paste: prose, a log line with a URL, an assignment, code,
    a key, so that redaction meets the shapes it looks for."""
    block = (f"{MESSAGE}\n"
             "2025-05-01 12:00:01 GET https://api.example.com/v1/items?page=2 200 in 35 ms\n"
             "export DATABASE_URL=postgres://app:s3cr3t-pass@db.internal:5432/app\n"
             "def total(items):\n    return sum(item.price for item in items)\n"
             f"token ghp_{'a1B2c3D4e5' * 4}\n")
    return (block * (size // len(block) + 1))[:size]


def time_hook(sizes: list[int], runs: int, limit: int | None = None,
              durability: str = "FULL") -> list[dict]:
    """The capture hook as Agent Zero calls it on its event loop (stub host: cached settings, the
    skip rules, redaction, the journal write and its sync, the wake-ups), with the writer thread
    running and `outbox_synchronous: durability`, and the same probe around an empty hook, in turn;
    the writer finishes between messages (they come seconds apart in a chat). Sizes of 1 MB and
    more take part every tenth round only (the writer redacts each after the hook)."""
    import importlib

    from hub_testkit import StubAgent, stub_agent_zero
    from outbox_helpers import write_journal

    with stub_agent_zero() as host:
        # the capture path alone (recall has bench/recall.py)
        host.config.update(recall_enabled=False, outbox_synchronous=durability)
        capture = importlib.import_module("usr.plugins.honcho.extensions.honcho_bridge.capture")
        service = importlib.import_module("usr.plugins.honcho.honcho_hub.capture.service")
        process_hub = importlib.import_module(
            "usr.plugins.honcho.extensions.honcho_bridge.process_hub")
        if limit is not None:
            service.REDACT_ON_HOOK_MAX_BYTES = limit
        agent = StubAgent(0)
        warm_up(capture, agent, process_hub.hub())
        texts = {size: paste(size) for size in sizes}
        hook: dict[int, list[float]] = {size: [] for size in sizes}
        empty: dict[int, list[float]] = {size: [] for size in sizes}
        # the sizes in turn: a noisy moment of the machine falls on all of them
        for i in range(runs):
            for size, text in texts.items():
                if size >= MB and i % 10:
                    continue
                hook[size].append(probe(capture.capture_user_message, agent, text, f"{size}-{i}"))
                write_journal(process_hub.hub().capture(process_hub.global_settings()))
                empty[size].append(probe(lambda agent, data: None, agent, text, f"{size}-{i}"))
        return [hook_figures(size, service.fits_on_hook(text), hook[size], empty[size])
                for size, text in texts.items() if hook[size]]


def warm_up(capture, agent, hub) -> None:
    """The first messages build the settings, open the journal and the outbox and start the
    delivery worker, whose modules (the SDK) load on a thread of their own: time nothing before
    that is done."""
    for i in range(50):
        probe(capture.capture_user_message, agent, MESSAGE, f"warm-{i}")
        if i == 0:
            hub.load_delivery()  # returns once that thread's import of them has ended
    time.sleep(1.0)  # the worker's first passes


def probe(hook, agent, text: str, source: str) -> float:
    """Microseconds one call of `hook` takes on the data Agent Zero passes after a typed message."""
    import types

    from hub_testkit import StubHistoryMessage

    message = types.SimpleNamespace(message=text, attachments=[], system_message=[], id="")
    data = {"args": (agent, message), "kwargs": {}, "result": StubHistoryMessage(False, source),
            "exception": None}
    start = time.perf_counter_ns()
    hook(agent, data)
    return (time.perf_counter_ns() - start) / 1000


def hook_figures(size: int, synchronous: bool, hook: list[float], empty: list[float]) -> dict:
    p99, base = percentile(hook, .99), percentile(empty, .99)
    return {"message_bytes": size, "synchronous": synchronous, "runs": len(hook),
            "hook_us_p50": round(percentile(hook, .5), 1), "hook_us_p99": round(p99, 1),
            "hook_us_p99_baseline": round(base, 1),
            "hook_us_p99_over_baseline": round(p99 - base, 1)}


def time_sync_calls(runs: int) -> list[float]:
    import httpx
    from honcho import Honcho
    from loopback import serve

    server = serve()
    try:
        client = Honcho(base_url=server.url, api_key="bench", workspace_id="bench", max_retries=0,
                        timeout=10, http_client=httpx.Client())
        session, peer = client.session("naive"), client.peer("user")
        for _ in range(20):
            session.add_messages([peer.message(MESSAGE)])
        samples = []
        for _ in range(runs):
            start = time.perf_counter_ns()
            session.add_messages([peer.message(MESSAGE)])
            samples.append((time.perf_counter_ns() - start) / 1000)
        return samples
    finally:
        server.close()


def capture_worker(path: str, tag: str, threads: int, per_thread: int) -> None:
    settings = build_settings({"outbox_path": path, "max_queued_rows": 1_000_000}, {}, {})
    service = CaptureService(settings)

    def run(thread_no: int) -> None:
        for i in range(per_thread):
            service.capture(CaptureRequest(f"{tag}-{thread_no}", Role.USER, str(i), MESSAGE),
                            settings)

    pool = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    deadline = time.monotonic() + 60
    while service.backlog() and time.monotonic() < deadline:
        service.write_pending(settings)
    print(json.dumps({"left_in_journal": service.backlog(),
                      "counters": service.counters.snapshot()}))


def concurrent_rows(folder: str) -> tuple[int, int, list]:
    path = os.path.join(folder, "concurrent.sqlite3")
    children = [subprocess.Popen([sys.executable, __file__, "--worker", path, f"p{n}"],
                                 stdout=subprocess.PIPE, text=True) for n in range(2)]
    reports = [json.loads(child.communicate(timeout=600)[0]) for child in children]
    conn = sqlite3.connect(path)
    found = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    return 10_000, found, reports


assert len(MESSAGE) == 400, len(MESSAGE)


DURABILITIES = ("FULL", "NORMAL")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--sync-runs", type=int, default=500)
    parser.add_argument("--hook-runs", type=int, default=1000)
    parser.add_argument("--hook-limit", type=int,
                        help="redact on the hook up to this many bytes (a search)")
    parser.add_argument("--hook-sizes", help="comma-separated message sizes in bytes")
    parser.add_argument("--hook-only", action="store_true")
    parser.add_argument("--worker", nargs=2)
    args = parser.parse_args()
    if args.worker:
        return capture_worker(args.worker[0], args.worker[1], threads=4, per_thread=1250)
    load_start = load_avg()
    limit = REDACT_ON_HOOK_MAX_BYTES if args.hook_limit is None else args.hook_limit
    sizes = ([int(n) for n in args.hook_sizes.split(",")] if args.hook_sizes
             else sorted({400, limit, 16 * 1024, MB}))
    # The hook first: the disk-heavy phases below leave write-back behind that slows its fdatasync.
    hook = {durability: time_hook(sizes, args.hook_runs, args.hook_limit, durability)
            for durability in DURABILITIES}
    if args.hook_only:
        return print(json.dumps({**hook_line(hook, limit), "load_avg_start": load_start,
                                 "load_avg": load_avg()}))
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        rss_before = rss_mb()
        full, bare_full = capture_and_bare_insert(folder, "FULL", args.runs)
        rss_growth = rss_mb() - rss_before
        normal, bare_normal = capture_and_bare_insert(folder, "NORMAL", args.runs)
        sync = time_sync_calls(args.sync_runs)
        expected, found, reports = concurrent_rows(folder)
    p50, p99, bare50, sync50 = (percentile(full, .5), percentile(full, .99),
                                percentile(bare_full, .5), percentile(sync, .5))
    print(json.dumps({
        "bench": "capture", "runs": args.runs, "message_chars": len(MESSAGE),
        "capture_synchronous": "FULL",
        "capture_p50_us": round(p50, 1), "capture_p99_us": round(p99, 1),
        "bare_insert_p50_us": round(bare50, 1),
        "bare_insert_p99_us": round(percentile(bare_full, .99), 1),
        "capture_p50_over_bare_insert_us": round(p50 - bare50, 1),
        "capture_p99_over_bare_insert_us": round(p99 - percentile(bare_full, .99), 1),
        "sync_call_p50_us": round(sync50, 1), "sync_call_runs": args.sync_runs,
        "p50_ratio_to_bare_insert": round(p50 / bare50, 3),
        "speedup_vs_sync_call_p50": round(sync50 / p50, 1),
        "normal_capture_p50_us": round(percentile(normal, .5), 1),
        "normal_capture_p99_us": round(percentile(normal, .99), 1),
        "normal_bare_insert_p50_us": round(percentile(bare_normal, .5), 1),
        "normal_capture_p50_over_bare_insert_us": round(
            percentile(normal, .5) - percentile(bare_normal, .5), 1),
        "normal_p50_ratio_to_bare_insert": round(
            percentile(normal, .5) / percentile(bare_normal, .5), 3),
        "rows_expected": expected, "rows_found": found,
        "concurrent_journal_left": sum(r["left_in_journal"] for r in reports),
        "rss_growth_mb": round(rss_growth, 2), **hook_line(hook, limit),
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


def hook_line(by_durability: dict[str, list[dict]], limit: int) -> dict:
    """The hook's figures: the limit, the budget it is measured against, the issue's keys for the
    default durability (FULL) and, under `synchronous`, every size's p99s for each durability."""
    return {"redact_on_hook_max_bytes": limit, "hook_p99_budget_over_baseline_us": 2000,
            "outbox_synchronous": "FULL", **hook_keys(by_durability["FULL"]),
            "synchronous": {durability: {**hook_keys(by_size), "hook_by_message_size": by_size}
                            for durability, by_size in by_durability.items()}}


def hook_keys(by_size: list[dict]) -> dict:
    """The hook's p99 over its empty-hook baseline at 400 B and 16 KB, in µs, and at 1 MB, in ms
    (None for a size not timed)."""
    figures = {figure["message_bytes"]: figure for figure in by_size}

    def over_us(size: int) -> float | None:
        return figures[size]["hook_us_p99_over_baseline"] if size in figures else None

    one_mb = figures.get(MB)
    return {"hook_us_p99_over_baseline_400": over_us(400),
            "hook_us_p99_over_baseline_16k": over_us(16 * 1024),
            "hook_ms_1mb": round(one_mb["hook_us_p99"] / 1000, 3) if one_mb else None,
            "hook_ms_1mb_over_baseline": (round(one_mb["hook_us_p99_over_baseline"] / 1000, 3)
                                          if one_mb else None)}


if __name__ == "__main__":
    main()
