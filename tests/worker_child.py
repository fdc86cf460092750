"""Child processes for multi-process delivery tests: a real DeliveryWorker against a loopback fake.

    python tests/worker_child.py drain <outbox> <api_url> <timeout_s>
        -> prints what moved (JSON)
    python tests/worker_child.py hang <outbox> <api_url>
        -> sends and hangs until killed
    python tests/worker_child.py exit <outbox> <api_url>
        -> a step begins as the process exits; prints whether it stopped
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from honcho_hub.delivery.worker import DeliveryWorker  # noqa: E402
from honcho_hub.settings.config import build_settings  # noqa: E402

KEY = "loopback-test-key"


def main() -> None:
    mode, outbox, api_url = sys.argv[1:4]
    settings = build_settings({"outbox_path": outbox, "api_url": api_url, "sdk_timeout_s": 40,
                               "batch_size": 10},
                              {"HONCHO_API_KEY": KEY}, {})
    if mode == "exit":
        return step_while_exiting(settings)
    worker = DeliveryWorker(lambda: settings)
    if mode == "drain":
        moved = worker.drain(float(sys.argv[4]))
        print(json.dumps(moved), flush=True)
    else:
        worker.step()  # blocks in the stalled request while holding its lease, until SIGKILL
    worker.stop(5)


def step_while_exiting(settings) -> None:
    """The worker's first step waits until the interpreter is exiting (atexit handlers run after the
    standard library refused new thread-pool work), as a worker's timer firing during shutdown
    would."""
    exiting = threading.Event()
    worker = DeliveryWorker(lambda: exiting.wait() and settings)
    worker.start()

    def at_exit() -> None:
        exiting.set()
        worker.join(10)
        print(json.dumps({"stopped": not worker.is_alive()}), flush=True)

    atexit.register(at_exit)


if __name__ == "__main__":
    main()
