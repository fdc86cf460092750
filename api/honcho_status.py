"""POST /api/plugins/honcho/honcho_status: the sidebar's status. Auth and CSRF as Agent Zero's
defaults."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoStatus(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import status_document

            return await asyncio.to_thread(status_document, input)
        except Exception:  # a structured answer, never a 500 with a trace
            log.exception("honcho: status failed")
            return {"ok": False, "error": "status is unavailable; see the Agent Zero log"}
