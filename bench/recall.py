"""Recall benchmark: prints one JSON line.

Against a loopback fake Honcho in its own process: cache-hit latency of a full recall (query
redaction, cache key, render) over 10,000 hits, and of the recall hook as Agent Zero calls it (stub
host: the settings lookup, the thread hop off the event loop) over 2,000; remote calls made by 50
concurrent identical recalls; a cold recall (a new query every time: every call goes to Honcho)
against the bare `Session.context` call with the same arguments, p50 over 500 runs each; and how
long a turn waits, against the recall deadline, when Honcho hangs, when it trickles its answer one
byte a second, and when it takes 2 s to refuse the scoped call and 2 s more for the unscoped one.
The workspace holds the same facts said in several chats (Honcho derives a conclusion again in
each): the pack's tokens without and with its repeats left out (recall/pack.py, without_repeats).

Same-run baselines (issue 27), each timed turn about with ours (bench/baseline.py) and printed as
`<key>_baseline` and `<key>_over_baseline`: for the cache hits, a bare dict lookup keyed by the
query's SHA-256 (a hit's shape without our code); for the hook's hits, the bare hop off the loop
(`asyncio.to_thread` of that lookup, as the hook hops); for the cold recall, the bare
`Session.context` call (`bare_context_p50_us`); for the waits against the deadline (hung, trickle,
refused), a bare `Event.wait` of the deadline just before each (the machine's own lateness in a
deadline wait). `load_avg_start`, `load_avg`: the machine's load at the start and the end.
`--hits`, `--cold-runs`, `--adapter-hits` make a short run.

    python bench/recall.py [--hits 10000] [--cold-runs 500] [--adapter-hits 2000]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

import httpx  # noqa: E402
from baseline import alternated, beside  # noqa: E402
from delivery import start_loopback, stop_loopback  # noqa: E402
from idle import wait_idle  # noqa: E402
from load import load_avg  # noqa: E402

from honcho_hub.recall.pack import (  # noqa: E402
    ContextData,
    build_pack,
    estimate_tokens,
    render_block,
)
from honcho_hub.recall.recaller import Recaller  # noqa: E402
from honcho_hub.settings.config import build_settings  # noqa: E402

KEY = "bench-key"
with open(os.path.join(ROOT, "prompts", "honcho.recall_block.md"), encoding="utf-8") as _template:
    TEMPLATE = _template.read()
QUERY = "Which tea did I say I like, and where should I buy it in Lisbon?"
SAID_IN_CHATS = ("user said: Hi, I'm Ada, I live in Lisbon.", "user prefers green tea",
                 "user buys tea from small shops")
# As Honcho writes a representation: each fact once per chat it was said in (six chats), with
# that chat's time.
REPRESENTATION = "## Explicit Observations\n\n" + "".join(
    f"[2026-01-0{chat} 10:0{n}:00] {fact}\n" for chat in range(1, 7)
    for n, fact in enumerate(SAID_IN_CHATS))
CARD = ["Name: Ada", "Lives in Lisbon", "user prefers green tea"]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def waited(call) -> tuple:
    start = time.perf_counter()
    result = call()
    return result, (time.perf_counter() - start) * 1000


def bare_wait_ms(deadline_s: float) -> float:
    """A bare wait of `deadline_s` (nothing sets the event): how late the machine ends one."""
    return waited(lambda: threading.Event().wait(deadline_s))[1]


def bare_lookup(cache: dict[str, str], query: str) -> str | None:
    """A cache hit's shape without our code: the query hashed, a dict looked up."""
    return cache.get(hashlib.sha256(query.encode()).hexdigest())


def trickled(settings) -> tuple[str, float, float]:
    """A server that answers every request one byte a second (httpx's read timeout never fires)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = b'{"id": "w"}' + b" " * 40
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for byte in body:
                if stop.wait(1.0):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()

        do_POST = do_GET

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trickle_settings = build_settings({"api_url": f"http://127.0.0.1:{server.server_address[1]}",
                                       "workspace_id": "recall-bench", "recall_timeout_s": 2.5},
                                      {"HONCHO_API_KEY": KEY}, {})
    recaller = Recaller()
    try:
        baseline_ms = bare_wait_ms(trickle_settings.recall_timeout_s)
        result, wait_ms = waited(
            lambda: recaller.recall(trickle_settings, "chat-trickle", QUERY, TEMPLATE))
    finally:
        stop.set()
        recaller.close()
        server.shutdown()
        server.server_close()
    return result.source, wait_ms, baseline_ms


def refused_then_slow(url: str) -> tuple[str, float, float]:
    """A server 2 s away that refuses the scoped call (403), so recall retries unscoped: 2 s
    more."""
    from fault_proxy import start_delaying

    httpx.post(url + "/_fake/scoped_context_status", json={"status": 403}, timeout=30)
    proxy, proxy_url = start_delaying(url, 2.0)
    slow = build_settings({"api_url": proxy_url, "workspace_id": "recall-bench",
                           "recall_timeout_s": 2.5},
                          {"HONCHO_API_KEY": KEY}, {})
    recaller = Recaller()
    try:
        # its client exists and knows the workspace
        recaller.recall(slow, "chat-first", QUERY, TEMPLATE)
        wait_idle(30, recaller)
        baseline_ms = bare_wait_ms(slow.recall_timeout_s)
        result, wait_ms = waited(
            lambda: recaller.recall(slow, "chat-scoped", QUERY, TEMPLATE, "a0-bench"))
    finally:
        recaller.close()
        stop_loopback(proxy, 30)
        httpx.post(url + "/_fake/scoped_context_status", json={"status": None}, timeout=30)
    return result.source, wait_ms, baseline_ms


def adapter_path(url: str, runs: int) -> tuple[list[float], list[float]]:
    """The recall hook as Agent Zero runs it, hits only: cached settings, the hop off the loop,
    the cache; beside the bare hop off the loop to a bare lookup, turn about."""
    import asyncio
    import importlib
    import types

    from hub_testkit import StubAgent, stub_agent_zero

    with stub_agent_zero() as host:
        host.config.update(api_url=url, mcp_url=url, workspace_id="recall-bench")
        host.secrets = {"HONCHO_API_KEY": KEY}
        bridge = importlib.import_module("usr.plugins.honcho.extensions.honcho_bridge.recall")
        agent = StubAgent(0)

        def loop_data():
            return types.SimpleNamespace(
                iteration=0, extras_persistent={}, user_message=types.SimpleNamespace(
                    content={"user_message": QUERY, "system_message": [], "attachments": []}))

        cache = {hashlib.sha256(QUERY.encode()).hexdigest(): "block"}

        async def run() -> tuple[list[float], list[float]]:
            await bridge.inject_recall(agent, loop_data())  # the miss that fills the cache
            timings: dict[bool, list[float]] = {True: [], False: []}
            for n in range(runs):  # turn about, in mirrored order (bench/baseline.py's way)
                for ours in ((True, False) if n % 2 == 0 else (False, True)):
                    start = time.perf_counter_ns()
                    if ours:
                        await bridge.inject_recall(agent, loop_data())
                    else:
                        await asyncio.to_thread(bare_lookup, cache, QUERY)
                    timings[ours].append((time.perf_counter_ns() - start) / 1000)
            return timings[True], timings[False]
        return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hits", type=int, default=10_000)
    parser.add_argument("--cold-runs", type=int, default=500)
    parser.add_argument("--adapter-hits", type=int, default=2_000)
    args = parser.parse_args()
    load_start = load_avg()
    server, url = start_loopback(KEY)
    control = lambda path, body: httpx.post(url + path, json=body, timeout=30).json()  # noqa: E731
    try:
        control("/_fake/remember", {
            "observer": "agent-zero", "target": "user",
            "representation": REPRESENTATION, "card": CARD})
        settings = build_settings({"api_url": url, "workspace_id": "recall-bench",
                                   "recall_timeout_s": 2.5},
                                  {"HONCHO_API_KEY": KEY}, {})
        warm = Recaller()
        packed = warm.recall(settings, "chat-bench", QUERY, TEMPLATE)
        # the pack the same data made before repeats were left out
        undeduped = build_pack(ContextData(representation=REPRESENTATION, card=CARD),
                               settings.max_context_tokens, settings.recall_include_messages,
                               settings.user_peer_id)
        cache = {hashlib.sha256(QUERY.encode()).hexdigest(): packed.block}
        hits, bare_hits = alternated(lambda: warm.recall(settings, "chat-bench", QUERY, TEMPLATE),
                                     lambda: bare_lookup(cache, QUERY), args.hits)
        before = sum(1 for _, p in control("/_fake/requests", None)
                     if "/sessions/" in p and p.endswith("/context"))
        crowd, barrier = Recaller(), threading.Barrier(50)

        def one() -> None:
            barrier.wait()
            crowd.recall(settings, "chat-crowd", QUERY, TEMPLATE)
        threads = [threading.Thread(target=one) for _ in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        single_flight = sum(1 for _, p in control("/_fake/requests", None)
                            if "/sessions/" in p and p.endswith("/context")) - before

        cold_settings = settings
        cold_recaller = Recaller()
        from honcho import Honcho
        from honcho.session import Session
        bare_client = Honcho(base_url=url, api_key=KEY, workspace_id="recall-bench",
                             max_retries=0, timeout=10)
        session = Session("chat-bench", bare_client)
        fresh = itertools.count()
        # turn about, so drift of the machine or server affects both alike
        cold, bare = alternated(
            # a new message each time: not in the cache
            lambda: cold_recaller.recall(cold_settings, "chat-bench",
                                         f"{QUERY} ({next(fresh)})", TEMPLATE),
            lambda: session.context(
                summary=True, tokens=500, peer_target="user", search_query=QUERY,
                peer_perspective="agent-zero", search_top_k=8, max_conclusions=20,
                limit_to_session=False), args.cold_runs)

        for recaller in (warm, crowd, cold_recaller):
            recaller.close()
        adapter_hits, bare_hops = adapter_path(url, args.adapter_hits)
        trickle_source, trickle_wait_ms, trickle_baseline_ms = trickled(settings)
        refused_source, refused_wait_ms, refused_baseline_ms = refused_then_slow(url)
        hung = Recaller()  # last: the fake stays hung from here on
        # its client exists, as in a running Agent Zero
        hung.recall(settings, "chat-warm", QUERY, TEMPLATE)
        control("/_fake/fail", {"match": "/context$", "kind": "timeout", "times": 100})
        hung_baseline_ms = bare_wait_ms(settings.recall_timeout_s)
        result, hung_wait_ms = waited(lambda: hung.recall(settings, "chat-hung", QUERY, TEMPLATE))
        hung.close()
    finally:
        stop_loopback(server, 60)
    print(json.dumps({
        "bench": "recall", "hits": len(hits),
        **beside("hit_p50_us", percentile(hits, .5), percentile(bare_hits, .5)),
        **beside("hit_p99_us", percentile(hits, .99), percentile(bare_hits, .99)),
        "single_flight_callers": 50,
        "single_flight_remote_calls": single_flight, "cold_runs": len(cold),
        **beside("cold_recall_p50_us", percentile(cold, .5), percentile(bare, .5)),
        "bare_context_p50_us": round(percentile(bare, .5), 1),
        "cold_overhead_ratio": round(percentile(cold, .5) / percentile(bare, .5), 3),
        "recall_deadline_ms": settings.recall_timeout_s * 1000,
        **beside("hung_wait_ms", hung_wait_ms, hung_baseline_ms),
        "hung_wait_over_deadline_ms": round(hung_wait_ms - settings.recall_timeout_s * 1000, 1),
        "hung_result": result.source,
        **beside("trickle_wait_ms", trickle_wait_ms, trickle_baseline_ms),
        "trickle_result": trickle_source,
        **beside("refused_scope_then_slow_wait_ms", refused_wait_ms, refused_baseline_ms),
        "refused_scope_result": refused_source,
        "adapter_hits": len(adapter_hits),
        **beside("adapter_hit_p50_us", percentile(adapter_hits, .5), percentile(bare_hops, .5)),
        **beside("adapter_hit_p99_us", percentile(adapter_hits, .99), percentile(bare_hops, .99)),
        "pack_tokens_before_dedup": estimate_tokens(render_block(undeduped, TEMPLATE)),
        "pack_tokens_after_dedup": estimate_tokens(packed.block),
        "pack_source": packed.source,
        "load_avg_start": load_start, "load_avg": load_avg(),
    }))


if __name__ == "__main__":
    main()
