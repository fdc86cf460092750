"""Delivery benchmark: prints one JSON line.

10,000 events across 50 sessions drained by the real worker (default settings: batches of 20, two
senders), against, in the same run and on the same server: (a) the naive path, one `add_messages`
call per message; (b) the ceiling, a tight SDK loop over pre-built batches of the same size with
setup excluded. Also the lease query time at 100 vs 10,000 queued rows, the worker's RSS growth,
and lost/duplicate events counted on the server side through the SDK.

    python bench/delivery.py [--url URL --key KEY]   # default: a loopback fake the bench starts
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from honcho_hub.config import build_settings  # noqa: E402
from honcho_hub.outbox import NewEvent, Outbox  # noqa: E402
from honcho_hub.worker import DeliveryWorker  # noqa: E402

TEXT = "Delivery benchmark message with a realistic length for a chat turn, about two lines. " * 2


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmRSS:"))


def start_loopback(key: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "loopback.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=dict(os.environ, FAKE_HONCHO_KEY=key))
    return process, process.stdout.readline().strip()


def client(url: str, key: str, workspace: str):
    from honcho import Honcho

    return Honcho(base_url=url, api_key=key, workspace_id=workspace, max_retries=0, timeout=30)


def queue_events(path: str, destination: str, workspace: str, events: int, sessions: int) -> None:
    box = Outbox(path, max_rows=1_000_000)
    box.enqueue_batches([[NewEvent(f"ev_{workspace}_{n}", destination, workspace, f"bench-{n % sessions}", "user",
                                   "user", f"{n} {TEXT}", time.time())] for n in range(events)])
    box.close()


def lease_ms(folder: str, queued: int, runs: int = 200) -> tuple[float, float]:
    """Medians, in ms, of the lease query (finding the oldest ready session head and reading its batch)
    and of the whole lease transaction (query, marking the rows, commit). `queued` pending rows, 20 per
    session with sessions interleaved, so both sizes lease the same 20-event batch."""
    path = os.path.join(folder, f"lease-{queued}.sqlite3")
    queue_events(path, "d", "lease", queued, max(1, queued // 20))
    box = Outbox(path, max_rows=1_000_000)
    query, transaction = [], []
    for _ in range(runs):
        start = time.perf_counter()
        box.next_batch(20, destination="d")
        query.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        batch = box.lease("bench", 20, 60, destination="d")
        transaction.append((time.perf_counter() - start) * 1000)
        box.retry_at([e.id for e in batch], 0.0, "bench", burn_attempt=False)
    box.close()
    return sorted(query)[runs // 2], sorted(transaction)[runs // 2]


def warm_up(worker: DeliveryWorker, path: str, settings, workspace: str, sessions: int) -> None:
    """One message per session first: imports, the HTTP client and session creation are not growth."""
    box = Outbox(path, max_rows=1_000_000)
    box.enqueue_batches([[NewEvent(f"warm_{workspace}_{s}", settings.destination(), workspace, f"bench-{s}", "user",
                                   "user", "warm-up", time.time())] for s in range(sessions)])
    box.close()
    worker.drain(120)


def count_on_server(url: str, key: str, workspace: str, sessions: int, prefix: str) -> tuple[int, int]:
    """(unique event ids, duplicate copies) of this run's events, read back through the SDK."""
    honcho = client(url, key, workspace)
    from honcho.session import Session

    ids: list[str] = []
    for s in range(sessions):
        page = Session(f"bench-{s}", honcho).messages(size=100)
        for message in page:  # iterates every page
            event_id = (message.metadata or {}).get("event_id", "")
            if event_id.startswith(prefix):
                ids.append(event_id)
    return len(set(ids)), len(ids) - len(set(ids))


def naive_rate(url: str, key: str, workspace: str, messages: int) -> float:
    honcho = client(url, key, workspace)
    session, peer = honcho.session("naive"), honcho.peer("user")
    start = time.perf_counter()
    for n in range(messages):
        session.add_messages([peer.message(f"{n} {TEXT}")])
    return messages / (time.perf_counter() - start)


def ceiling_rate(url: str, key: str, workspace: str, events: int, sessions: int, batch: int) -> float:
    from honcho.api_types import MessageCreateParams

    honcho = client(url, key, workspace)
    targets = [honcho.session(f"ceiling-{s}") for s in range(sessions)]  # setup, not timed
    batches = [(targets[(i // batch) % sessions], [MessageCreateParams(content=f"{n} {TEXT}", peer_id="user")
                                                   for n in range(i, min(i + batch, events))])
               for i in range(0, events, batch)]
    start = time.perf_counter()
    for session, messages in batches:
        session.add_messages(messages)
    return events / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--key", default=os.environ.get("HONCHO_API_KEY", ""))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--naive-messages", type=int, default=1_000)
    args = parser.parse_args()
    server, url, key = None, args.url, args.key
    if url is None:
        key = key or "bench-key"
        server, url = start_loopback(key)
    workspace = f"honcho-hub-bench-{uuid.uuid4().hex[:8]}"  # never a user's own workspace
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
            path = os.path.join(folder, "outbox.sqlite3")
            settings = build_settings({"outbox_path": path, "api_url": url, "workspace_id": workspace,
                                       "max_queued_rows": 1_000_000}, {"HONCHO_API_KEY": key}, {})
            worker = DeliveryWorker(lambda: settings)
            warm_up(worker, path, settings, workspace, args.sessions)
            queue_events(path, settings.destination(), workspace, args.events, args.sessions)
            rss_before = rss_mb()
            start = time.perf_counter()
            moved = worker.drain(600)
            drain_s = time.perf_counter() - start
            rss_growth = rss_mb() - rss_before
            worker.stop(10)
            unique, duplicates = count_on_server(url, key, workspace, args.sessions, f"ev_{workspace}_")
            naive = naive_rate(url, key, workspace, args.naive_messages)
            ceiling = ceiling_rate(url, key, workspace, args.events, args.sessions, settings.batch_size)
            (lease_100, lease_tx_100), (lease_10000, lease_tx_10000) = lease_ms(folder, 100), lease_ms(folder, 10_000)
    finally:
        if server is not None:
            server.stdin.close()
            server.wait(30)
    drain_rate = moved["delivered"] / drain_s
    print(json.dumps({
        "bench": "delivery", "server": "loopback-fake" if args.url is None else "given-url",
        "events": args.events, "sessions": args.sessions, "batch_size": settings.batch_size,
        "concurrency": settings.concurrency, "delivered": moved["delivered"],
        "drain_events_per_s": round(drain_rate, 1), "naive_events_per_s": round(naive, 1),
        "naive_messages": args.naive_messages, "ceiling_events_per_s": round(ceiling, 1),
        "speedup_vs_naive": round(drain_rate / naive, 2), "ratio_to_ceiling": round(drain_rate / ceiling, 3),
        "lease_ms_100": round(lease_100, 3), "lease_ms_10000": round(lease_10000, 3),
        "lease_ratio_10000_vs_100": round(lease_10000 / lease_100, 2),
        "lease_txn_ms_100": round(lease_tx_100, 3), "lease_txn_ms_10000": round(lease_tx_10000, 3),
        "lease_txn_ratio_10000_vs_100": round(lease_tx_10000 / lease_tx_100, 2), "rss_growth_mb": round(rss_growth, 2),
        "lost": args.events - unique, "duplicates": duplicates,
    }))


if __name__ == "__main__":
    main()
