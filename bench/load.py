"""The machine's load during a bench run, printed beside its figures: a figure from a busy machine
says so itself (issue 27)."""

from __future__ import annotations

import os


def load_avg() -> list[float]:
    """The 1-, 5- and 15-minute load averages now (runnable processes; 2 cores busy is 2.0)."""
    return [round(figure, 2) for figure in os.getloadavg()]
