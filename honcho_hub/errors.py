"""Delivery errors, grouped by what the caller does next. Codes are sanitized: never server text."""

from __future__ import annotations


class DeliveryError(Exception):
    """Root of everything a send can raise; `code` is safe to store and show."""

    def __init__(self, code: str, *, ambiguous: bool = False) -> None:
        super().__init__(code)
        self.code = code
        # The request may have reached the server (timeout or reset after sending, 5xx):
        # ask Honcho what it holds before sending the same events again.
        self.ambiguous = ambiguous


class TransientError(DeliveryError):
    """Retry later with backoff, counting the attempt (429, 5xx)."""

    def __init__(self, code: str, *, retry_after: float | None = None, ambiguous: bool = False) -> None:
        super().__init__(code, ambiguous=ambiguous)
        self.retry_after = retry_after


class UnreachableError(DeliveryError):
    """No answer from the destination: open its circuit; attempts are not counted."""


class AuthError(DeliveryError):
    """401/403: open the destination's auth circuit until a fresh key works; nothing is dead-lettered."""


class PermanentError(DeliveryError):
    """The server (or the SDK's own validation) rejects these events as they are: dead-letter."""


class SdkMissingError(DeliveryError):
    """honcho-ai is not installed: delivery waits (capture keeps queueing)."""
