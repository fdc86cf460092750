"""Deadline benchmark: prints one JSON line.

Every call a person or the agent waits on, against a loopback fake Honcho that trickles each
answer's body a byte every TRICKLE_S (its head at once: httpx's read timeout never fires), run as
Agent Zero runs it (stub host: the bridge, the Hub, the real SDK): the memory tool's status, search
and ask; the sidebar's full status, card and Test API + MCP; the memory inspector's view. Per path:
its deadline, the measured wait and the answer's code. Then `threads_left`: the threads started
meanwhile still alive once the server stopped and the Hub was shut down (its idle pools end): none
may go on reading. The deadlines follow SETTINGS.

Same-run baseline (issue 27): beside each path, in turn (the path first, then the baseline, the
next path the other way round), a bare HTTP request over a plain socket to the same trickling server
(the card, a long answer), read until the path's deadline and then abandoned: how late this machine
ends a deadline-bounded read of a trickling answer. Per path, beside its `wait_ms`:
`wait_ms_baseline`, `wait_ms_over_baseline` (ours over the machine's), `over_deadline_ms` and
`over_deadline_ms_baseline` (each past the deadline); `baseline_ended_early` if the bare read's
answer ended before the deadline (then it is no baseline). `load_avg_start`, `load_avg`: the
machine's load at the start and the end.

    python bench/deadlines.py
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from baseline import beside  # noqa: E402
from fake_honcho import FakeHoncho  # noqa: E402
from hub_testkit import StubAgent, StubContext, stub_agent_zero  # noqa: E402
from load import load_avg  # noqa: E402
from loopback import serve  # noqa: E402

KEY = "bench-deadline-key"
TRICKLE_S = 0.25
SETTINGS = {"sdk_timeout_s": 2.0, "check_timeout_s": 2.0, "ask_timeout_s": 5.0}
OPERATION_S = 2 * SETTINGS["sdk_timeout_s"]  # a tool verb, the card, an inspector action
CHAT = "BenchDl1"
# The bare read's request: the agent's card of the user (remembered below), a long answer.
CARD_PATH = "/v3/workspaces/agent-zero/peers/agent-zero/card?target=user"


def waited(call) -> tuple[object, float]:
    start = time.perf_counter()
    result = call()
    return result, (time.perf_counter() - start) * 1000


def bare_request(host: str) -> bytes:
    """The bare read's HTTP request, as a client with the key sends it."""
    return (f"GET {CARD_PATH} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
            "Connection: close\r\n\r\n").encode()


def bare_read(host: str, port: int, deadline_s: float) -> tuple[float, bool]:
    """A bare request over a socket, read until the answer ends or `deadline_s` passes, then
    abandoned: (milliseconds it took, whether the answer ended first)."""
    started = time.perf_counter()
    end = started + deadline_s
    ended = False
    with socket.create_connection((host, port), timeout=deadline_s) as sock:
        sock.sendall(bare_request(f"{host}:{port}"))
        while (left := end - time.perf_counter()) > 0:
            sock.settimeout(left)
            try:
                if not sock.recv(4096):
                    ended = True
                    break
            except TimeoutError:
                break
    return (time.perf_counter() - started) * 1000, ended


def path_figures(deadline_s: float, wait_ms: float, answer: object,
                 baseline_ms: float) -> dict[str, object]:
    """One path's figures: its wait beside the bare read's, and each past the deadline."""
    deadline_ms = deadline_s * 1000
    return {"deadline_s": deadline_s, **beside("wait_ms", wait_ms, baseline_ms),
            "answer": answer, "over_deadline_ms": round(wait_ms - deadline_ms, 1),
            "over_deadline_ms_baseline": round(baseline_ms - deadline_ms, 1)}


def remembered(fake: FakeHoncho) -> None:
    """Enough for every answer to trickle for longer than any deadline."""
    fake.cards[("agent-zero", "user")] = ["ATTRIBUTE: keeps two sailing boats at the marina"] * 4
    fake.dialectic_answer = "The user keeps two sailing boats at the marina in Lisbon. " * 3
    for i in range(5):
        fake.conclusions[f"c{i}"] = {
            "id": f"c{i}", "content": f"The user sails boat {i} on weekends",
            "observer_id": "agent-zero", "observed_id": "user", "session_id": None,
            "created_at": "2026-01-01T00:00:00Z", "workspace_id": "agent-zero"}


def paths(bridge_tool, operations) -> dict[str, tuple[float, object]]:
    """Each path: (its deadline in seconds, a call returning the answer's code)."""
    agent = StubAgent(0, StubContext(id=CHAT))

    def tool(action: str, **args) -> str:
        text = asyncio.run(bridge_tool.run_tool(agent, {"action": action, **args}))
        return "timed_out" if "timed out" in text or "timed_out" in text else "answered"

    def full_status() -> str:
        status = operations.status_document({"context": CHAT})["status"]
        return "timed_out" if status["identity"]["observation"]["server"] == {} else "answered"

    def card() -> str:
        return operations.card_document({}).get("error") or "answered"

    def inspector() -> str:
        view = operations.inspector_document({"action": "view"})
        return view["card"].get("error") or "answered"

    def check() -> str:
        result = operations.run_operation({"action": "check"})["result"]
        return result["api"]["error"] or "answered"

    return {"tool_status": (SETTINGS["check_timeout_s"], lambda: tool("status")),
            "tool_search": (OPERATION_S, lambda: tool("search", query="boats")),
            "tool_ask": (SETTINGS["ask_timeout_s"],
                         lambda: tool("ask", query="What does the user keep?")),
            "sidebar_full_status": (SETTINGS["check_timeout_s"], full_status),
            "card": (OPERATION_S, card),
            "inspector_view": (OPERATION_S, inspector),
            "check_api_mcp": (2 * SETTINGS["check_timeout_s"], check)}


def main() -> None:
    load_start = load_avg()
    fake = FakeHoncho(api_key=KEY)
    remembered(fake)
    server = serve(fake, trickle_s=TRICKLE_S)
    figures: dict[str, object] = {"bench": "deadlines", "trickle_s_per_byte": TRICKLE_S, **SETTINGS}
    with stub_agent_zero() as host:
        host.config.update(api_url=server.url, mcp_url=server.url, **SETTINGS)
        host.secrets = {"HONCHO_API_KEY": KEY}
        bridge_tool = importlib.import_module("usr.plugins.honcho.extensions.honcho_bridge.tool")
        operations = importlib.import_module(
            "usr.plugins.honcho.extensions.honcho_bridge.operations")
        # the Hub and its parts exist, as in a running Agent Zero
        operations.status_document({"light": True})
        baseline = set(threading.enumerate())
        host, port = server.url.split("//", 1)[1].rsplit(":", 1)
        for n, (name, (deadline_s, call)) in enumerate(paths(bridge_tool, operations).items()):
            if n % 2:
                baseline_ms, ended = bare_read(host, int(port), deadline_s)
            answer, wait_ms = waited(call)
            if not n % 2:
                baseline_ms, ended = bare_read(host, int(port), deadline_s)
            figures[name] = path_figures(deadline_s, wait_ms, answer, baseline_ms)
            if ended:
                figures[name]["baseline_ended_early"] = True
        server.close()
        # idle pool threads end
        importlib.import_module("usr.plugins.honcho.honcho_hub.hub").shutdown()
        left = [t for t in threading.enumerate() if t not in baseline]
        for thread in left:
            thread.join(5)
        figures["threads_left"] = sorted(t.name for t in left if t.is_alive())
    figures.update(load_avg_start=load_start, load_avg=load_avg())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
