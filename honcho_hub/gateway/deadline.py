"""One monotonic deadline for what a person or the agent waits on, enforced on every request in it.

`within(seconds)` opens a deadline for this thread's requests in the block; every client the
gateway builds carries the event hooks of `bound`, which keep each request within what is left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from ..errors import HubError, UnreachableError

TIMED_OUT = "timed_out"  # the code of a call its deadline ended
_TIMEOUT_KEYS = ("connect", "read", "write", "pool")
_local = threading.local()


class _Ended(HubError, httpx.TimeoutException):
    """The deadline ended the request (an httpx timeout to the SDK); `sent`: whether any of it had
    gone out."""

    code = TIMED_OUT

    def __init__(self, message: str, *, request: httpx.Request, sent: bool) -> None:
        super().__init__(message, request=request)
        self.sent = sent


@dataclass(frozen=True)
class Deadline:
    """A moment on a monotonic clock."""

    end_mono: float
    monotonic: Callable[[], float]

    def left_s(self) -> float:
        """Seconds left; zero or less once passed."""
        return self.end_mono - self.monotonic()


def current() -> Deadline | None:
    """This thread's deadline, if a `within` block is open."""
    return getattr(_local, "deadline", None)


def passed() -> bool:
    """Whether this thread's deadline exists and has passed."""
    deadline = current()
    return deadline is not None and deadline.left_s() <= 0


@contextmanager
def within(seconds: float, monotonic: Callable[[], float] = time.monotonic) -> Iterator[Deadline]:
    """A deadline `seconds` from now for this thread's requests in the block; an enclosing earlier
    one wins."""
    outer = current()
    deadline = Deadline(monotonic() + seconds, monotonic)
    if outer is not None and outer.left_s() <= deadline.left_s():
        deadline = outer
    _local.deadline = deadline
    try:
        yield deadline
    finally:
        _local.deadline = outer


def translated(cause: BaseException | None) -> UnreachableError | None:
    """`timed_out` when this thread's deadline ended the request that raised `cause` (its own stop,
    or a timeout clamped to what was left); None for any other failure."""
    if isinstance(cause, _Ended):
        return UnreachableError(TIMED_OUT, ambiguous=cause.sent)
    if passed():
        return UnreachableError(TIMED_OUT, ambiguous=True)
    return None


def bound(client: httpx.Client) -> httpx.Client:
    """`client`, its requests bounded by the deadline of the thread that makes them (none:
    unchanged)."""
    hooks = client.event_hooks
    client.event_hooks = {"request": [_before_request, *hooks.get("request", [])],
                          "response": [*hooks.get("response", []), _after_response]}
    return client


def _before_request(request: httpx.Request) -> None:
    deadline = current()
    if deadline is None:
        return
    left = deadline.left_s()
    if left <= 0:
        raise _Ended("the deadline passed before the request", request=request, sent=False)
    timeouts = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        key: left if timeouts.get(key) is None else min(timeouts[key], left)
        for key in _TIMEOUT_KEYS}


def _after_response(response: httpx.Response) -> None:
    deadline = current()
    if deadline is not None and isinstance(response.stream, httpx.SyncByteStream):
        response.stream = _BoundedBody(response.stream, deadline, response.request)


class _BoundedBody(httpx.SyncByteStream):
    """An answer's body that stops at the first chunk past the deadline; httpx then closes the
    response."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: Deadline,
                 request: httpx.Request) -> None:
        self._inner, self._deadline, self._request = inner, deadline, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if self._deadline.left_s() <= 0:
                raise _Ended("the deadline passed while the answer was read",
                             request=self._request, sent=True)
            yield chunk

    def close(self) -> None:
        self._inner.close()
