"""POST /api/plugins/honcho/honcho_remember: the sidebar's "Don't remember this chat" — `get` an
open chat's state (`chat`), `set` it (`chat`, `state`: remember, no-capture or off), and
`this_is_me` (`chat`: its unmapped sender named the owner in sender_peers). Auth and CSRF as Agent
Zero's defaults."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoRemember(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.remember import remember_document

            # off the request's loop: saving the chat writes its file
            return await asyncio.to_thread(remember_document, input)
        except Exception:  # a structured answer, never a 500 with a trace
            log.exception("honcho: remember failed")
            return {"ok": False,
                    "error": "the chat's memory setting failed; see the Agent Zero log"}
