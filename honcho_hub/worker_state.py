"""Process-local delivery state: circuits per destination and the worker's metrics, for status."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field


@dataclass
class Circuit:
    """Open while the destination is unreachable, refuses our key, or the SDK is missing."""

    kind: str | None = None  # unreachable, auth, sdk_missing; None when closed
    code: str | None = None
    open_until: float = 0.0
    failures: int = 0  # consecutive openings, for the backoff

    def is_open(self, now: float) -> bool:
        return self.kind is not None and now < self.open_until

    def probing(self, now: float) -> bool:
        """Open but due: the next step sends one batch to find out whether it can close."""
        return self.kind is not None and now >= self.open_until


@dataclass
class Metrics:
    sent: int = 0
    reconciled: int = 0
    reconcile_failures: int = 0  # lookups of which events Honcho holds that failed (nothing was sent)
    failed: int = 0
    dead: int = 0
    requests: int = 0
    last_success_at: float | None = None
    last_latency_s: float | None = None
    last_error_code: str | None = None
    last_error_at: float | None = None


@dataclass
class WorkerState:
    """Shared between the coordinator (writes) and status readers; guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    circuits: dict[str, Circuit] = field(default_factory=dict)
    metrics: Metrics = field(default_factory=Metrics)
    state: str = "stopped"  # running, idle, paused, circuit_open, stopped

    def circuit(self, destination: str) -> Circuit:
        with self.lock:
            return self.circuits.setdefault(destination, Circuit())

    def reset_auth_circuits(self) -> int:
        """Close auth circuits so the next step probes at once (after the key was fixed)."""
        with self.lock:
            opened = [c for c in self.circuits.values() if c.kind == "auth"]
            for c in opened:
                c.open_until = 0.0
            return len(opened)

    def snapshot(self) -> dict:
        """A copy for status: no content, no key, no path."""
        with self.lock:
            return {"state": self.state, "metrics": asdict(self.metrics),
                    "circuits": {d: asdict(c) for d, c in self.circuits.items() if c.kind is not None}}
