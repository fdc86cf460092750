"""Retry decisions: a pure function of (error, attempts, now, policy, random source); nothing
sleeps. 429 waits for Retry-After, 5xx backs off with full jitter and burns attempts, an unreachable
destination or a refused key opens a circuit, a permanent rejection dead-letters. The whole table,
with the lookup's own rules: docs/architecture.md ("Delivery").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import tenacity

from ..backoff import wait_s
from ..errors import (
    AuthError,
    HonchoRequestError,
    PermanentError,
    SdkMissingError,
    TransientError,
    UnreachableError,
)
from ..settings.config import Settings

RECONCILE_LIMIT = 3
UNRECONCILABLE = "unreconcilable"
FORBIDDEN = "auth_403"  # gateway.translate's code for a 403: the key is known, but may not do this


class Action(str, Enum):
    RETRY = "retry"
    DEAD = "dead"
    CIRCUIT = "circuit"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    base_s: float = 2.0
    max_s: float = 600.0
    retry_after_cap_s: float = 3600.0
    circuit_base_s: float = 5.0
    circuit_max_s: float = 300.0
    auth_probe_interval_s: float = 60.0

    @classmethod
    def from_settings(cls, s: Settings) -> RetryPolicy:
        """The delivery settings as a policy value."""
        return cls(s.max_attempts, s.retry_base_s, s.retry_max_s, s.retry_after_cap_s,
                   s.circuit_base_s, s.circuit_max_s, s.auth_probe_interval_s)


@dataclass(frozen=True)
class Decision:
    action: Action
    code: str
    next_attempt_at: float
    burn_attempt: bool = False
    circuit: str | None = None  # "unreachable", "auth" or "sdk_missing" when action is CIRCUIT
    # A permanent refusal of the lookup, counted toward RECONCILE_LIMIT.
    reconcile_failed: bool = False


def backoff_ceiling_s(attempt_number: int, base_s: float, max_s: float) -> float:
    """tenacity's exponential wait: base · 2^(n-1), capped at max_s."""
    return wait_s(tenacity.wait_exponential(multiplier=base_s, max=max_s), attempt_number)


def decide(error: HonchoRequestError, attempts: int, now: float, policy: RetryPolicy,
           rng: random.Random, circuit_failures: int = 0, *,
           reconcile_failures: int | None = None) -> Decision:
    """What to do with events whose send failed with `error` after `attempts` earlier counted
    attempts.

    `reconcile_failures` is given when `error` came from the lookup of which events Honcho holds
    (the events were not sent): how many permanent refusals of that lookup came before this one.
    `circuit_failures` counts the destination's circuit openings since its last success: above 0,
    the circuit is open."""
    if reconcile_failures is not None and _lookup_refused(error):
        if circuit_failures:
            # The destination's circuit is open: its adds are refused too (or it did not answer), so
            # this refusal says nothing about the lookup. Nothing is counted and the events wait a
            # probe interval, so the circuit, left as it is, probes next with another chat's batch
            # (else a key that may add but not list would keep it open by probing with this lookup
            # every time).
            return Decision(Action.RETRY, error.code, now + policy.auth_probe_interval_s)
        if reconcile_failures + 1 >= RECONCILE_LIMIT:
            return Decision(Action.DEAD, UNRECONCILABLE, now)
        wait = rng.uniform(
            0, backoff_ceiling_s(reconcile_failures + 1, policy.base_s, policy.max_s))
        return Decision(Action.RETRY, error.code, now + wait, reconcile_failed=True)
    if isinstance(error, PermanentError):
        return Decision(Action.DEAD, error.code, now)
    if isinstance(error, AuthError):
        return Decision(Action.CIRCUIT, error.code, now + policy.auth_probe_interval_s,
                        circuit="auth")
    if isinstance(error, SdkMissingError):
        return Decision(Action.CIRCUIT, error.code, now + policy.auth_probe_interval_s,
                        circuit="sdk_missing")
    if isinstance(error, UnreachableError):
        ceiling = backoff_ceiling_s(circuit_failures + 1, policy.circuit_base_s,
                                    policy.circuit_max_s)
        # Equal jitter: never retry at once, never all processes at the same instant.
        wait = ceiling / 2 + rng.uniform(0, ceiling / 2)
        return Decision(Action.CIRCUIT, error.code, now + wait, circuit="unreachable")
    if isinstance(error, TransientError) and error.code == "http_429":
        wait = error.retry_after if error.retry_after is not None else policy.base_s
        return Decision(Action.RETRY, error.code,
                        now + min(max(0.0, wait), policy.retry_after_cap_s))
    if attempts + 1 >= policy.max_attempts:
        return Decision(Action.DEAD, error.code, now, burn_attempt=True)
    # Full jitter.
    wait = rng.uniform(0, backoff_ceiling_s(attempts + 1, policy.base_s, policy.max_s))
    return Decision(Action.RETRY, error.code, now + wait, burn_attempt=True)


def _lookup_refused(error: HonchoRequestError) -> bool:
    """Whether the server refused the lookup for good: rejected as asked (no metadata filters:
    400/422) or forbidden to this key (403: it may add messages but not list them). A 401 is not:
    the key is wrong."""
    return (isinstance(error, PermanentError)
            or (isinstance(error, AuthError) and error.code == FORBIDDEN))
