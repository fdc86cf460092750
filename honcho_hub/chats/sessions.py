"""Which Honcho session a chat names now: the one answer for a process's turns, tool, status and
chat start. The rule is `names.session_for`; a chat's own session moves on each forget
(chats/forget.py) to its next generation, kept in the outbox. `ChatSessions` holds each chat's
generation in memory, read on a thread of its own and read again once the marker beside the outbox
moved (storage/marker.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_until_done

from ..bounded import BoundedMap
from ..errors import OutboxError
from ..names import session_for, session_id_for
from ..runtime import close_pool
from ..settings.config import Settings
from ..storage import chats as chat_rows
from ..storage.db import with_existing
from ..storage.marker import MarkerWatch, read_marker

# Chats whose generation is kept in memory, the least recently learned going first: a user's chat
# list holds hundreds at most; one forgotten here is read again from the outbox when next named.
MAX_CHATS = 1_000
# Reads waiting at once; beyond that a chat is named from memory until it is named again.
MAX_READS = 32

ChatKey = tuple[str, str, str]  # (outbox, destination, chat)


class ChatSessions:
    """One per process. On Agent Zero's event loop (`wait_s` 0) only memory is looked at: until a
    read lands, a chat is named with the generation last known (the first, for a chat not read
    yet). The threads that serve a turn, the tool and status wait a bounded time for the read."""

    def __init__(self, marker: MarkerWatch | None = None,
                 may_start: Callable[[], bool] = lambda: True) -> None:
        self._marker = marker or MarkerWatch()
        # False while no thread may start (the Hub's hold): a chat is named with what is known.
        self._may_start = may_start
        self._lock = threading.Lock()
        # (outbox, destination, chat) -> (how often the chat was forgotten, the marker when that
        # was learned)
        self._generations: BoundedMap[ChatKey, tuple[int, int]] = BoundedMap(MAX_CHATS)
        self._reads: dict[ChatKey, Future] = {}
        # Reads of the outbox on a thread of their own: a hung Honcho holding every recall thread
        # delays none.
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="honcho-hub-recall-chats")

    def session(self, settings: Settings, chat_id: str, project: str | None = None,
                wait_s: float = 0.0) -> str:
        """The Honcho session the chat's turns name now (names.session_for): once the chat was
        forgotten, its current generation's. With `wait_s` 0 only memory is looked at; other threads
        pass a bound: the marker is followed, and the read waited for that long at most."""
        session = session_for(settings.session_strategy, chat_id, project)
        if session != session_id_for(chat_id):
            # A project's or the global session: shared with other chats, never forgotten.
            return session
        if wait_s > 0:
            self._marker.follow(settings)
        key = _chat_key(settings, chat_id)
        seen = self._marker.seen
        with self._lock:
            known = self._generations.get(key)
        if known is None or seen not in (None, known[1]):
            reading = self._read(settings, key)
            if reading is not None and wait_s > 0:
                wait_until_done([reading], wait_s)  # not read in time: the generation last known
                with self._lock:
                    known = self._generations.get(key)
        return session_id_for(chat_id, known[0]) if known is not None else session

    def forgotten(self, settings: Settings, chat_id: str, generation: int) -> None:
        """This process forgot the chat (chats/forget.py moved it to `generation` and the marker):
        its turns name the new session from now on, without waiting for a read. Reads the marker
        (a `stat`)."""
        self._learn(_chat_key(settings, chat_id), generation, read_marker(settings))

    def unfinished(self) -> list[Future]:
        """The reads under way (what `close` waits for; a benchmark or a test may wait for them
        too)."""
        with self._lock:
            return list(self._reads.values())

    def close(self, timeout_s: float = 0.0) -> bool:
        """Cancel the reads not started and wait at most `timeout_s` for the running one; True
        when the reader thread has ended."""
        return close_pool(self._reader, self.unfinished, timeout_s)

    # -- internals -------------------------------------------------------------------------------

    def _read(self, settings: Settings, key: ChatKey) -> Future | None:
        """The read of the chat's generation on the reader thread, started unless one is under way;
        None when none could start (too many waiting, held, or the reader was shut down)."""
        if not self._may_start():
            return None
        with self._lock:
            reading = self._reads.get(key)
            if reading is not None or len(self._reads) >= MAX_READS:
                return reading
            try:
                # Under the lock: the read ends (and leaves the map) only once it is in the map.
                reading = self._reader.submit(self._load, settings, key)
            except RuntimeError:  # shut down: the plugin is being reloaded
                return None
            self._reads[key] = reading
        return reading

    def _load(self, settings: Settings, key: ChatKey) -> None:
        try:
            # The marker first: a forget committed after this read moves the marker after this look
            # at it, so the value read is followed up at the next turn.
            marker = read_marker(settings)
            try:
                generation = with_existing(
                    settings, lambda db: chat_rows.generation(db, key[1], key[2]), 0)
            except OutboxError:
                return  # unknown as before; read again when the chat is next named
            self._learn(key, generation, marker)
        finally:
            with self._lock:
                self._reads.pop(key, None)

    def _learn(self, key: ChatKey, generation: int, marker: int) -> None:
        """Keep what was learned with the marker it was learned under, unless something newer is
        known: a read that began before the marker moved is older than a forget told since; under
        one marker, generations only grow (a read that began before a forget this process made,
        whose marker could not be moved)."""
        with self._lock:
            known = self._generations.get(key)
            if known is not None and known[1] > marker:
                return
            if known is not None and known[1] == marker:
                generation = max(generation, known[0])
            self._generations.put(key, (generation, marker))


def _chat_key(settings: Settings, chat_id: str) -> ChatKey:
    return (settings.outbox_path, settings.destination(), chat_id)
