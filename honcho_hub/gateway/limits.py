"""What Honcho accepts, as plain values with no imports: settings validation and capture's splitting
check against them without loading the SDK boundary (or httpx, which may be missing)."""

from __future__ import annotations

import re

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")  # workspace, peer and session ids
MAX_CONTENT_CHARS = 25_000  # one message's content
MAX_MESSAGES_PER_CALL = 100  # messages added by one request
