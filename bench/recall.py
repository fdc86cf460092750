"""Recall benchmark: prints one JSON line.

Against a loopback fake Honcho in its own process: cache-hit latency of a full recall (query
redaction, cache key, render) over 10,000 hits; remote calls made by 50 concurrent identical recalls;
a cold recall (cache TTL 0: every call goes to Honcho) against the bare `Session.context` call with
the same arguments, p50 over 500 runs each; and how long a turn waits when Honcho hangs, over the
recall deadline.

    python bench/recall.py
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

import httpx  # noqa: E402

from delivery import start_loopback, stop_loopback  # noqa: E402
from honcho_hub.config import build_settings  # noqa: E402
from honcho_hub.recall import Recaller  # noqa: E402

KEY = "bench-key"
TEMPLATE = open(os.path.join(ROOT, "prompts", "honcho.recall_block.md"), encoding="utf-8").read()
QUERY = "Which tea did I say I like, and where should I buy it in Lisbon?"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(call, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def main() -> None:
    server, url = start_loopback(KEY)
    control = lambda path, body: httpx.post(url + path, json=body, timeout=30).json()  # noqa: E731
    try:
        control("/_fake/remember", {"observer": "agent-zero", "target": "user",
                                    "representation": "The user prefers green tea from small shops.\n" * 5,
                                    "card": ["Name: Ada", "Lives in Lisbon"]})
        settings = build_settings({"api_url": url, "workspace_id": "recall-bench", "recall_timeout_s": 2.5},
                                  {"HONCHO_API_KEY": KEY}, {})
        warm = Recaller()
        warm.recall(settings, "chat-bench", QUERY, TEMPLATE)
        hits = timed(lambda: warm.recall(settings, "chat-bench", QUERY, TEMPLATE), 10_000)
        before = sum(1 for _, p in control("/_fake/requests", None) if p.endswith("/context"))
        crowd, barrier = Recaller(), threading.Barrier(50)

        def one() -> None:
            barrier.wait()
            crowd.recall(settings, "chat-crowd", QUERY, TEMPLATE)
        threads = [threading.Thread(target=one) for _ in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        single_flight = sum(1 for _, p in control("/_fake/requests", None) if p.endswith("/context")) - before

        cold_settings = build_settings({"api_url": url, "workspace_id": "recall-bench", "cache_ttl_s": 0},
                                       {"HONCHO_API_KEY": KEY}, {})
        cold_recaller = Recaller()
        from honcho import Honcho
        from honcho.session import Session
        bare_client = Honcho(base_url=url, api_key=KEY, workspace_id="recall-bench", max_retries=0, timeout=10)
        session = Session("chat-bench", bare_client)
        cold, bare = [], []
        for _ in range(500):  # interleaved, so drift of the machine or server affects both alike
            cold += timed(lambda: cold_recaller.recall(cold_settings, "chat-bench", QUERY, TEMPLATE), 1)
            bare += timed(lambda: session.context(summary=True, tokens=500, peer_target="user", search_query=QUERY,
                                                  peer_perspective="agent-zero", search_top_k=8, max_conclusions=20,
                                                  limit_to_session=False), 1)

        hung = Recaller()
        hung.recall(settings, "chat-warm", QUERY, TEMPLATE)  # its client exists, as in a running Agent Zero
        control("/_fake/fail", {"match": "/context$", "kind": "timeout", "times": 100})
        start = time.perf_counter()
        result = hung.recall(settings, "chat-hung", QUERY, TEMPLATE)
        hung_wait_ms = (time.perf_counter() - start) * 1000
        for recaller in (warm, crowd, cold_recaller, hung):
            recaller.close()
    finally:
        stop_loopback(server, 60)
    print(json.dumps({
        "bench": "recall", "hits": len(hits), "hit_p50_us": round(percentile(hits, .5), 1),
        "hit_p99_us": round(percentile(hits, .99), 1), "single_flight_callers": 50,
        "single_flight_remote_calls": single_flight, "cold_runs": len(cold),
        "cold_recall_p50_us": round(percentile(cold, .5), 1), "bare_context_p50_us": round(percentile(bare, .5), 1),
        "cold_overhead_ratio": round(percentile(cold, .5) / percentile(bare, .5), 3),
        "recall_deadline_ms": settings.recall_timeout_s * 1000, "hung_wait_ms": round(hung_wait_ms, 1),
        "hung_wait_over_deadline_ms": round(hung_wait_ms - settings.recall_timeout_s * 1000, 1),
        "hung_result": result.source,
    }))


if __name__ == "__main__":
    main()
