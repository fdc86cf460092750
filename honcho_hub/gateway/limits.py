"""What Honcho accepts, as plain values with no imports: settings validation and capture's splitting
check against them without loading the SDK boundary (or httpx, which may be missing)."""

from __future__ import annotations

import re

ID_MAX = 512  # characters of a workspace, peer or session id
ID_RE = re.compile(rf"^[A-Za-z0-9_-]{{1,{ID_MAX}}}$")
MAX_CONTENT_CHARS = 25_000  # one message's content
MAX_MESSAGES_PER_CALL = 100  # messages added by one request
