"""Firing time-based triggers: due schedules become runs, exactly once per fire.

The due query reads the indexed `next_fire_at` (index sched_due_idx on
enabled, next_fire_at), so a tick costs the number of due schedules, not
the number of schedules. Moving `next_fire_at` is a compare-and-set, and the
unique (schedule, trigger_key) constraint backs it up: two dispatchers that
read the same due row produce one run.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from scheduler.core import ActiveRun, ConfigError, decide_catchup, decide_overlap
from scheduler.models import CatchupPolicy, Run, RunStatus, Schedule
from scheduler.services.errors import ServiceError
from scheduler.services.finish import run_cancel, run_refused
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
    never from `now`, so a slow tick skips nothing. Catch-up policy `latest`
    (the default) and `none`: only the latest missed fire. `all`: the latest
    `max_catchup` missed fires, oldest first; older ones are dropped on
    purpose so a long outage cannot flood the queue.
    """
    plugin = get_trigger(schedule.trigger_kind)
    first = schedule.next_fire_at
    if first is None or first > now or not plugin.time_based:
        return []
    keep = max(1, schedule.max_catchup) if schedule.catchup == CatchupPolicy.ALL else 1
    later = plugin.latest_fires(schedule.trigger_config, timezone=schedule.timezone, after=first, now=now, count=keep)
    return ([first] + later)[-keep:]


def fire_due_schedules(*, now: datetime, limit: int = 500) -> int:
    """Turn due time-based schedules into runs; returns how many runs were queued."""
    due = list(
        Schedule.objects.filter(enabled=True, next_fire_at__lte=now)
        .order_by("next_fire_at")
        .only("id", "name", "trigger_kind", "trigger_config", "timezone", "catchup", "max_catchup", "next_fire_at",
              "last_fire_at", "params", "priority", "workload_class_id", "retry_max_attempts", "overlap_policy",
              "watermark_config")[:limit]
    )
    if not due:
        return 0
    runs: list[Run] = []
    with transaction.atomic():
        # one query for the overlap policies of every due schedule
        active: dict[int, list[ActiveRun]] = defaultdict(list)
        for schedule_id, run_id, status in (
            Run.objects.filter(schedule_id__in=[s.pk for s in due], status__in=RunStatus.active(),
                               backfill__isnull=True)
            .order_by("id").values_list("schedule_id", "id", "status")
        ):
            active[schedule_id].append(ActiveRun(run_id, status))
        # one transaction and one bulk insert per tick: per-schedule commits and
        # savepoints cost more than the work (bench scenario 3)
        for schedule in due:
            runs.extend(_fire_one(schedule, now=now, active=active.get(schedule.pk, [])))
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


def _fire_one(schedule: Schedule, *, now: datetime, active: list[ActiveRun]) -> list[Run]:
    """CAS this schedule's next_fire_at forward; the unsaved runs for the fires it stood for.

    The catch-up policy decides what missed fires become and the overlap
    policy what a fire becomes while a run is active; a fire that may not run
    is a SKIPPED run with the reason, never dropped silently.
    """
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
    grace = timedelta(seconds=settings.ETL_CATCHUP_GRACE_SECONDS)
    decided = decide_catchup(schedule.catchup, fires, now=now, grace=grace, first=first)
    overlap = decide_overlap(schedule.overlap, active, [f.at for f in decided if not f.skip_reason])
    _cancel_active(overlap.cancel, reason=overlap.cancel_reason, now=now)
    skipped = [f for f in decided if f.skip_reason] + [f for f in overlap.fires if f.skip_reason]
    for fire in sorted(skipped, key=lambda f: f.at):
        # rare (a policy said no): one insert each, through the owner of final statuses
        run_refused(schedule=schedule, status=RunStatus.SKIPPED, reason=fire.skip_reason,
                    trigger_kind=schedule.trigger_kind, trigger_key=fire_key(schedule.trigger_kind, fire.at),
                    logical_time=fire.at, triggered_by=schedule.trigger_kind, now=now)
    return [
        run_build(schedule=schedule, trigger_kind=schedule.trigger_kind, trigger_key=fire_key(schedule.trigger_kind, f.at),
                  logical_time=f.at, triggered_by=schedule.trigger_kind, now=now)
        for f in overlap.fires if not f.skip_reason
    ]


def _cancel_active(run_ids: list[int], *, reason: str, now: datetime) -> None:
    """cancel_other: the active runs make way, through the public cancel service."""
    for run in Run.objects.filter(pk__in=run_ids, status__in=RunStatus.active()).select_related("schedule"):
        try:
            run_cancel(run=run, actor="scheduler", reason=reason, now=now)
        except ServiceError:
            pass  # it finished meanwhile: nothing to make way for
