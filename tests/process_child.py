"""A delivery worker in a process of its own, stepped by its parent: for tests of what the processes
that drain one outbox share through it.

    python tests/process_child.py <outbox> <api_url> <api_key>

Imports the SDK, prints {"pid": ..., "owner": ...}, then answers each JSON line read from stdin with
one JSON line:

    {"step": NOW}    one step with both of the worker's clocks at NOW -> the step's report and the
                     circuit this process holds for its destination (null when closed)
    {"stop": true}   a clean stop -> {"stopped": ...}; the process then exits

The parent moves the clocks, so no test waits for time to pass; it may kill the process at any
point.
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# imported before the hello: processes started together import it side by side
import honcho  # noqa: E402,F401

from honcho_hub.delivery.worker import DeliveryWorker  # noqa: E402
from honcho_hub.settings.config import build_settings  # noqa: E402


class Clock:
    """The worker's wall and monotonic clock: the time of the command being run."""

    now = 0.0

    def __call__(self) -> float:
        return self.now


def main() -> None:
    outbox, api_url, key = sys.argv[1:4]
    # A request may be held by the test's server while the parent steps another process: a long SDK
    # timeout.
    settings = build_settings({"outbox_path": outbox, "api_url": api_url, "sdk_timeout_s": 30,
                               "batch_size": 10},
                              {"HONCHO_API_KEY": key}, {})
    clock = Clock()
    worker = DeliveryWorker(lambda: settings, clock=clock, monotonic=clock, rng=random.Random(11))
    print(json.dumps({"pid": os.getpid(), "owner": worker.owner}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "stop" in command:
            print(json.dumps({"stopped": worker.stop(10)}), flush=True)
            return
        clock.now = float(command["step"])
        report = worker.step()
        circuit = worker.state.snapshot()["circuits"].get(settings.destination())
        print(json.dumps({"leased": report.leased, "delivered": report.delivered,
                          "retried": report.retried, "state": report.state, "circuit": circuit}),
              flush=True)


if __name__ == "__main__":
    main()
