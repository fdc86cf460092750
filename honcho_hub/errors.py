"""Every exception the plugin raises on purpose, in one tree under `HubError`, grouped by what the
caller does next (docs/architecture.md draws it). Each carries a `code` that is safe to store, log
and show: never server text, queued content, a credential or a file path. The kinds a caller's input
causes are also ValueErrors; anything raised that is not a HubError is a bug.
"""

from __future__ import annotations


class HubError(Exception):
    """Root of the plugin's exceptions; `code` names the kind (an instance may narrow it)."""

    code = "hub_error"


class HonchoRequestError(HubError):
    """Root of everything a request to Honcho can raise; `code` is safe to store and show."""

    def __init__(self, code: str, *, ambiguous: bool = False) -> None:
        super().__init__(code)
        self.code = code
        # The request may have reached the server (timeout or reset after sending, 5xx): ask Honcho
        # what it holds before sending the same events again.
        self.ambiguous = ambiguous


class TransientError(HonchoRequestError):
    """Retry later with backoff, counting the attempt (429, 5xx)."""

    def __init__(self, code: str, *, retry_after: float | None = None,
                 ambiguous: bool = False) -> None:
        super().__init__(code, ambiguous=ambiguous)
        self.retry_after = retry_after


class UnreachableError(HonchoRequestError):
    """No answer from the destination: open its circuit; attempts are not counted."""


class AuthError(HonchoRequestError):
    """401/403: open the destination's auth circuit until a fresh key works; nothing is
    dead-lettered."""


class PermanentError(HonchoRequestError):
    """The server (or the SDK's own validation) rejects these events as they are: dead-letter."""


class SdkMissingError(HonchoRequestError):
    """honcho-ai is not installed: delivery waits (capture keeps queueing)."""


class OutboxError(HubError):
    """Root of outbox failures; messages never contain queued content or the file path."""

    code = "outbox_error"


class OutboxBusy(OutboxError):
    """Another connection held the write lock longer than we may wait."""

    code = "outbox_busy"


class OutboxUnavailable(OutboxError):
    """The folder or file cannot be created, opened or written (permissions, disk, a symbolic
    link)."""

    code = "outbox_unavailable"


class OutboxFull(OutboxError):
    """A table of the outbox holds as many rows as it may: the row was not added."""

    code = "outbox_full"


class OutboxCorrupt(OutboxError):
    """The file is not a usable outbox database (corrupt, foreign, or from a newer version)."""

    code = "outbox_corrupt"


class OutboxForeign(OutboxCorrupt):
    """The file at the outbox path is not an outbox of this plugin; it was left untouched.

    A kind of its own (status shows its code) because the remedy differs from a damaged outbox:
    the setting points at another program's file. A subclass, so whoever handles unusable files
    handles it."""

    code = "outbox_foreign"


class JournalError(HubError):
    """The journal cannot take this record; the message is refused (and counted), never
    half-kept."""

    code = "journal_error"


class JournalFull(JournalError):
    code = "journal_full"


class JournalUnavailable(JournalError):
    code = "journal_unavailable"


class RedactionError(HubError):
    """Redaction could not be completed; the text must not be queued."""

    code = "redaction_failed"


class ConfigFileError(HubError, ValueError):
    """A config file that cannot be used; the reason names the problem, never the file's
    content."""

    code = "config_file"

    def __init__(self, reason: str, missing: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing


class InvalidValue(HubError, ValueError):
    """A raw setting value that does not fit its field; the message never contains the value."""

    code = "invalid_value"


class BadInput(HubError, ValueError):
    """A memory-tool argument the agent can fix; the message says how."""

    code = "bad_input"


class ForgetRefused(HubError, ValueError):
    """A chat id that cannot name a chat (chats/forget.py): nothing was forgotten; the message says
    what a chat id is, never the value given."""

    code = "forget_refused"


class BackfillError(HubError):
    """A backfill cannot start (cli/backfill.py): `code` says why — `bad_chats`, a chats folder or
    chat id the caller can fix, or Agent Zero's scheduler list or settings cannot be read."""

    def __init__(self, message: str, code: str = "bad_chats") -> None:
        super().__init__(message)
        self.code = code


class FileRefused(HubError, ValueError):
    """A file not read (settings/files.read_regular_file): `code` says why — `not_a_file` (a FIFO,
    device or folder), `too_large`, or `linked_outside` (a link leads out of the folder it must stay
    in)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class MemoryFileError(HubError, ValueError):
    """A memory file that cannot be imported (ops/memory_file.py): nothing was sent; the message
    names the problem and where (`conclusions[3].text`), never the file's content."""

    code = "bad_memory_file"
