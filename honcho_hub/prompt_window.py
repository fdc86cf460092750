"""The prompt window: from a typed message to the turn's first model call, while Agent Zero builds
the prompt on its event loop. The plugin's background passes that the message set off (the capture
writer's, the delivery worker's) wait it out, at most MAX_HOLD_S: Python threads share one
interpreter lock, so their work done meanwhile is time the turn waits for (issue 27); done while the
turn waits on the model, it costs the turn nothing. The message itself is safe in the journal
from the hook on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class PromptWindow:
    """`opened()` by the user-message hook, `model_called()` before each main model call;
    `held_s()` tells a background pass how long to wait still. Process-wide: a model call in one
    chat ends the hold another chat's message started (the cap bounds either). Thread-safe, no
    I/O."""

    # A prompt is built in tens of milliseconds (a busy machine: a few hundred); a turn that never
    # reaches the model (a refused message, an error) holds the passes this long at most.
    MAX_HOLD_S = 1.0

    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 on_close: Callable[[], None] = lambda: None) -> None:
        """`on_close`: wakes the held threads when the model call ends the hold early."""
        self._monotonic, self._on_close = monotonic, on_close
        self._lock = threading.Lock()
        self._until = 0.0

    def opened(self) -> None:
        """A message typed: hold from now, unless a hold runs already (its cap stands: messages in
        a row must not keep the passes waiting)."""
        now = self._monotonic()
        with self._lock:
            if self._until <= now:
                self._until = now + self.MAX_HOLD_S

    def model_called(self) -> None:
        with self._lock:
            was_held = self._until > self._monotonic()
            self._until = 0.0
        if was_held:
            self._on_close()

    def held_s(self) -> float:
        """Seconds a background pass should still wait; 0.0 when it may go."""
        return max(0.0, self._until - self._monotonic())
