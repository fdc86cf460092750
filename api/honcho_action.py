"""POST /api/plugins/honcho/honcho_action: check, wake, drain (≤ 5 s), retry_dead (≤ 100),
clear_cache, and the saved observation preset on existing sessions: observation_check (a page,
changing nothing) and observation_apply (only with `confirmed: true`)."""

import asyncio
import logging

from helpers.api import ApiHandler, Request

log = logging.getLogger("honcho_hub.adapters")


class HonchoAction(ApiHandler):
    async def process(self, input: dict, request: Request) -> dict:
        try:
            from usr.plugins.honcho.extensions.honcho_bridge.operations import run_operation

            return await asyncio.to_thread(run_operation, input)
        except Exception:
            log.exception("honcho: action failed")
            return {"ok": False, "error": "the action failed; see the Agent Zero log"}
