"""`python -m honcho_hub demo`: a scripted conversation through the real path, capture → outbox →
worker → Honcho, then the recall the agent would see. Without --real it never touches a user's
memory; with --real it never prints what the user's outbox holds (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import uuid
from typing import TextIO

from ..capture.service import CaptureRequest, CaptureService, Role
from ..delivery.worker import DeliveryWorker
from ..names import session_id_for
from ..recall.recaller import Recaller
from ..settings.config import Settings
from ..storage.outbox import Outbox

SCRIPT = (
    (Role.USER, "Hi! I'm planning a trip to Lisbon in May with my sister."),
    (Role.AGENT, "Lovely time of year. What matters most to you both on this trip?"),
    (Role.USER, "Quiet beaches, vegetarian food, and no car. My API token is ghp_"
                "DemoToken0123456789abcdefghijklmnopq, please keep it safe."),
    (Role.AGENT, "Noted: beaches reachable by train, vegetarian places, no car."
                 " (I never keep tokens.)"),
    (Role.USER, "Also, I prefer short answers."),
    (Role.AGENT, "Short answers it is."),
)
QUESTION = "What do you remember about my trip?"
TEMPLATE = "<honcho_memory>\n{{sections}}\n</honcho_memory>"


def run_demo(settings: Settings, real: bool, out: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="honcho-hub-demo-") as folder:
        if not real:
            settings = dataclasses.replace(settings,
                                           outbox_path=os.path.join(folder, "outbox.sqlite3"),
                                           workspace_id="honcho-hub-demo", user_peer_id="demo-user",
                                           agent_peer_id="demo-agent")
        return _run(settings, real, out)


def _run(settings: Settings, real: bool, out: TextIO) -> int:
    say = lambda text="": out.write(text + "\n")  # noqa: E731
    # The demo's scripted conversation is a chat of its own whatever the strategy: with --real it
    # must not land in the user's shared (global or project) session, and its session is the one it
    # recalls from.
    settings = dataclasses.replace(settings, session_strategy="per-chat")
    chat = "demo" + uuid.uuid4().hex[:8]
    say(f"Honcho Memory Hub demo → {settings.api_url} · workspace {settings.workspace_id}"
        f" · key {'set' if settings.has_api_key else 'not set'}"
        f"{'' if real else ' (demo workspace and peers)'}")
    capture = CaptureService(settings)
    for n, (role, text) in enumerate(SCRIPT):
        outcome = capture.capture(CaptureRequest(chat, role, f"demo-{n}", text), settings)
        say(f"  captured {role.value:5} {outcome.value}")
    capture.close()
    box = Outbox.for_settings(settings)
    # Only the demo's own temporary outbox is read back: the user's real one holds their messages.
    say("Stored redacted: (not shown: --real never reads messages back from your outbox)" if real
        else f"Stored redacted: {_redacted_line(box)}")
    worker = DeliveryWorker(lambda: settings)
    moved = worker.drain(20.0)
    metrics = worker.state.snapshot()["metrics"]
    worker.stop(10)
    pending = box.stats()["counts"]["pending"] + box.stats()["counts"]["leased"]
    box.close()
    if pending:
        say(f"Honcho did not take the events ({metrics.get('last_error_code') or 'no answer'}):"
            f" {pending} are safely queued.")
        say("With --real they wait in your outbox and `python -m honcho_hub drain` delivers them"
            " once Honcho is reachable; this demo's temporary outbox is removed on exit.")
        return 3
    # With --real the drain also delivers whatever else was queued, so the count is not only the
    # demo's.
    say(f"Delivered {moved['delivered']} messages;"
        f" the demo's conversation is Honcho session {session_id_for(chat)}.")
    recaller = Recaller()
    result = recaller.recall(settings, session_id_for(chat), QUESTION, TEMPLATE)
    recaller.close()
    say(f"\nBefore the next turn (\"{QUESTION}\") the agent would see:")
    say(result.block or "(nothing yet: Honcho derives conclusions in the background;"
                        " try again in a minute)")
    return 0


def _redacted_line(box: Outbox) -> str:
    """The demo's one message with a token, as it was queued (the demo owns this outbox)."""
    return next((text for text in box.contents() if "REDACTED" in text),
                "(no secrets in this conversation)")
