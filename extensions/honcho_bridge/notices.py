"""The Hub's notices (ops/alerts.py) as Agent Zero notifications: one notification id per condition
and phase, updated in place; every string escaped, since Agent Zero renders a notification's message
and detail as HTML. Called on the delivery worker's thread (Agent Zero's manager takes a lock and
tells the page through its own event loop).
"""

from __future__ import annotations

import html

from usr.plugins.honcho.honcho_hub.ops.alerts import Condition, Notice

GROUP = "honcho-memory"  # a newer toast of the group replaces the older one on the page
# Red in health (they need you) are errors, the rest warnings; a recovery is a success.
NEEDS_YOU = frozenset({Condition.KEY_REFUSED, Condition.OUTBOX_UNUSABLE})
OUTAGE_DISPLAY_S = 30
RECOVERY_DISPLAY_S = 8


def show(notice: Notice) -> None:
    """Add (or update in place) the notification of `notice`."""
    from helpers.notification import NotificationManager, NotificationPriority, NotificationType

    kind = (NotificationType.SUCCESS if notice.recovered
            else NotificationType.ERROR if notice.condition in NEEDS_YOU
            else NotificationType.WARNING)
    NotificationManager.send_notification(
        kind, NotificationPriority.NORMAL if notice.recovered else NotificationPriority.HIGH,
        html.escape(notice.message), title=html.escape(notice.title), detail="",
        display_time=RECOVERY_DISPLAY_S if notice.recovered else OUTAGE_DISPLAY_S, group=GROUP,
        id=notice.id)
