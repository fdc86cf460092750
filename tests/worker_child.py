"""Child processes for multi-process delivery tests: a real DeliveryWorker against a loopback fake.

    python tests/worker_child.py drain   <outbox> <api_url> <timeout_s>   -> prints what moved (JSON)
    python tests/worker_child.py hang    <outbox> <api_url>               -> sends and hangs until killed
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from honcho_hub.config import build_settings  # noqa: E402
from honcho_hub.worker import DeliveryWorker  # noqa: E402

KEY = "loopback-test-key"


def main() -> None:
    mode, outbox, api_url = sys.argv[1:4]
    settings = build_settings({"outbox_path": outbox, "api_url": api_url, "sdk_timeout_s": 120, "batch_size": 10},
                              {"HONCHO_API_KEY": KEY}, {})
    worker = DeliveryWorker(lambda: settings)
    if mode == "drain":
        moved = worker.drain(float(sys.argv[4]))
        print(json.dumps(moved), flush=True)
    else:
        worker.step()  # blocks in the stalled request while holding its lease, until SIGKILL
    worker.stop(5)


if __name__ == "__main__":
    main()
