"""Delivery benchmark: prints one JSON line.

What is measured, all against one server (a loopback fake the bench starts, or `--url`):

- **Worker drain.** `--events` (10,000) events across `--sessions` (50) sessions, queued in a fresh
  outbox and drained by the real worker with default settings (batches of 20, two senders). Not
  timed: imports, the HTTP client and session creation (one warm-up message per session first). Lost
  and duplicate events are counted on the server through the SDK; RSS growth is the process's over
  the first drain.
- **Ceiling: the server's own ingest rate** for the same events, batch size and concurrency, without
  the worker: the request bodies are built before timing, exactly as the SDK would send them (`POST
  /v3/workspaces/{ws}/sessions/{sid}/messages`,
  `{"messages": [{content, peer_id, metadata, created_at}]}`), the sessions are created with their
  peers and get one warm-up message each before timing, then `concurrency` threads, each with its
  own keep-alive `httpx.Client`, post them as fast as the server answers (each session's batches in
  order on one thread, as the worker never sends one session twice at once). No outbox, no SDK.
- Drain and ceiling alternate `--repeats` times (drain, ceiling, drain, ceiling, ...), each on a
  fresh workspace, because client and server share the machine's cores: medians and every repeat are
  reported, with the client's CPU share (this process's CPU seconds / wall seconds; 1.0 is one core)
  and the whole machine's busy share (from /proc/stat) during each timed section, so a CPU-bound
  client shows.
- **Naive rate**: one `add_messages` call per message, through the SDK.
- **Lease time** at 100 vs 10,000 queued rows (medians of 200 rounds, on a local SQLite file, the
  two sizes' rounds alternated: the 100-row figure is the 10,000's same-run baseline), each figure
  one `Outbox.settle_and_lease` transaction, the worker's one transaction per step:
  - best case: rows of 20-row sessions interleaved, so the oldest row is a ready head; the same
    batch is leased and put back at the head every round;
  - worst case: one session's head batch is blocked (backing off: released with a far-future retry
    time; or in flight: leased) with the rest of the queued rows behind it in the same session, and
    one ready 20-row session captured after that whole backlog; its batch is leased and put back (a
    retry due at once) every round. The variant with the slower lease at 10,000 rows is the worst
    case.
  `lease_txn_ms_*` and `lease_worst_ms_*` time a lease with nothing to settle; `*round_ms_*` a
  worker round (settling the previous batch as a retry due at once, then leasing the next: the same
  batch).
  - an outage across many chats: 100 vs 10,000 sessions whose heads are backing off, each with a
    message behind, and one ready session captured after them all
    (`lease_worst_ms_*_blocked_sessions`).
- `load_avg_start`, `load_avg`: the machine's 1/5/15-minute load averages at the start and the end.

    python bench/delivery.py [--url URL --key KEY] [--events N] [--repeats R] [--lease-runs N]
    python bench/delivery.py --lease-only [--lease-runs N]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from load import load_avg  # noqa: E402

from honcho_hub.delivery.worker import DeliveryWorker  # noqa: E402
from honcho_hub.gateway.gateway import OBSERVATION, SOURCE  # noqa: E402
from honcho_hub.settings.config import build_settings  # noqa: E402
from honcho_hub.storage.outbox import NewEvent, Outbox, Retry, Settlement  # noqa: E402

TEXT = ("Delivery benchmark message with a realistic length for a chat turn, "
        "about two lines. ") * 2
LEASE_SIZES = (100, 10_000)
LEASE_BATCH = 20
YEAR_S = 365 * 86_400.0
WORST_VARIANTS = {"head_backing_off": "the blocked session's head batch is backing off "
                                      "(pending, retry far ahead)",
                  "head_in_flight": "the blocked session's head batch is leased (in flight)"}


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmRSS:"))


def upper_median(values: list[float]) -> float:
    """The upper median, as the lease figures have always been computed (of 200 rounds, the
    101st)."""
    return sorted(values)[len(values) // 2]


# -- CPU accounting --------------------------------------------------------------------------------

def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, in clock ticks, from /proc/stat."""
    with open("/proc/stat") as handle:
        # user..steal; guest is inside user
        fields = [int(v) for v in handle.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process so far (the loopback fake)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Timed:
    """Wall seconds, this process's CPU share and the machine's busy share over a `with` block."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.wall_s = self.client_cpu_share = self.machine_busy_share = 0.0
        self.server_cpu_share: float | None = None

    def __enter__(self) -> Timed:
        self._server = process_cpu_s(self.server_pid) if self.server_pid else 0.0
        self._machine = machine_jiffies()
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._wall
        self.client_cpu_share = (time.process_time() - self._cpu) / self.wall_s
        busy, total = (end - start
                       for end, start in zip(machine_jiffies(), self._machine, strict=True))
        self.machine_busy_share = busy / total if total else 0.0
        if self.server_pid:
            self.server_cpu_share = (process_cpu_s(self.server_pid) - self._server) / self.wall_s


# -- shared setup ----------------------------------------------------------------------------------

def start_loopback(key: str) -> tuple[subprocess.Popen, str]:
    """The fake Honcho in its own process (serves until its stdin closes); waits at most 30 s for
    it."""
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "loopback.py")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, FAKE_HONCHO_KEY=key))
    ready, _, _ = select.select([process.stdout], [], [], 30)
    url = process.stdout.readline().strip() if ready else ""
    if not url.startswith("http"):
        stop_loopback(process)
        raise RuntimeError("the loopback fake did not start")
    return process, url


def on_server(url: str | None, key: str, folder_prefix: str,
              work: Callable[[str, str, str], dict]) -> dict:
    """`work(server_url, key, folder)` against `url`, or against the loopback fake started for it
    (key `bench-key` unless one is given) and stopped after, in a temporary folder (under BENCH_DIR
    when set)."""
    fake = None
    try:
        if url is None:
            key = key or "bench-key"
            fake, url = start_loopback(key)
        with tempfile.TemporaryDirectory(prefix=folder_prefix,
                                         dir=os.environ.get("BENCH_DIR")) as folder:
            return work(url, key, folder)
    finally:
        stop_loopback(fake)


def stop_loopback(process: subprocess.Popen | None, timeout_s: float = 30.0) -> None:
    """Close its stdin (the loopback fake's stop signal), wait, kill if it does not exit in time."""
    if process is None:
        return
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout_s)


def client(url: str, key: str, workspace: str, timeout_s: float = 30.0):
    from honcho import Honcho

    return Honcho(base_url=url, api_key=key or None, workspace_id=workspace, max_retries=0,
                  timeout=timeout_s)


def event_copies_on_server(url: str, key: str, workspace: str, session_ids: list[str]) -> Counter:
    """How many copies of each `metadata.event_id` the sessions hold, read from the server
    directly."""
    from honcho.session import Session

    honcho = client(url, key, workspace, 60.0)
    copies: Counter = Counter()
    for session_id in session_ids:
        for message in Session(session_id, honcho).messages(size=100):  # iterates every page
            copies[str((message.metadata or {}).get("event_id", ""))] += 1
    return copies


def bench_events(destination: str, workspace: str, events: int, sessions: int) -> list[NewEvent]:
    """The benchmark's events: event n goes to session `bench-{n % sessions}`, captured in
    order."""
    return [NewEvent(f"ev_{workspace}_{n}", destination, workspace, f"bench-{n % sessions}",
                     "user", "user", f"{n} {TEXT}", time.time()) for n in range(events)]


def queue_events(path: str, destination: str, workspace: str, events: int, sessions: int) -> None:
    box = Outbox(path, max_rows=1_000_000)
    box.enqueue_batches([[e] for e in bench_events(destination, workspace, events, sessions)])
    box.close()


# -- worker drain ----------------------------------------------------------------------------------

def warm_up(worker: DeliveryWorker, path: str, settings, workspace: str, sessions: int) -> None:
    """One message per session first: imports, the HTTP client and session creation are not
    growth."""
    box = Outbox(path, max_rows=1_000_000)
    box.enqueue_batches([[NewEvent(f"warm_{workspace}_{s}", settings.destination(), workspace,
                                   f"bench-{s}", "user", "user", "warm-up", time.time())]
                         for s in range(sessions)])
    box.close()
    worker.drain(120)


def count_on_server(url: str, key: str, workspace: str, sessions: int,
                    prefix: str) -> tuple[int, int]:
    """(unique event ids, duplicate copies) of this run's events, read back through the SDK."""
    copies = event_copies_on_server(url, key, workspace, [f"bench-{s}" for s in range(sessions)])
    ours = [n for event_id, n in copies.items() if event_id.startswith(prefix)]
    return len(ours), sum(ours) - len(ours)


def worker_settings(url: str, key: str, workspace: str, path: str):
    return build_settings({"outbox_path": path, "api_url": url, "workspace_id": workspace,
                           "max_queued_rows": 1_000_000}, {"HONCHO_API_KEY": key}, {})


def drain_once(url: str, key: str, workspace: str, folder: str, events: int, sessions: int,
               server_pid: int | None) -> dict:
    """One timed drain by a fresh worker into a fresh workspace, then the server-side count."""
    path = os.path.join(folder, f"outbox-{workspace}.sqlite3")
    settings = worker_settings(url, key, workspace, path)
    worker = DeliveryWorker(lambda: settings)
    try:
        warm_up(worker, path, settings, workspace, sessions)
        queue_events(path, settings.destination(), workspace, events, sessions)
        rss_before = rss_mb()
        with Timed(server_pid) as timed:
            moved = worker.drain(600)
        rss_growth = rss_mb() - rss_before
    finally:
        worker.stop(10)
    unique, duplicates = count_on_server(url, key, workspace, sessions, f"ev_{workspace}_")
    return {"rate": moved["delivered"] / timed.wall_s, "delivered": moved["delivered"],
            "lost": events - unique, "duplicates": duplicates, "rss_growth_mb": rss_growth,
            "timed": timed}


# -- ceiling: the server's ingest rate -------------------------------------------------------------

def message_body(events: list[NewEvent]) -> bytes:
    """The JSON body the SDK posts for these events, built the way the worker builds its messages
    and encoded the way httpx encodes `json=` (compact separators, UTF-8)."""
    from honcho.api_types import MessageCreateParams

    messages = [MessageCreateParams(content=e.content, peer_id=e.peer_id,
                                    metadata={"event_id": e.id, "source": SOURCE, "role": e.role},
                                    created_at=datetime.fromtimestamp(e.captured_at, tz=UTC))
                .model_dump(mode="json", exclude_none=True) for e in events]
    return json.dumps({"messages": messages}, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode()


def ceiling_plan(workspace: str, events: int, sessions: int, batch: int,
                 concurrency: int) -> list[dict]:
    """Per thread: its warm-up posts (one message per session) and its timed posts, as (path,
    body). Each session belongs to one thread, its batches in capture order; a thread takes its
    sessions in turn, as the worker leases the oldest head first."""
    from honcho.http import routes

    rows: dict[str, list[NewEvent]] = {}
    for event in bench_events("ceiling", workspace, events, sessions):
        rows.setdefault(event.session_id, []).append(event)
    plans = [{"warm": [], "timed": []} for _ in range(concurrency)]
    # per thread, per session: its batches
    queues: list[list[list]] = [[] for _ in range(concurrency)]
    for s in range(sessions):
        sid = f"bench-{s}"
        path, mine = routes.messages(workspace, sid), rows.get(sid, [])
        warm = NewEvent(f"warm_{workspace}_{s}", "ceiling", workspace, sid, "user", "user",
                        "warm-up", time.time())
        plans[s % concurrency]["warm"].append((path, message_body([warm])))
        queues[s % concurrency].append([(path, message_body(mine[i:i + batch]))
                                        for i in range(0, len(mine), batch)])
    for plan, sessions_of_thread in zip(plans, queues, strict=True):
        for k in range(max(map(len, sessions_of_thread), default=0)):
            plan["timed"].extend(batches[k] for batches in sessions_of_thread if k < len(batches))
    return plans


def create_sessions(url: str, key: str, workspace: str, sessions: int, settings) -> None:
    """Sessions with both configured peers' observation settings, as the worker creates them (not
    timed)."""
    from honcho.api_types import SessionPeerConfig

    honcho = client(url, key, workspace)
    roles = {settings.user_peer_id: "user", settings.agent_peer_id: "agent"}
    pairs = [(peer, SessionPeerConfig(**OBSERVATION[role])) for peer, role in roles.items()]
    for s in range(sessions):
        honcho.session(f"bench-{s}", peers=pairs)


def ceiling_once(url: str, key: str, workspace: str, events: int, sessions: int, settings,
                 server_pid: int | None) -> dict:
    """One timed run of `concurrency` raw-httpx posters over pre-built bodies into a fresh
    workspace."""
    from honcho.http.client import default_host_header

    create_sessions(url, key, workspace, sessions, settings)
    plans = ceiling_plan(workspace, events, sessions, settings.batch_size, settings.concurrency)
    headers = {"Content-Type": "application/json", "X-Honcho-Host": default_host_header()}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    # A poster that fails before the start breaks the barriers (after their timeout) instead of
    # hanging.
    ready, go = (threading.Barrier(len(plans) + 1, timeout=300) for _ in range(2))
    failed = [0] * len(plans)

    def post_all(index: int) -> None:
        with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=30) as http:
            # one message per session: keep-alive up, state as the drain's
            for path, body in plans[index]["warm"]:
                http.post(path, content=body)
            ready.wait()
            go.wait()
            for path, body in plans[index]["timed"]:
                try:
                    failed[index] += not http.post(path, content=body).is_success
                except httpx.HTTPError:
                    failed[index] += 1

    threads = [threading.Thread(target=post_all, args=(i,), name=f"ceiling-{i}")
               for i in range(len(plans))]
    for thread in threads:
        thread.start()
    ready.wait()
    with Timed(server_pid) as timed:
        go.wait()
        for thread in threads:
            thread.join()
    return {"rate": events / timed.wall_s, "failed_requests": sum(failed), "timed": timed}


# -- naive -----------------------------------------------------------------------------------------

def naive_rate(url: str, key: str, workspace: str, messages: int) -> float:
    honcho = client(url, key, workspace)
    session, peer = honcho.session("naive"), honcho.peer("user")
    start = time.perf_counter()
    for n in range(messages):
        session.add_messages([peer.message(f"{n} {TEXT}")])
    return messages / (time.perf_counter() - start)


# -- lease -----------------------------------------------------------------------------------------
# Every figure times `Outbox.settle_and_lease`, the worker's one transaction per step, on
# destination "d".

def put_back(ids: list[str], at: float = 0.0) -> Settlement:
    """A settlement releasing `ids` for another attempt at `at` (0.0: ready at once), counting
    none."""
    return Settlement(retries=[Retry(ids, at, "bench", burn_attempt=False)])


def timed_lease(box: Outbox, settlement: Settlement, owner: str = "bench", lease_s: float = 60.0,
                count: int = 1) -> tuple[list, float]:
    """One settle_and_lease recording `settlement` and leasing up to `count` batches: the first
    batch ([] when none was ready) and the transaction's wall time in ms."""
    start = time.perf_counter()
    batches = box.settle_and_lease(settlement, owner, count, LEASE_BATCH, lease_s, "d")
    return (batches[0] if batches else []), (time.perf_counter() - start) * 1000


def expect_batch(batch: list, what: str, session: str | None = None) -> list[str]:
    """The batch's ids; exits unless it is a full batch (of `session`, when given)."""
    if len(batch) != LEASE_BATCH or (session is not None
                                     and any(e.session_id != session for e in batch)):
        raise SystemExit(f"lease bench: {what} did not return a full batch"
                         f"{f' of {session}' if session else ''}")
    return [e.id for e in batch]


def expect_leased(box: Outbox, queued: int, leased: int, what: str) -> None:
    """Exits unless exactly `leased` of the `queued` rows are leased and the rest pending."""
    counts = box.stats()["counts"]
    if (counts["leased"], counts["pending"]) != (leased, queued - leased):
        raise SystemExit(f"lease bench: after {what}, {counts['leased']} rows leased "
                         f"instead of {leased}")


def lease_rounds(box: Outbox, runs: int, session: str | None) -> Iterator[tuple[float, float]]:
    """Per round, in ms, two settle_and_lease transactions: a lease with nothing to settle, then a
    worker round (settling that batch as a retry due at once and leasing the next batch: the same
    one again). Each round's batch is then put back untimed."""
    for _ in range(runs):
        batch, lease = timed_lease(box, Settlement())
        batch, rounds = timed_lease(box, put_back(expect_batch(batch, "the lease", session)))
        box.settle_and_lease(put_back(expect_batch(batch, "the round", session)), "bench", 0,
                             LEASE_BATCH, 60, "d")
        yield lease, rounds


def alternated(setups: dict[int, Callable[[], tuple[Outbox, int, int, str | None]]],
               runs: int) -> dict[int, tuple[float, float]]:
    """`lease_rounds` on each outbox `setups` builds ((box, queued rows, rows held leased, the
    session leased)), one round of each in turn, so a noisy moment of the machine falls on all of
    them: per outbox, the medians (lease, round). Each outbox's `leased` rows stay held
    throughout."""
    built = {size: setup() for size, setup in setups.items()}
    try:
        rounds = {size: lease_rounds(box, runs, session)
                  for size, (box, _, _, session) in built.items()}
        samples: dict[int, list[tuple[float, float]]] = {size: [] for size in built}
        for _ in range(runs):
            for size, rounds_of in rounds.items():
                samples[size].append(next(rounds_of))
        for box, queued, leased, _ in built.values():
            expect_leased(box, queued, leased, "the rounds")
    finally:
        for box, *_ in built.values():
            box.close()
    return {size: (upper_median([lease for lease, _ in taken]),
                   upper_median([round_ for _, round_ in taken]))
            for size, taken in samples.items()}


def best_case_outbox(folder: str, queued: int) -> tuple[Outbox, int, int, None]:
    """Best case: `queued` pending rows, 20 per session with sessions interleaved, so the oldest row
    is a ready head and both sizes lease the same 20-event batch."""
    path = os.path.join(folder, f"lease-{queued}.sqlite3")
    queue_events(path, "d", "lease", queued, max(1, queued // 20))
    return Outbox(path, max_rows=1_000_000), queued, 0, None


def blocked_outbox(folder: str, queued: int, variant: str) -> tuple[Outbox, int, int, str]:
    """`queued` rows: session "blocked" (its head batch backing off or in flight, the backlog behind
    it), then session "ready" (one batch, captured after the whole backlog)."""
    path = os.path.join(folder, f"lease-worst-{variant}-{queued}.sqlite3")
    box = Outbox(path, max_rows=1_000_000)
    rows = ([("blocked", n) for n in range(queued - LEASE_BATCH)]
            + [("ready", n) for n in range(LEASE_BATCH)])
    box.enqueue_batches([[NewEvent(f"{sid}_{n}", "d", "lease", sid, "user", "user", f"{n} {TEXT}",
                                   time.time())]
                         for sid, n in rows])
    # a lease that never expires here
    head, _ = timed_lease(box, Settlement(), "bench-head", YEAR_S)
    head_ids = expect_batch(head, "the first lease", "blocked")
    if variant == "head_backing_off":
        box.settle_and_lease(put_back(head_ids, time.time() + YEAR_S), "bench-head", 0,
                             LEASE_BATCH, YEAR_S, "d")
    leased = blocked_leased(variant)
    expect_leased(box, queued, leased, f"blocking the head ({variant})")
    return box, queued, leased, "ready"


def blocked_leased(variant: str) -> int:
    """How many rows stay leased while the blocked session's head is blocked in `variant`."""
    return LEASE_BATCH if variant == "head_in_flight" else 0


def blocked_sessions_outbox(folder: str, sessions: int) -> tuple[Outbox, int, int, str]:
    """An outage across many chats: `sessions` sessions, each a head backing off (released with a
    far-future retry time) and a message behind it, then session "ready" (one batch, captured after
    them all)."""
    path = os.path.join(folder, f"lease-blocked-sessions-{sessions}.sqlite3")
    box = Outbox(path, max_rows=1_000_000)
    rows = ([(f"blocked-{s}", 0) for s in range(sessions)]
            + [(f"blocked-{s}", 1) for s in range(sessions)]
            + [("ready", n) for n in range(LEASE_BATCH)])
    box.enqueue_batches([[NewEvent(f"{sid}_{n}", "d", "lease", sid, "user", "user", f"{n} {TEXT}",
                                   time.time())]
                         for sid, n in rows])
    heads = box.settle_and_lease(Settlement(), "bench-head", sessions, 1, YEAR_S, "d")
    if len(heads) != sessions or any(b[0].id != f"blocked-{s}_0" for s, b in enumerate(heads)):
        raise SystemExit("lease bench: the blocked sessions' heads were not leased in order")
    box.settle_and_lease(put_back([b[0].id for b in heads], time.time() + YEAR_S), "bench-head",
                         0, LEASE_BATCH, YEAR_S, "d")
    queued = len(rows)
    expect_leased(box, queued, 0, "backing off every blocked session's head")
    return box, queued, 0, "ready"


def lease_figures(folder: str, runs: int) -> dict:
    """Best-case and worst-case lease keys, each size alternated with the other; the worst variant
    is the slower lease at 10,000 rows."""
    low, high = LEASE_SIZES
    best = alternated({n: functools.partial(best_case_outbox, folder, n) for n in LEASE_SIZES},
                      runs)
    (tx_low, round_low), (tx_high, round_high) = best[low], best[high]
    variants = {v: alternated({n: functools.partial(blocked_outbox, folder, n, v)
                               for n in LEASE_SIZES}, runs)
                for v in WORST_VARIANTS}
    worst = max(variants, key=lambda v: variants[v][high][0])
    (wtx_low, wround_low), (wtx_high, wround_high) = variants[worst][low], variants[worst][high]
    sessions = alternated({n: functools.partial(blocked_sessions_outbox, folder, n)
                           for n in LEASE_SIZES}, runs)
    (stx_low, _), (stx_high, _) = sessions[low], sessions[high]
    return {
        "lease_txn_ms_100": round(tx_low, 3), "lease_txn_ms_10000": round(tx_high, 3),
        "lease_txn_ratio_10000_vs_100": round(tx_high / tx_low, 2),
        "lease_round_ms_100": round(round_low, 3), "lease_round_ms_10000": round(round_high, 3),
        "lease_round_ratio_10000_vs_100": round(round_high / round_low, 2),
        "lease_worst_ms_100": round(wtx_low, 3), "lease_worst_ms_10000": round(wtx_high, 3),
        "lease_worst_ratio_10000_vs_100": round(wtx_high / wtx_low, 2),
        "lease_worst_round_ms_100": round(wround_low, 3),
        "lease_worst_round_ms_10000": round(wround_high, 3),
        "lease_worst_round_ratio_10000_vs_100": round(wround_high / wround_low, 2),
        "lease_worst_case": WORST_VARIANTS[worst],
        "lease_worst_variants_ms": {
            v: {f"lease_ms_{n}": round(variants[v][n][0], 3) for n in LEASE_SIZES}
            | {f"round_ms_{n}": round(variants[v][n][1], 3) for n in LEASE_SIZES}
            for v in variants},
        "lease_worst_ms_100_blocked_sessions": round(stx_low, 3),
        "lease_worst_ms_10000_blocked_sessions": round(stx_high, 3),
        "lease_worst_ms_10000_over_100_blocked_sessions": round(stx_high - stx_low, 3),
        "lease_worst_ratio_10000_vs_100_blocked_sessions": round(stx_high / stx_low, 2),
        "lease_measures": f"median of {runs} rounds, ms, each one Outbox.settle_and_lease"
                          " transaction, the two sizes' rounds alternated."
                          " lease_txn_ms_*: best case, leasing one batch with nothing to settle;"
                          " lease_round_ms_*: best case, settling the previous batch as a retry"
                          " due at once and leasing the next;"
                          " lease_worst_ms_*, lease_worst_round_ms_*:"
                          " the same two in the worst case;"
                          " lease_worst_ms_*_blocked_sessions: leasing the one ready session"
                          " captured after that many sessions whose heads back off",
    }


# -- the run ---------------------------------------------------------------------------------------

def interleaved(url: str, key: str, base: str, folder: str, args, settings,
                server_pid: int | None) -> tuple[list, list]:
    """drain, ceiling, drain, ceiling, ... each on its own fresh workspace."""
    drains, ceilings = [], []
    for r in range(args.repeats):
        drains.append(drain_once(url, key, f"{base}-r{r}-drain", folder, args.events,
                                 args.sessions, server_pid))
        ceilings.append(ceiling_once(url, key, f"{base}-r{r}-ceiling", args.events,
                                     args.sessions, settings, server_pid))
    return drains, ceilings


def cpu_keys(name: str, runs: list[dict]) -> dict:
    timed = [run["timed"] for run in runs]
    keys = {f"client_cpu_share_{name}": round(
                statistics.median([t.client_cpu_share for t in timed]), 2),
            f"client_cpu_share_{name}_per_repeat": [round(t.client_cpu_share, 2) for t in timed],
            f"machine_cpu_busy_share_{name}_per_repeat": [round(t.machine_busy_share, 2)
                                                           for t in timed]}
    if timed[0].server_cpu_share is not None:
        keys[f"loopback_server_cpu_share_{name}_per_repeat"] = [round(t.server_cpu_share, 2)
                                                                for t in timed]
    return keys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--key", default=os.environ.get("HONCHO_API_KEY", ""))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--naive-messages", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lease-runs", type=int, default=200)
    parser.add_argument("--lease-only", action="store_true",
                        help="only the lease figures (a local SQLite file, no server)")
    args = parser.parse_args()
    load_start = load_avg()
    if args.lease_only:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
            lease = lease_figures(folder, args.lease_runs)
        return print(json.dumps({"bench": "delivery", "lease_only": True, **lease,
                                 "load_avg_start": load_start, "load_avg": load_avg()}))
    server, url, key = None, args.url, args.key
    if url is None:
        key = key or "bench-key"
        server, url = start_loopback(key)
    base = f"honcho-hub-bench-{uuid.uuid4().hex[:8]}"  # never a user's own workspace
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
            # defaults to match
            settings = worker_settings(url, key, base, os.path.join(folder, "unused.sqlite3"))
            drains, ceilings = interleaved(url, key, base, folder, args, settings,
                                           server.pid if server else None)
            naive = naive_rate(url, key, f"{base}-naive", args.naive_messages)
            lease = lease_figures(folder, args.lease_runs)
    finally:
        stop_loopback(server)
    drain_rate = statistics.median([d["rate"] for d in drains])
    ceiling = statistics.median([c["rate"] for c in ceilings])
    print(json.dumps({
        "bench": "delivery", "server": "loopback-fake" if args.url is None else "given-url",
        "events": args.events, "sessions": args.sessions, "batch_size": settings.batch_size,
        "concurrency": settings.concurrency, "repeats": args.repeats, "cpu_count": os.cpu_count(),
        "delivered_per_repeat": [d["delivered"] for d in drains],
        "drain_events_per_s": round(drain_rate, 1),
        "drain_events_per_s_per_repeat": [round(d["rate"], 1) for d in drains],
        "naive_events_per_s": round(naive, 1), "naive_messages": args.naive_messages,
        "ceiling_events_per_s": round(ceiling, 1),
        "ceiling_events_per_s_per_repeat": [round(c["rate"], 1) for c in ceilings],
        "ceiling_method": "raw httpx, pre-built bodies as the SDK sends them, same events, batch"
                          " size and concurrency as the worker (one keep-alive client per thread,"
                          " each session's batches in order on one thread); sessions with peers"
                          " created and warmed before timing; no outbox, no SDK",
        "ceiling_failed_requests": sum(c["failed_requests"] for c in ceilings),
        "speedup_vs_naive": round(drain_rate / naive, 2),
        "ratio_to_ceiling": round(drain_rate / ceiling, 3),
        "ratio_to_ceiling_per_repeat": [round(d["rate"] / c["rate"], 3)
                                        for d, c in zip(drains, ceilings, strict=True)],
        "rate_measures": "drain_events_per_s, ceiling_events_per_s: medians over the repeats of"
                         " events / wall seconds of the timed section; ratio_to_ceiling: drain"
                         " median / ceiling median; *_per_repeat: in run order, drain r ran just"
                         " before ceiling r, each on a fresh workspace",
        **cpu_keys("drain", drains), **cpu_keys("ceiling", ceilings),
        "cpu_share_means": "client: this process's CPU seconds / wall seconds of the timed section"
                           " (1.0 = one core busy); machine: busy share of all cores from"
                           " /proc/stat (1.0 = all busy); loopback server: the fake's process,"
                           " like the client's",
        **lease,
        "rss_growth_mb": round(drains[0]["rss_growth_mb"], 2),
        "rss_growth_mb_per_repeat": [round(d["rss_growth_mb"], 2) for d in drains],
        "lost": sum(d["lost"] for d in drains),
        "duplicates": sum(d["duplicates"] for d in drains),
        "lost_per_repeat": [d["lost"] for d in drains],
        "duplicates_per_repeat": [d["duplicates"] for d in drains],
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


if __name__ == "__main__":
    main()
