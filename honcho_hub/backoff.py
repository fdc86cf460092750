"""How long to wait before trying again: tenacity's wait strategies, the one way in this package.

`tenacity.Retrying` sleeps by a strategy; code that schedules its next try instead (a retry time
persisted with an event, the capture writer's timer) reads such a strategy with `wait_s`.
"""

from __future__ import annotations

import tenacity

_UNUSED_RETRYING = tenacity.Retrying()


def wait_s(strategy: tenacity.wait.wait_base, attempt_number: int) -> float:
    """Seconds `strategy` waits after try number `attempt_number` (the first is 1), as tenacity
    reads it."""
    # The strategies used here read only the attempt number: the call state's retrying object is a
    # placeholder that never runs.
    state = tenacity.RetryCallState(_UNUSED_RETRYING, None, (), {})
    state.attempt_number = max(1, attempt_number)
    return float(strategy(state))
