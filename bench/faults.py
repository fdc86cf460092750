"""Fault benchmark: what reaches Honcho when the network between the worker and Honcho misbehaves.

A fault-injecting loopback proxy (bench/fault_proxy.py) sits in front of the server, and every API
request through it (session, peer and workspace creation, message adds, the worker's
reconciliation lookups `POST .../sessions/{id}/messages/list`) draws its fate from
`random.Random(seed)`: 5% answered 503, 5% reset before forwarding, 5% reset after the server
answered (stored, never heard), 3% answered 429 with `Retry-After: 1`. N events over 50 sessions are
queued in a fresh outbox and drained by the real `DeliveryWorker` with the shipped delivery settings
(batches of 20, two senders, default backoff and circuit) until every event is delivered or dead, or
a time bound passes. Then every message of the run's sessions is read from the server directly (not
through the proxy) and counted by `metadata.event_id`.

The same proxy then carries a naive loop for comparison: one `add_messages` call per event through
the SDK (`max_retries=0`), repeated at once on any exception, up to 20 tries.

With `--kill K`, the drain runs in a child process that is killed with SIGKILL, K times, each time
restarted; a last child drains to the end. A kill comes a seeded random 0.5-5 s after the child
began draining, at its next message add, once the server stored the batch and while the proxy holds
the answer (the worst moment: stored, never acknowledged); without a message add within 5 s, it
comes anyway. Children use the smallest lease the settings accept (10 s, or 3 × sdk_timeout_s = 30 s
where the settings demand that), so a restart waits at most that long for a dead worker's leases.
Counts are over the whole run.

Prints one JSON line. The server is a loopback fake Honcho this script starts (tests/loopback.py in
a subprocess), or the server at --url; either way in a new workspace `honcho-hub-faults-<hex>`.
Counts: delivered = queued event ids found on the server; duplicates = copies beyond the first;
lost = queued ids neither on the server nor dead-lettered; reconcile_failures = faults injected on
message-list requests; duplicate_paths = for each extra copy, what the proxy saw between the copy
before it and the resend; drain_s = from the start of the drain until no event is pending or leased
(restarts included).

Same-run baselines (issue 27): the machine's and the server's part of a drain, without faults and
without our worker. Through a second proxy that injects nothing, half the events go before the
drain and half after it (so a drift of the load falls on both), into fresh workspaces: for the
worker's drain, bench/delivery.py's ceiling (pre-built batches of the worker's size posted by as
many raw-httpx posters as its senders); for the naive loop, one SDK `add_messages` per event.
Printed as `drain_s_baseline` (the two halves' sum; each in `drain_s_baseline_halves`) and
`drain_s_over_baseline` (what the faults and our handling of them add), at the top level and in
`naive`. `load_avg_start`, `load_avg`: the machine's load at the start and the end.

    python bench/faults.py [--url URL] [--key KEY] [--events N] [--seed S] [--kill K]
                           [--naive-events M]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]

from baseline import beside  # noqa: E402
from delivery import (  # noqa: E402
    ceiling_once,
    client,
    event_copies_on_server,
    naive_rate,
    on_server,
)
from fault_proxy import DEFAULT_MIX, RETRY_AFTER_S, FaultProxy, ProxiedRequest, summarize  # noqa: E402
from load import load_avg  # noqa: E402

from honcho_hub.delivery.worker import DeliveryWorker  # noqa: E402
from honcho_hub.settings.config import build_settings  # noqa: E402
from honcho_hub.storage.outbox import NewEvent, Outbox  # noqa: E402

TEXT = ("Fault benchmark message with a realistic length for a chat turn, "
        "about two lines of text. ") * 2
LEASE_FLOOR_S = 10.0  # the lower bound of lease_s; the settings may demand more (3 × sdk_timeout_s)
IDLE_POLL_S = 0.1  # between drains while nothing is ready (backoff or an open circuit)
KILL_WINDOW_S = (0.5, 5.0)  # a child is killed this long after it reported it is draining...
KILL_ARMED_S = 5.0  # ...at its next message add in flight, if one comes within this long
NAIVE_TRIES = 20
CHILD_START_TIMEOUT_S = 60.0
PROCESS_EXIT_TIMEOUT_S = 30.0
END_OF_OUTPUT = "\x00end"  # what Child.next_line gives once a child's stdout has closed
MAX_PATH_TOKENS = 8  # duplicate paths keep the copy before and this many steps before the resend


# -- the worker's side -----------------------------------------------------------------------------

def queue_events(path: str, destination: str, workspace: str, prefix: str, events: int,
                 sessions: int) -> list[str]:
    """N events, session by round robin, into a fresh outbox; returns their ids in capture order."""
    box = Outbox(path, max_rows=1_000_000)
    ids = [f"{prefix}{n}" for n in range(events)]
    try:
        box.enqueue_batches([[NewEvent(event_id, destination, workspace, f"faults-{n % sessions}",
                                       "user", "user", f"{n} {TEXT}", time.time())]
                             for n, event_id in enumerate(ids)])
    finally:
        box.close()
    return ids


def worker_settings(outbox_path: str, api_url: str, workspace: str, key: str,
                    lease_s: float | None):
    """The shipped defaults, except where events go, the row bound (room for N) and, if given, the
    lease."""
    plugin = {"outbox_path": outbox_path, "api_url": api_url, "workspace_id": workspace,
              "max_queued_rows": 1_000_000}
    if lease_s is not None:
        plugin["lease_s"] = lease_s
    return build_settings(plugin, {"HONCHO_API_KEY": key}, {})


def smallest_accepted_lease_s(outbox_path: str, api_url: str, workspace: str, key: str) -> float:
    """The shortest lease the settings keep as given (they replace one that is too short for a
    request)."""
    settings = worker_settings(outbox_path, api_url, workspace, key, None)
    for candidate in (LEASE_FLOOR_S, 3 * settings.sdk_timeout_s):
        if worker_settings(outbox_path, api_url, workspace, key, candidate).lease_s == candidate:
            return candidate
    return settings.lease_s


def drain_until_settled(worker: DeliveryWorker, outbox_path: str, bound_s: float) -> dict:
    """Step the worker until no event is pending or leased, or `bound_s` passed."""
    deadline = time.monotonic() + bound_s
    moved: Counter = Counter()
    box = Outbox(outbox_path, busy_timeout_s=5.0, max_rows=1_000_000)  # for counting only
    try:
        while any(box.stats()["counts"][state] for state in ("pending", "leased")):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {"moved": dict(moved), "timed_out": True}
            step_moved = worker.drain(min(remaining, 60.0))
            moved.update(step_moved)
            if not any(step_moved.values()):
                # waiting out a backoff, an open circuit or a dead worker's lease
                time.sleep(IDLE_POLL_S)
    finally:
        box.close()
    return {"moved": dict(moved), "timed_out": False}


def worker_metrics(worker: DeliveryWorker) -> dict:
    with worker.state.lock:
        metrics = asdict(worker.state.metrics)
    wanted = ("requests", "sent", "reconciled", "reconcile_failures", "failed", "dead")
    return {k: metrics[k] for k in wanted if k in metrics}


def drain_in_process(outbox_path: str, api_url: str, workspace: str, key: str, seed: int,
                     bound_s: float) -> dict:
    settings = worker_settings(outbox_path, api_url, workspace, key, None)
    worker = DeliveryWorker(lambda: settings, rng=random.Random(f"worker-{seed}"))
    started = time.perf_counter()
    try:
        outcome = drain_until_settled(worker, outbox_path, bound_s)
    finally:
        worker.stop(10)
    return {**outcome, "drain_s": time.perf_counter() - started, "lease_s": settings.lease_s,
            "worker_metrics": worker_metrics(worker), "kill_marks": []}


def child_main(config_json: str) -> None:
    """In a child process: drain with a fresh worker, say 'draining' first and the outcome last."""
    config = json.loads(config_json)
    key = os.environ.get("HONCHO_API_KEY", "")
    settings = worker_settings(config["outbox"], config["api_url"], config["workspace"], key,
                               config["lease_s"])
    worker = DeliveryWorker(lambda: settings, rng=random.Random(config["rng_seed"]))
    print("draining", flush=True)
    try:
        outcome = drain_until_settled(worker, config["outbox"], config["bound_s"])
    finally:
        worker.stop(10)
    print(json.dumps({**outcome, "worker_metrics": worker_metrics(worker),
                      "lease_s": settings.lease_s}), flush=True)


class Child:
    """A draining child process whose stdout lines arrive on a queue (so every wait is bounded)."""

    def __init__(self, config: dict, key: str, stderr_path: str) -> None:
        self._stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr,
            env=dict(os.environ, HONCHO_API_KEY=key), text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, name="faults-child-stdout", daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put(END_OF_OUTPUT)

    def next_line(self, timeout_s: float) -> str | None:
        """The next stdout line, END_OF_OUTPUT after the last, None when `timeout_s` passed
        first."""
        try:
            return self.lines.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None

    def stderr_tail(self, chars: int = 800) -> str:
        with open(self._stderr_path, "rb") as handle:
            return handle.read().decode(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL (if it still runs) and reap it; safe to call more than once, from any thread."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.wait()

    def wait(self) -> int | None:
        try:
            return self.process.wait(PROCESS_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(PROCESS_EXIT_TIMEOUT_S)
        finally:
            self._stderr.close()


def drain_with_kills(folder: str, outbox_path: str, api_url: str, workspace: str, key: str,
                     seed: int, kills: int, bound_s: float, proxy: FaultProxy) -> dict:
    """K children killed with SIGKILL mid-drain, then one that drains to the end.

    A kill waits a seeded 0.5-5 s after the child began draining, then strikes on the child's next
    message add, once the server answered it and before the child hears (faulted or not); if none
    comes within KILL_ARMED_S (a backoff, an open circuit, lookups), it strikes anyway."""
    kill_rng = random.Random(f"kill-{seed}")
    lease_s = smallest_accepted_lease_s(outbox_path, api_url, workspace, key)
    deadline = time.monotonic() + bound_s
    started = time.perf_counter()
    kill_marks: list[int] = []  # proxy request count at each kill: which requests came before it
    kill_delays: list[float] = []
    kill_points: Counter = Counter()  # whether a message add was in flight at each kill
    early_report: str | None = None
    child: Child | None = None
    try:
        for trial in range(kills + 1):
            config = {"outbox": outbox_path, "api_url": api_url, "workspace": workspace,
                      "lease_s": lease_s, "rng_seed": f"worker-{seed}-{trial}",
                      "bound_s": max(1.0, deadline - time.monotonic())}
            child = Child(config, key, os.path.join(folder, f"child-{trial}.stderr"))
            if child.next_line(CHILD_START_TIMEOUT_S) != "draining":
                raise RuntimeError(f"child {trial} did not start: {child.stderr_tail()}")
            if trial == kills:
                break  # the last child drains to the end
            delay = kill_rng.uniform(*KILL_WINDOW_S)
            line = child.next_line(delay)
            if line == END_OF_OUTPUT:
                raise RuntimeError(f"child {trial} exited with {child.wait()} on its own: "
                                   f"{child.stderr_tail()}")
            if line is not None and line.startswith("{"):  # it settled everything before its kill
                early_report = line
                break
            kill_delays.append(round(delay, 2))
            kill_points[kill_in_flight(child, proxy, kill_marks)] += 1
            child = None
        report = report_of(child, deadline, early_report)
        child = None
    finally:
        if child is not None:
            child.kill()
    return {"lease_s": lease_s, **report, "drain_s": time.perf_counter() - started,
            "kill_marks": kill_marks, "kills_done": len(kill_marks), "kill_delays_s": kill_delays,
            "kill_points": dict(kill_points), "finished_before_last_kill": early_report is not None}


def kill_in_flight(child: Child, proxy: FaultProxy, kill_marks: list[int]) -> str:
    """SIGKILL `child` while the proxy holds the answer to one of its message adds (or, after
    KILL_ARMED_S without one, at once); returns 'message_add' or 'no message add in flight'."""
    struck = threading.Event()
    point = ["no message add in flight"]

    def strike(record: ProxiedRequest) -> None:
        kill_marks.append(record.seq + 1)
        point[0] = record.route
        child.kill()
        struck.set()

    proxy.arm(strike, route="message_add")
    if not struck.wait(KILL_ARMED_S) and proxy.disarm():
        kill_marks.append(len(proxy.records))
        child.kill()
    elif not struck.wait(PROCESS_EXIT_TIMEOUT_S * 2):  # a request took it: its kill is under way
        child.kill()
    return point[0]


def report_of(child: Child, deadline: float, line: str | None = None) -> dict:
    """The last child's outcome line, waiting no longer than the run's bound (plus a margin)."""
    while line is None or not line.startswith("{"):
        line = child.next_line(deadline - time.monotonic() + 60)
        if line is None:
            child.kill()
            return {"moved": {}, "timed_out": True, "worker_metrics": {},
                    "worker_metrics_of": "no child reported"}
        if line == END_OF_OUTPUT:
            raise RuntimeError(f"the last child exited with {child.wait()} without a report: "
                               f"{child.stderr_tail()}")
    child.wait()
    return {**json.loads(line), "worker_metrics_of": "the last child"}


# -- explaining duplicates -------------------------------------------------------------------------

def duplicate_paths(records: list[ProxiedRequest], copies: Counter,
                    kill_marks: list[int]) -> dict[str, int]:
    """For each extra copy on the server: what the proxy saw of that event between the copy before
    it and the resend that made it. A path reads e.g. 'reset_after > check:http_503 > resend': the
    earlier copy's answer was cut by a reset, the reconciliation lookup of its session got a 503 (so
    the worker sent the whole batch again). The first token is the earlier copy's fate: reset_after,
    killed (the worker was killed while the proxy held the answer), answered, or unanswered (the
    client was gone). Then: check:<fate> for a message-list request of the session, send:<fault or
    status> for a send of the event that did not reach the server, kill for a SIGKILL of the
    worker."""
    sends: dict[str, list[ProxiedRequest]] = defaultdict(list)
    checks: dict[str, list[ProxiedRequest]] = defaultdict(list)
    for record in records:
        if record.route == "message_add":
            for event_id in record.event_ids:
                sends[event_id].append(record)
        elif record.route == "message_list" and record.session_id:
            checks[record.session_id].append(record)
    paths: Counter = Counter()
    for event_id, count in copies.items():
        if count < 2:
            continue
        stored = [r for r in sends[event_id] if r.stored]
        for before, resend in itertools.pairwise(stored):
            between = [(r.seq, f"send:{r.fault or r.upstream_error or r.upstream_status}")
                       for r in sends[event_id] if before.seq < r.seq < resend.seq]
            between += [(r.seq, f"check:{r.fault or r.upstream_error or 'answered'}")
                        for r in checks[before.session_id] if before.seq < r.seq < resend.seq]
            between += [(mark - 0.5, "kill") for mark in kill_marks
                        if before.seq < mark <= resend.seq
                        and not (before.killed and mark == before.seq + 1)]
            steps = [token for _, token in sorted(between)]
            if len(steps) > MAX_PATH_TOKENS:
                steps = ["..."] + steps[-MAX_PATH_TOKENS:]
            fate = ("killed" if before.killed
                    else before.fault or ("answered" if before.answered else "unanswered"))
            paths[" > ".join([fate, *steps, "resend"])] += 1
        unseen = count - max(1, len(stored))
        if unseen > 0:
            paths["copies the proxy did not see"] += unseen
    return dict(paths.most_common())


def delivery_counts(queued: list[str], copies: Counter, dead: set[str]) -> dict:
    """delivered: queued ids on the server; duplicates: copies beyond the first; lost: queued ids
    neither on the server nor dead-lettered."""
    wanted = set(queued)
    on_server = {event_id for event_id in copies if event_id in wanted}
    return {"delivered": len(on_server),
            "duplicates": sum(copies[event_id] - 1 for event_id in on_server),
            "lost": len(wanted - on_server - dead),
            "dead_but_on_server": len(dead & on_server),
            "unexpected_on_server": sum(n for event_id, n in copies.items()
                                        if event_id not in wanted)}


# -- the naive loop --------------------------------------------------------------------------------

def naive_loop(proxy_url: str, server_url: str, key: str, workspace: str, events: int,
               bound_s: float) -> dict:
    """One add_messages per event through the proxy, repeated at once on any exception (at most
    NAIVE_TRIES tries), then counted on the server."""
    from honcho.api_types import MessageCreateParams
    from honcho.session import Session

    honcho = client(proxy_url, key, workspace, 10.0)
    session_id, prefix = "naive-0", f"naive_{workspace}_"
    session = Session(session_id, honcho)  # no request: the first add creates workspace and session
    queued = [f"{prefix}{n}" for n in range(events)]
    failures = gave_up = 0
    deadline = time.monotonic() + bound_s
    started = time.perf_counter()
    timed_out = False
    for n, event_id in enumerate(queued):
        if time.monotonic() > deadline:
            timed_out = True
            break
        message = MessageCreateParams(content=f"{n} {TEXT}", peer_id="user",
                                      metadata={"event_id": event_id})
        for _ in range(NAIVE_TRIES):
            try:
                session.add_messages([message])
                break
            except Exception:  # what a naive loop does: try again, whatever it was
                failures += 1
        else:
            gave_up += 1
    drain_s = time.perf_counter() - started
    copies = event_copies_on_server(server_url, key, workspace, [session_id])
    counts = delivery_counts(queued, copies, set())
    return {"events": events, "delivered": counts["delivered"], "duplicates": counts["duplicates"],
            "lost": counts["lost"], "drain_s": round(drain_s, 2), "failed_calls": failures,
            "gave_up": gave_up, "tries_per_event": NAIVE_TRIES, "timed_out": timed_out,
            "workspace": workspace}


# -- same-run baselines ----------------------------------------------------------------------------

def halves(events: int) -> tuple[int, int]:
    """The baseline's events before the measured drain and after it."""
    return events // 2, events - events // 2


def bracketed(key: str, measured_s: float, before_s: float, after_s: float) -> dict:
    """`key` beside its baseline (the halves before and after it, summed) and the difference."""
    return {**beside(key, measured_s, before_s + after_s, digits=2),
            f"{key}_baseline_halves": [round(before_s, 2), round(after_s, 2)]}


def worker_baseline_s(proxy_url: str, key: str, workspace: str, events: int, sessions: int,
                      settings) -> float:
    """Seconds the server takes `events` in batches of the worker's size from as many posters as
    its senders, through a proxy that injects nothing (bench/delivery.py's ceiling)."""
    if events == 0:
        return 0.0
    return ceiling_once(proxy_url, key, workspace, events, sessions, settings, None)["timed"].wall_s


def naive_baseline_s(proxy_url: str, key: str, workspace: str, events: int) -> float:
    """Seconds one SDK add_messages per event takes through a proxy that injects nothing."""
    return events / naive_rate(proxy_url, key, workspace, events) if events else 0.0


# -- the run ---------------------------------------------------------------------------------------

def run(args: argparse.Namespace, server_url: str, key: str, folder: str) -> dict:
    workspace = f"honcho-hub-faults-{uuid.uuid4().hex[:12]}"  # never a user's own workspace
    proxy = FaultProxy(server_url, DEFAULT_MIX, args.seed)
    clean = FaultProxy(server_url, {}, args.seed)  # the baselines' path: the same hop, no faults
    try:
        outbox_path = os.path.join(folder, "outbox.sqlite3")
        settings = worker_settings(outbox_path, proxy.url, workspace, key, None)
        destination = settings.destination()
        queued = queue_events(outbox_path, destination, workspace, f"fe_{workspace}_", args.events,
                              args.sessions)
        base_events = halves(args.events)
        base_before_s = worker_baseline_s(clean.url, key, f"{workspace}-base-a", base_events[0],
                                          args.sessions, settings)
        if args.kill:
            drained = drain_with_kills(folder, outbox_path, proxy.url, workspace, key, args.seed,
                                       args.kill, args.max_drain_s, proxy)
        else:
            drained = drain_in_process(outbox_path, proxy.url, workspace, key, args.seed,
                                       args.max_drain_s)
        base_after_s = worker_baseline_s(clean.url, key, f"{workspace}-base-b", base_events[1],
                                         args.sessions, settings)
        worker_records = list(proxy.records)
        box = Outbox(outbox_path, busy_timeout_s=5.0, max_rows=1_000_000)
        try:
            outbox_counts = box.stats()["counts"]
            letters = box.dead_letters(limit=args.events)
            dead = {letter["id"] for letter in letters}
            dead_codes = dict(Counter(letter["error_code"] for letter in letters))
        finally:
            box.close()
        copies = event_copies_on_server(server_url, key, workspace,
                                        [f"faults-{s}" for s in range(args.sessions)])
        counts = delivery_counts(queued, copies, dead)
        traffic = summarize(worker_records)
        naive = None
        if args.naive_events > 0:
            before = len(proxy.records)
            naive_base = halves(args.naive_events)
            naive_before_s = naive_baseline_s(clean.url, key, f"{workspace}-naive-base-a",
                                              naive_base[0])
            naive = naive_loop(proxy.url, server_url, key, f"{workspace}-naive", args.naive_events,
                               args.max_drain_s)
            naive.update(bracketed("drain_s", naive["drain_s"], naive_before_s,
                                   naive_baseline_s(clean.url, key, f"{workspace}-naive-base-b",
                                                    naive_base[1])))
            naive_traffic = summarize(proxy.records[before:])
            naive["faults_injected"] = naive_traffic["faults_injected"]
            naive["requests"] = naive_traffic["requests"]
    finally:
        proxy.close()
        clean.close()
    result = {
        "bench": "faults", "server": "loopback-fake" if args.url is None else "given-url",
        "events": args.events, "sessions": args.sessions, "seed": args.seed,
        "mix": {**DEFAULT_MIX, "retry_after_s": RETRY_AFTER_S},
        "delivered": counts["delivered"], "duplicates": counts["duplicates"],
        "lost": counts["lost"], "dead_lettered": len(dead), "dead_letter_codes": dead_codes,
        "dead_but_on_server": counts["dead_but_on_server"],
        "unexpected_on_server": counts["unexpected_on_server"],
        "reconcile_failures": sum(traffic["faults_by_route"].get("message_list", {}).values()),
        "faults_injected": traffic["faults_injected"],
        "faults_by_route": traffic["faults_by_route"],
        "requests": traffic["requests"], "requests_by_route": traffic["requests_by_route"],
        "upstream_errors": traffic["upstream_errors"],
        "duplicate_paths": duplicate_paths(worker_records, copies, drained["kill_marks"]),
        **bracketed("drain_s", drained["drain_s"], base_before_s, base_after_s),
        "timed_out": drained["timed_out"],
        "max_drain_s": args.max_drain_s, "outbox_counts": outbox_counts,
        "worker_moved": drained["moved"], "worker_metrics": drained["worker_metrics"],
        "lease_s": drained["lease_s"], "idle_poll_s": IDLE_POLL_S, "kill_trials": args.kill,
        "workspace": workspace,
    }
    if args.kill:
        result.update({k: drained[k] for k in ("kills_done", "kill_delays_s", "kill_points",
                                               "finished_before_last_kill", "worker_metrics_of")})
    result["naive"] = naive if naive is not None else {"events": 0}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url",
                        help="Honcho API URL (default: a loopback fake this script starts)")
    parser.add_argument("--key", default=os.environ.get("HONCHO_API_KEY", ""))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill", type=int, default=0, metavar="K",
                        help="SIGKILL the draining worker K times")
    parser.add_argument("--naive-events", type=int, default=1_000)
    parser.add_argument("--max-drain-s", type=float, default=1_800.0,
                        help="bound of each drain, seconds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.child:
        return child_main(args.child)
    if args.events < 1 or args.sessions < 1 or args.kill < 0 or args.naive_events < 0:
        parser.error("--events and --sessions must be positive, "
                     "--kill and --naive-events not negative")
    load_start = load_avg()
    result = on_server(args.url, args.key, "honcho-hub-faults-",
                       lambda server_url, key, folder: run(args, server_url, key, folder))
    print(json.dumps({**result, "load_avg_start": load_start, "load_avg": load_avg()}),
          flush=True)


if __name__ == "__main__":
    main()
