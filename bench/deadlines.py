"""Deadline benchmark: prints one JSON line.

Every call a person or the agent waits on, against a loopback fake Honcho that trickles each
answer's body a byte every TRICKLE_S (its head at once: httpx's read timeout never fires), run as
Agent Zero runs it (stub host: the bridge, the Hub, the real SDK): the memory tool's status, search
and ask; the sidebar's full status, card and Test API + MCP; the memory inspector's view. Per path:
its deadline, the measured wait and the answer's code. Then `threads_left`: the threads started
meanwhile still alive once the server stopped and the Hub was shut down (its idle pools end): none
may go on reading. The deadlines follow SETTINGS.

    python bench/deadlines.py
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")]

from fake_honcho import FakeHoncho  # noqa: E402
from hub_testkit import StubAgent, StubContext, stub_agent_zero  # noqa: E402
from load import load_avg  # noqa: E402
from loopback import serve  # noqa: E402

KEY = "bench-deadline-key"
TRICKLE_S = 0.25
SETTINGS = {"sdk_timeout_s": 2.0, "check_timeout_s": 2.0, "ask_timeout_s": 5.0}
OPERATION_S = 2 * SETTINGS["sdk_timeout_s"]  # a tool verb, the card, an inspector action
CHAT = "BenchDl1"


def waited(call) -> tuple[object, float]:
    start = time.perf_counter()
    result = call()
    return result, round((time.perf_counter() - start) * 1000, 1)


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
        for name, (deadline_s, call) in paths(bridge_tool, operations).items():
            answer, wait_ms = waited(call)
            figures[name] = {"deadline_s": deadline_s, "wait_ms": wait_ms, "answer": answer}
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
