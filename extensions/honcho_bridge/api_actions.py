"""What each API handler of the sidebar checks first: a JSON object naming one of its actions."""

from __future__ import annotations

from typing import Any


def checked_action(body: Any, actions: tuple[str, ...]) -> tuple[dict, dict | None]:
    """The request's body (anything but an object reads as an empty one) and, when its `action` is
    not one of `actions`, the structured error to answer with (else None)."""
    body = body if isinstance(body, dict) else {}
    if body.get("action") in actions:
        return body, None
    return body, {"ok": False, "error": f"unknown action; use one of: {', '.join(actions)}"}
