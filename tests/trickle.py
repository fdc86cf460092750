"""A trickling Honcho in fake time: answers come a byte at a time, each byte costing a step on a
manual clock.

A server that answers slowly but within every read timeout, without waiting for real: `Trickling`
wraps any httpx transport (the fake Honcho's), so what reads the answer moves the clock as it reads.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
from outbox_helpers import ManualClock


class TrickledBody(httpx.SyncByteStream):
    """One answer's body, a byte per iteration, each moving the clock by `step_s`; says how much was
    read."""

    def __init__(self, body: bytes, clock: ManualClock, step_s: float) -> None:
        self.body, self.clock, self.step_s = body, clock, step_s
        self.sent = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for n in range(len(self.body)):
            self.clock.advance(self.step_s)
            self.sent = n + 1
            yield self.body[n:n + 1]

    def close(self) -> None:
        self.closed = True

    @property
    def cut(self) -> bool:
        """Closed before the whole body was read: the reader ended the request."""
        return self.closed and self.sent < len(self.body)


class Trickling(httpx.BaseTransport):
    """`inner`'s answers, each body trickled at `step_s` a byte on `clock`; `bodies` keeps every
    one."""

    def __init__(self, inner: httpx.BaseTransport, clock: ManualClock, step_s: float) -> None:
        self.inner, self.clock, self.step_s = inner, clock, step_s
        self.bodies: list[TrickledBody] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.inner.handle_request(request)
        body = TrickledBody(answer.read(), self.clock, self.step_s)
        self.bodies.append(body)
        return httpx.Response(answer.status_code, headers=answer.headers, stream=body)
