"""From a trigger to a started run: cron and interval fires, events, webhooks, backfills and catch-up, and the dispatch
gate that admits queued runs.
"""
from scheduler.services.admission.firing import fire_due_schedules, compute_next_fire
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.admission.waits import explain_wait
from scheduler.services.admission.events import event_emit
from scheduler.services.admission.webhooks import webhook_receive, webhook_rotate_secret
from scheduler.services.admission.backfills import (
    backfill_submit, backfill_pause, backfill_resume, backfill_cancel, backfill_retry_failed
)

__all__ = [
    "fire_due_schedules", "compute_next_fire", "dispatch_tick", "explain_wait", "event_emit", "webhook_receive",
    "webhook_rotate_secret", "backfill_submit", "backfill_pause", "backfill_resume", "backfill_cancel",
    "backfill_retry_failed"
]
