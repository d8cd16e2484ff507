"""Watching the runs: alerts and their delivery, deadlines, freshness objectives, acknowledged failures."""
from scheduler.services.oversight.alerts import alert_raise, alerts_tick
from scheduler.services.oversight.deadlines import deadlines_check
from scheduler.services.oversight.freshness import freshness_check, freshness_status
from scheduler.services.oversight.failures import failure_acknowledge
from scheduler.services.oversight.channel_probe import channel_test_send

__all__ = [
    "alert_raise", "alerts_tick", "deadlines_check", "freshness_check", "freshness_status", "failure_acknowledge",
    "channel_test_send"
]
