"""POST /api/plugins/honcho/honcho_inspector: the memory inspector's view, search, forget (only
with `confirmed: true`, which the inspector's UI sends after its confirm step: a click in the UI,
not proof of a person), undo, edit_card, export (the memory file's text to download) and import (of
such a file's text), remember (for a lifetime) and pin, the corrections (correct, correct_fact,
rebuild_card: each only with `confirmed: true`) and what evidence there is (evidence, messages,
level). Auth and CSRF as Agent Zero's defaults; the answer holds recalled data, so it is marked
never to be stored by the browser."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoInspector(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import inspector_document

            return await asyncio.to_thread(inspector_document, input)
        except Exception:  # a structured answer, never a 500 with a trace
            log.exception("honcho: inspector failed")
            return {"ok": False, "error": "the inspector is unavailable; see the Agent Zero log"}

    async def handle_request(self, request: Request):
        response = await super().handle_request(request)
        response.headers["Cache-Control"] = "no-store"
        return response
