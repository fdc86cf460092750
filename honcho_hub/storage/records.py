"""Moved into storage/outbox.py (issue 14). This name stays only until delivery/state.py imports
Retry and Settlement from there; then delete this file."""

from .outbox import Retry, Settlement  # noqa: F401
