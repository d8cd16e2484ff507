"""Firing time-based triggers: due schedules become runs, exactly once per fire.

The due query reads the indexed `next_fire_at` (index sched_due_idx on
enabled, next_fire_at), so a tick costs the number of due schedules, not
the number of schedules. Moving `next_fire_at` is a compare-and-set, and the
unique (schedule, trigger_key) constraint backs it up: two dispatchers that
read the same due row produce one run.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from scheduler.core import ConfigError
from scheduler.models import Schedule
from scheduler.models import Run
from scheduler.services.runs import run_build
from scheduler.triggers.registry import get_trigger

log = logging.getLogger(__name__)


def compute_next_fire(schedule: Schedule, *, after: datetime) -> datetime | None:
    plugin = get_trigger(schedule.trigger_kind)
    if not plugin.time_based:
        return None
    fires = plugin.next_fires(schedule.trigger_config, timezone=schedule.timezone, after=after, count=1)
    return fires[0] if fires else None


def fire_key(kind: str, fire: datetime) -> str:
    return f"{kind}:{fire.isoformat()}"


def fires_to_run(schedule: Schedule, *, now: datetime) -> list[datetime]:
    """The fire times a due schedule turns into runs this tick.

    `next_fire_at` is the first missed fire; the others are computed from it,
    never from `now`, so a slow tick skips nothing. Coalesce (the default):
    only the latest missed fire runs. Catch-up: the latest `max_catchup`
    missed fires run, oldest first; older ones are dropped on purpose so a
    long outage cannot flood the queue.
    """
    plugin = get_trigger(schedule.trigger_kind)
    first = schedule.next_fire_at
    if first is None or first > now or not plugin.time_based:
        return []
    keep = max(1, schedule.max_catchup) if schedule.catchup else 1
    later = plugin.latest_fires(schedule.trigger_config, timezone=schedule.timezone, after=first, now=now, count=keep)
    return ([first] + later)[-keep:]


def fire_due_schedules(*, now: datetime, limit: int = 500) -> int:
    """Turn due time-based schedules into runs; returns how many runs were queued."""
    due = list(
        Schedule.objects.filter(enabled=True, next_fire_at__lte=now)
        .order_by("next_fire_at")
        .only("id", "name", "trigger_kind", "trigger_config", "timezone", "catchup", "max_catchup", "next_fire_at",
              "last_fire_at", "params", "priority", "workload_class_id", "retry_max_attempts")[:limit]
    )
    if not due:
        return 0
    runs: list[Run] = []
    with transaction.atomic():
        # one transaction and one bulk insert per tick: per-schedule commits and
        # savepoints cost more than the work (bench scenario 3)
        for schedule in due:
            runs.extend(_fire_one(schedule, now=now))
        if runs:
            taken = set(
                Run.objects.filter(schedule_id__in={r.schedule_id for r in runs}, trigger_key__in={r.trigger_key for r in runs})
                .values_list("schedule_id", "trigger_key")
            )
            runs = [r for r in runs if (r.schedule_id, r.trigger_key) not in taken]
            # the unique (schedule, trigger_key) constraint still refuses a double fire
            # that races past the check above; ignore_conflicts makes it "already there"
            Run.objects.bulk_create(runs, ignore_conflicts=True)
    return len(runs)


def _fire_one(schedule: Schedule, *, now: datetime) -> list[Run]:
    """CAS this schedule's next_fire_at forward; the unsaved runs for the fires it stood for."""
    first = schedule.next_fire_at
    try:
        fires = fires_to_run(schedule, now=now)
        nxt = compute_next_fire(schedule, after=now)
    except ConfigError:
        # A plugin that went away (uninstalled) or a config it now refuses:
        # park the schedule instead of failing every tick for everyone.
        log.exception("schedule %s cannot compute its fires; it will not fire until it is saved again", schedule.name)
        Schedule.objects.filter(pk=schedule.pk, next_fire_at=first).update(next_fire_at=None)
        return []
    moved = Schedule.objects.filter(pk=schedule.pk, next_fire_at=first).update(
        next_fire_at=nxt, last_fire_at=fires[-1] if fires else schedule.last_fire_at
    )
    if not moved:
        return []  # another dispatcher fired it
    return [
        run_build(schedule=schedule, trigger_kind=schedule.trigger_kind, trigger_key=fire_key(schedule.trigger_kind, fire),
                  logical_time=fire, triggered_by=schedule.trigger_kind, now=now)
        for fire in fires
    ]
