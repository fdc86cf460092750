"""POST /api/plugins/honcho/honcho_card: the open sidebar's card of the user (a request to Honcho,
so the panel asks at most once a minute). Auth and CSRF as Agent Zero's defaults."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoCard(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import card_document

            return await asyncio.to_thread(card_document, input)
        except Exception:  # a structured answer, never a 500 with a trace
            log.exception("honcho: card failed")
            return {"ok": False, "error": "the card is unavailable; see the Agent Zero log"}
