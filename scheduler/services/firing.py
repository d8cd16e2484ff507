"""Firing time-based triggers: due schedules become runs, exactly once per fire."""
from __future__ import annotations

from datetime import datetime

from django.db import transaction

from scheduler.models import Schedule
from scheduler.services.runs import run_enqueue
from scheduler.triggers.registry import get_trigger


def compute_next_fire(schedule: Schedule, *, after: datetime) -> datetime | None:
    plugin = get_trigger(schedule.trigger_kind)
    if not plugin.time_based:
        return None
    fires = plugin.next_fires(schedule.trigger_config, timezone=schedule.timezone, after=after, count=1)
    return fires[0] if fires else None


def fire_due_schedules(*, now: datetime, limit: int = 500) -> int:
    """Turn due time-based schedules into runs. Uses the indexed next_fire_at; no scan."""
    created = 0
    due = list(
        Schedule.objects.filter(enabled=True, next_fire_at__lte=now)
        .order_by("next_fire_at")
        .only("id", "name", "trigger_kind", "trigger_config", "timezone", "catchup", "max_catchup", "next_fire_at",
              "last_fire_at", "params", "priority", "workload_class_id", "retry_max_attempts")[:limit]
    )
    for schedule in due:
        plugin = get_trigger(schedule.trigger_kind)
        first = schedule.next_fire_at
        # Fire times are computed from the last fire, not from now, so a slow
        # tick never skips one; the first due fire is next_fire_at itself.
        fires = [first] + plugin.due_fires(
            schedule.trigger_config, timezone=schedule.timezone, after=first, now=now,
            catchup=schedule.catchup, max_catchup=schedule.max_catchup,
        ) if plugin.time_based else []
        if schedule.catchup:
            fires = fires[-max(1, schedule.max_catchup):]
        else:
            fires = fires[-1:]  # coalesce: one catch-up run for the latest missed fire
        nxt = compute_next_fire(schedule, after=max(now, fires[-1] if fires else now))
        with transaction.atomic():
            # compare-and-set on next_fire_at: a second dispatcher that read the
            # same row changes nothing, and the unique trigger key backs it up
            moved = Schedule.objects.filter(pk=schedule.pk, next_fire_at=first).update(
                next_fire_at=nxt, last_fire_at=fires[-1] if fires else schedule.last_fire_at
            )
            if not moved:
                continue
            for fire in fires:
                run = run_enqueue(
                    schedule=schedule, trigger_kind=schedule.trigger_kind, trigger_key=f"{schedule.trigger_kind}:{fire.isoformat()}",
                    logical_time=fire, triggered_by=schedule.trigger_kind, now=now,
                )
                created += run is not None
    return created


