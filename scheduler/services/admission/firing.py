"""Firing time-based triggers: due schedules become runs, exactly once per fire.

The due query reads the indexed `next_fire_at` (index sched_due_idx on
enabled, next_fire_at), so a tick costs the number of due schedules, not
the number of schedules. Moving `next_fire_at` is a compare-and-set, one
guarded UPDATE for every due schedule of the tick (services/bulk.py), and the
unique (schedule, trigger_key) constraint backs it up: two dispatchers that
read the same due row produce one run.
"""
from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from scheduler.core import ActiveRun, ConfigError, decide_catchup, decide_overlap
from scheduler.core.overlap import ALLOW_ALL, BUFFER_ALL, OVERLAP_POLICIES
from scheduler.models import CatchupPolicy, Run, RunStatus, Schedule
from scheduler.services.common import bulk
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.transitions import run_refused
from scheduler.core.ends import EndKind
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import run_build
from scheduler.triggers.registry import get_trigger

log = logging.getLogger(__name__)
# Overlap policies that look at the schedule's active runs (the others queue every fire).
OVERLAP_NEEDS_ACTIVE = frozenset(OVERLAP_POLICIES) - {ALLOW_ALL, BUFFER_ALL}


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


@dataclass
class _Plan:
    """What one due schedule's fire comes to, computed before any write."""

    schedule: Schedule
    first: datetime  # the next_fire_at it was read with: the guard of its compare-and-set
    fires: list[datetime] = field(default_factory=list)
    nxt: datetime | None = None
    parked: bool = False  # its plugin went away or refuses its config: next_fire_at becomes empty


@dataclass(frozen=True)
class Fired:
    """A tick's fires: the runs queued, and the first fire time within its look-ahead (not fired yet), or None."""

    runs: int
    next_fire_at: datetime | None = None


def fire_due_schedules(*, now: datetime, limit: int = 500) -> int:
    """Turn due time-based schedules into runs; returns how many runs were queued (`fire_due` without look-ahead)."""
    return fire_due(now=now, limit=limit).runs


def fire_due(*, now: datetime, limit: int = 500, lookahead: timedelta = timedelta(0)) -> Fired:
    """Turn due time-based schedules into runs.

    The statements do not grow with the number of due schedules: the due
    query; one guarded UPDATE that moves every due schedule's `next_fire_at`
    from the value it was read with (a schedule another dispatcher moved
    first fails its guard and is not this dispatcher's to fire); the active
    runs of the schedules whose overlap policy needs them; one bulk INSERT of
    the runs, which skips a fire whose run exists already. Only a policy's refusal
    (a SKIPPED run, a cancelled active run) costs statements of its own.

    The due query also reads the schedules due within `lookahead` after `now`, without firing them. The first fire
    time within it, theirs or a next fire this call set, is returned: the dispatch loop wakes for it instead of at
    its next poll (loops.py).
    """
    read = list(
        Schedule.objects.filter(enabled=True, next_fire_at__lte=now + lookahead)
        .order_by("next_fire_at")
        .only("id", "name", "trigger_kind", "trigger_config", "timezone", "catchup", "max_catchup", "next_fire_at",
              "last_fire_at", "params", "priority", "workload_class_id", "retry_max_attempts", "overlap_policy",
              "watermark_config")[:limit]
    )
    due = [schedule for schedule in read if schedule.next_fire_at <= now]
    soon = next((schedule.next_fire_at for schedule in read if schedule.next_fire_at > now), None)
    if not due:
        return Fired(0, soon)
    plans = _plan(due, now=now)
    runs: list[Run] = []
    # one transaction and one bulk insert per tick: per-schedule commits and
    # savepoints cost more than the work (bench scenario 3)
    with transaction.atomic():
        won = _advance(plans)
        firing = [p for p in plans if p.schedule.pk in won and not p.parked]
        active = _active_runs([p.schedule for p in firing if p.schedule.overlap in OVERLAP_NEEDS_ACTIVE])
        for plan in firing:
            runs.extend(_decide(plan, now=now, active=active.get(plan.schedule.pk, [])))
        # the unique (schedule, trigger_key) constraint refuses a fire whose run exists
        # already (a double fire that raced past the guard): it is skipped, not counted
        queued = bulk.insert(Run, runs, ignore_conflicts=True)
    within = [t for t in (soon, *(p.nxt for p in firing)) if t is not None and t <= now + lookahead]
    return Fired(queued, min(within, default=None))


def _plan(due: list[Schedule], *, now: datetime) -> list[_Plan]:
    """The fires and the next fire of every due schedule (pure computation, no write).

    Schedules that share a trigger, a zone, a catch-up bound and a due time
    (every "0 * * * *" schedule at the top of the hour) share one computation:
    it is a function of those alone.
    """
    plans: list[_Plan] = []
    memo: dict[tuple, tuple[list[datetime], datetime | None]] = {}
    for schedule in due:
        keep = max(1, schedule.max_catchup) if schedule.catchup == CatchupPolicy.ALL else 1
        key = (schedule.trigger_kind, json.dumps(schedule.trigger_config, sort_keys=True, default=str),
               schedule.timezone, schedule.next_fire_at, keep)
        try:
            if key not in memo:
                memo[key] = (fires_to_run(schedule, now=now), compute_next_fire(schedule, after=now))
        except ConfigError:
            # A plugin that went away (uninstalled) or a config it now refuses:
            # park the schedule instead of failing every tick for everyone.
            log.exception("schedule %s cannot compute its fires; it will not fire until it is saved again",
                          schedule.name)
            plans.append(_Plan(schedule, schedule.next_fire_at, parked=True))
            continue
        fires, nxt = memo[key]
        plans.append(_Plan(schedule, schedule.next_fire_at, list(fires), nxt))
    return plans


def _advance(plans: list[_Plan]) -> set[int]:
    """Move every planned schedule's next_fire_at, guarded by the value it was read with; the ids moved here."""
    def last(plan: _Plan) -> datetime | None:
        return plan.fires[-1] if plan.fires else plan.schedule.last_fire_at

    if not bulk.supported():
        # SQLite before 3.35: one compare-and-set per schedule
        return {p.schedule.pk for p in plans
                if Schedule.objects.filter(pk=p.schedule.pk, next_fire_at=p.first).update(
                    next_fire_at=p.nxt, last_fire_at=last(p))}
    return bulk.cas_update(
        Schedule,
        columns=[("id", "id"), ("old_next", "next_fire_at"), ("new_next", "next_fire_at"),
                 ("new_last", "last_fire_at")],
        rows=[(p.schedule.pk, p.first, p.nxt, last(p)) for p in plans],
        assign="next_fire_at = v.new_next, last_fire_at = v.new_last",
        guard="t.next_fire_at = v.old_next",
    )


def _active_runs(schedules: list[Schedule]) -> dict[int, list[ActiveRun]]:
    """The active live runs of `schedules`, oldest first, for their overlap policies (one query, or none)."""
    active: dict[int, list[ActiveRun]] = defaultdict(list)
    if not schedules:
        return active
    for schedule_id, run_id, status in (
        Run.objects.filter(schedule_id__in=[s.pk for s in schedules], status__in=RunStatus.active(),
                           backfill__isnull=True)
        .order_by("id").values_list("schedule_id", "id", "status")
    ):
        active[schedule_id].append(ActiveRun(run_id, status))
    return active


def _decide(plan: _Plan, *, now: datetime, active: list[ActiveRun]) -> list[Run]:
    """The unsaved runs of a schedule this dispatcher moved forward.

    The catch-up policy decides what missed fires become and the overlap
    policy what a fire becomes while a run is active; a fire that may not run
    is a SKIPPED run with the reason, never dropped silently.
    """
    schedule = plan.schedule
    grace = timedelta(seconds=settings.ETL_CATCHUP_GRACE_SECONDS)
    decided = decide_catchup(schedule.catchup, plan.fires, now=now, grace=grace, first=plan.first)
    overlap = decide_overlap(schedule.overlap, active, [f.at for f in decided if not f.skip_reason])
    if overlap.cancel:
        _cancel_active(overlap.cancel, reason=overlap.cancel_reason, now=now, force=overlap.force)
    skipped = [f for f in decided if f.skip_reason] + [f for f in overlap.fires if f.skip_reason]
    for fire in sorted(skipped, key=lambda f: f.at):
        # rare (a policy said no): one insert each, through the owner of final statuses
        run_refused(schedule=schedule, status=RunStatus.SKIPPED, reason=fire.skip_reason,
                    trigger_kind=schedule.trigger_kind, trigger_key=fire_key(schedule.trigger_kind, fire.at),
                    logical_time=fire.at, triggered_by=schedule.trigger_kind, now=now)
    return [
        run_build(
            schedule=schedule,
            trigger_kind=schedule.trigger_kind,
            trigger_key=fire_key(schedule.trigger_kind, f.at),
            logical_time=f.at,
            triggered_by=schedule.trigger_kind,
            now=now,
        )
        for f in overlap.fires
        if not f.skip_reason
    ]


def _cancel_active(run_ids: list[int], *, reason: str, now: datetime, force: bool = False) -> None:
    """cancel_other / terminate_other: the active runs make way, through the public cancel service.

    A running one is asked to stop (terminate_other: killed at once); it keeps its slot and the serial gate until
    its work has ended, so the new run starts only then."""
    for run in Run.objects.filter(pk__in=run_ids, status__in=RunStatus.active()).select_related("schedule"):
        try:
            # cancel_other outranks a timeout the old run is stopping on: it ends CANCELLED, never re-queued
            # ahead of the fire that replaces it
            run_cancel(run=run, actor="scheduler", reason=reason, now=now, force=force, kind=EndKind.CANCEL_OTHER)
        except ServiceError:
            pass  # it finished meanwhile: nothing to make way for
