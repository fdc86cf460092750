"""Agent Zero projects as Honcho scopes: which scope a chat belongs to, by pure rules.

A scope is a visibility boundary: recall through it sees only its sessions. Strategy `project`,
`custom` or `off` decides a chat's scope; a chat without a project has none.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from ..settings.config import Settings

MAX_SCOPE_ID = 506  # Honcho's limit for scope ids
RESERVED_PREFIX = "scope."
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def slug(name: str) -> str:
    """A lowercase id fragment for a human name: accents folded, unsafe characters replaced.

    A name with nothing left after folding (all CJK, emoji…) gets a stable digest instead, so two
    such projects never share a scope by accident.
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    cleaned = _UNSAFE.sub("-", folded).strip("-_")
    if cleaned:
        return cleaned
    if not name.strip():
        return ""
    return "x" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def scope_id(prefix: str, name: str) -> str | None:
    """`<prefix><slug>` within Honcho's rules, or None when the name yields nothing."""
    part = slug(name)
    if not part:
        return None
    candidate = prefix + part
    if len(candidate) > MAX_SCOPE_ID:  # keep it unique: cut and mark with a digest of the whole
        digest = hashlib.sha256(candidate.encode()).hexdigest()[:12]
        candidate = candidate[:MAX_SCOPE_ID - 13] + "-" + digest
    while candidate.startswith(RESERVED_PREFIX):  # unreachable with a valid prefix; kept as a guard
        candidate = candidate[len(RESERVED_PREFIX):]
    return candidate or None


def resolve_scope(settings: Settings, project_name: str | None) -> str | None:
    """The scope of a chat in `project_name` (None for no project) under the settings' strategy."""
    if settings.scope_strategy == "off":
        return None
    if settings.scope_strategy == "custom":
        return (scope_id(settings.scope_prefix, settings.scope_custom)
                if settings.scope_custom else None)
    return scope_id(settings.scope_prefix, project_name) if project_name else None


def sdk_supports_scopes(honcho_module: Any) -> bool:
    """Scopes need honcho-ai ≥ 2.4: detected by the feature, never by parsing a version."""
    client = getattr(honcho_module, "Honcho", None)
    return client is not None and callable(getattr(client, "scope", None))

