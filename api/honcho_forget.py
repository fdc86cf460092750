"""POST /api/plugins/honcho/honcho_forget: forgetting a chat from the sidebar — `offers` (chats the
user deleted in Agent Zero), `forget_chat` (`chat`, only with `confirmed: true`, which the sidebar
sends after its confirm step: a click in the UI, not proof of a person; the answer lists what
dreams derived from it), `forget_leftovers` (`chat`, `confirmed: true`: those removed), `dismiss`
(`chat`). Auth and CSRF as Agent Zero's defaults."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoForget(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import forget_document

            return await asyncio.to_thread(forget_document, input)
        except Exception:  # a structured answer, never a 500 with a trace
            log.exception("honcho: forget failed")
            return {"ok": False, "error": "forgetting the chat failed; see the Agent Zero log"}
