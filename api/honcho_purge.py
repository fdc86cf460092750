"""POST /api/plugins/honcho/honcho_purge: the sidebar's Purge before an uninstall — survey (what it
would remove, in counts), purge (`confirmed: true`, `force` for messages not yet sent), resume."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoPurge(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import purge_document

            # Halting threads and removing files: never on Agent Zero's event loop.
            return await asyncio.to_thread(purge_document, input)
        except Exception:
            log.exception("honcho: purge failed")
            return {"ok": False, "error": "the purge failed; see the Agent Zero log"}
