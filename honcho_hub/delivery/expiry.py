"""The expiry sweep: the delivery worker deletes conclusions whose lifetime ended (storage/expiries)
every `expiry_sweep_s`. A sweep claims at most SWEEP_LIMIT due rows for this process, deletes them
one by one within SWEEP_BUDGET_S, and settles them: a conclusion Honcho no longer holds counts as
deleted; a failed delete waits a growing time; an outage ends the sweep (docs/reference.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import tenacity

from ..backoff import wait_s
from ..errors import HonchoRequestError, PermanentError
from ..gateway import deadline, queries
from ..gateway.gateway import HonchoGateway
from ..settings.config import Settings
from ..storage import expiries
from ..storage.db import Database

log = logging.getLogger(__name__)

SWEEP_LIMIT = 25  # rows claimed by one sweep
SWEEP_BUDGET_S = 30.0  # one sweep's requests end together this long after it began
# A claim outlives the sweep that made it; a process that died with one leaves it to lapse.
CLAIM_S = 2 * SWEEP_BUDGET_S
# Deletes Honcho refused (other than "not found") before the row is given up as failed.
MAX_ATTEMPTS = 5
LONGEST_WAIT_S = 86_400.0


@dataclass
class SweepReport:
    claimed: int = 0
    deleted: int = 0
    retried: int = 0
    failed: int = 0
    stopped: str | None = None  # the code that ended the sweep early (an outage, the budget)


def sweep(db: Database, gateway: HonchoGateway, settings: Settings, owner: str, *,
          limit: int = SWEEP_LIMIT, budget_s: float = SWEEP_BUDGET_S,
          monotonic: Callable[[], float] = time.monotonic) -> SweepReport:
    """Delete the conclusions of `settings`' destination whose lifetime ended, within `budget_s`
    (at most SWEEP_BUDGET_S); raises OutboxError when the outbox cannot be claimed from or settled
    (a row left claimed lapses after CLAIM_S)."""
    destination = settings.destination()
    due = expiries.claim_due(db, destination, owner, limit, CLAIM_S)
    report, done = SweepReport(claimed=len(due)), expiries.Settlement()
    with deadline.within(max(0.0, min(budget_s, SWEEP_BUDGET_S)), monotonic):
        for row in due:
            if report.stopped is not None or deadline.passed():
                report.stopped = report.stopped or deadline.TIMED_OUT
                done.released.append(row.conclusion_id)
                continue
            _delete(gateway, row, settings, done, report)
    expiries.settle(db, destination, owner, done)
    if report.claimed:
        log.info("honcho expiry: %d deleted, %d to retry, %d failed of %d due%s", report.deleted,
                 report.retried, report.failed, report.claimed,
                 f" (stopped: {report.stopped})" if report.stopped else "")
    return report


def _delete(gateway: HonchoGateway, row: expiries.Due, settings: Settings,
            done: expiries.Settlement, report: SweepReport) -> None:
    """One row's delete and what it means for the row; an error that is not the row's own (an
    outage, a refused key, a rate limit) also ends the sweep."""
    try:
        queries.delete_conclusion(gateway, row.observer_id, row.observed_id, row.conclusion_id)
    except HonchoRequestError as exc:
        if isinstance(exc, PermanentError) and exc.code == "http_404":
            pass  # Honcho holds it no longer (forgotten by hand, another sweep): done
        elif isinstance(exc, PermanentError) and row.attempts + 1 >= MAX_ATTEMPTS:
            done.failed[row.conclusion_id] = exc.code
            report.failed += 1
            return
        else:
            done.retry[row.conclusion_id] = (retry_wait_s(settings, row.attempts + 1), exc.code)
            report.retried += 1
            if not isinstance(exc, PermanentError):
                report.stopped = exc.code
            return
    done.deleted.append(row.conclusion_id)
    report.deleted += 1


def retry_wait_s(settings: Settings, attempt: int) -> float:
    """How long a row waits after its `attempt`th failed delete: the sweep interval, doubling, at
    most a day."""
    strategy = tenacity.wait_exponential(multiplier=settings.expiry_sweep_s, max=LONGEST_WAIT_S)
    return wait_s(strategy, attempt)
