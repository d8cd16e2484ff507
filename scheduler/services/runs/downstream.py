"""Downstream propagation: a live run's end starts, joins or blocks the runs of its dependent schedules.

Called by scheduler/services/runs/end.py inside the transaction that made the
run final; blocking goes on transitively (breadth first, each run once).
"""
from __future__ import annotations

from collections import deque
from datetime import datetime

from scheduler.models import Run, RunStatus, Schedule, TriggerKind
from scheduler.services.runs import dependencies
from scheduler.services.runs.breakers import breaker_trial_released
from scheduler.services.runs.transitions import finalize, run_refused
from scheduler.services.runs.queue import run_enqueue

S = RunStatus
ACTIVE_WAITING = (S.QUEUED, S.WAITING)


def _root(run: Run) -> int:
    """The run whose failure started a chain of blocks (itself when it is not a propagated block)."""
    if run.status == S.BLOCKED and run.trigger_key.startswith("blocked:"):
        return int(run.trigger_key.split(":", 1)[1])
    return run.pk


def _root_note(run: Run) -> str:
    root_id = _root(run)
    if root_id == run.pk:
        return ""
    root = Run.objects.filter(pk=root_id).select_related("schedule").only("id", "status", "schedule__name").first()
    if root is None:
        return ""
    return f"; root cause: '{root.schedule.name}' {root.status.lower()} (run {root.pk})"


def children_of(schedule_ids: set[int]) -> dict[int, list[int]]:
    """The enabled downstream schedules of each of `schedule_ids` (by name), in one query."""
    children: dict[int, list[int]] = {pk: [] for pk in schedule_ids}
    for upstream, child in (
        Schedule.depends_on.through.objects.filter(to_schedule_id__in=schedule_ids, from_schedule__enabled=True)
        .order_by("from_schedule__name").values_list("to_schedule_id", "from_schedule_id")
    ):
        children[upstream].append(child)
    return children


def propagate(run: Run, *, now: datetime, children: dict[int, list[int]] | None = None) -> None:
    """Start or block the dependents of a final live run, transitively (breadth first, each once).

    `children` (schedule id -> downstream schedule ids) is what a batch looked
    up already; schedules missing from it are looked up (and added) here.
    """
    children = {} if children is None else children
    queue: deque[Run] = deque([run])
    seen: set[int] = set()
    while queue:
        current = queue.popleft()
        if current.pk in seen:
            continue
        seen.add(current.pk)
        if current.schedule_id not in children:
            children.update(children_of({current.schedule_id}))
        queue.extend(_propagate_one(current, now=now, child_ids=children[current.schedule_id]))


def _propagate_one(run: Run, *, now: datetime, child_ids: list[int]) -> list[Run]:
    """Start, join or block the direct downstream runs of `run`; return newly blocked runs (to go on down).

    A downstream run is judged on the upstream runs it stands for
    (dependencies.verdicts), so a later run of the same upstream neither
    holds back nor blocks a run that stands for an earlier one.
    """
    newly_blocked: list[Run] = []
    for child_id in child_ids:
        # The row lock serialises two upstreams finishing at once, so the
        # child gets one run, not one per upstream (PostgreSQL; SQLite
        # writers are serialised already).
        child = Schedule.objects.select_for_update().get(pk=child_id)
        active = list(Run.objects.filter(schedule=child, status__in=ACTIVE_WAITING, backfill__isnull=True)
                      .select_related("schedule"))
        upstream_kind = child.trigger_kind == TriggerKind.UPSTREAM
        if upstream_kind:
            # a waiting downstream run that does not stand for a run of this upstream yet stands for this one
            for waiting in active:
                dependencies.pin(waiting, run)
        subjects = dependencies.subjects_for(active)
        new_key = "new"
        if upstream_kind and not active:
            subjects.append(dependencies.Subject(new_key, child, dependencies.logical_time_of(run),
                                                 {run.schedule_id: (run.pk, run.status)}))
        verdicts = dependencies.verdicts(subjects)
        for waiting in active:
            verdict = verdicts[waiting.pk]
            if verdict.action != "block":
                continue
            reason = (verdict.reason + _root_note(run))[:500]
            if finalize(waiting, new=S.BLOCKED, now=now, reason=reason, blocked_by=verdict.upstream):
                dependencies.record_matches(waiting, verdict)
                breaker_trial_released(schedule_id=waiting.schedule_id, run_id=waiting.pk, now=now)
                newly_blocked.append(waiting)
        if new_key not in verdicts:
            continue
        verdict = verdicts[new_key]
        if verdict.action == "block":
            # One blocked run per failure chain: the key names the root run,
            # so a diamond reaching the child twice creates it once.
            blocked = run_refused(
                schedule=child, status=S.BLOCKED, reason=(verdict.reason + _root_note(run))[:500],
                blocked_by=verdict.upstream, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"blocked:{_root(run)}",
                triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
            )
            if blocked is not None:
                dependencies.record_matches(blocked, verdict)
                newly_blocked.append(blocked)
        elif run.status != S.CANCELLED:
            # admit now, or wait (as a WAITING run) for the other upstreams; a
            # failed upstream only gets here when the condition tolerates it
            created = run_enqueue(
                schedule=child, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"upstream:{run.pk}",
                triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
            )
            if created is not None:
                dependencies.pin(created, run)
    return newly_blocked


__all__ = ["children_of", "propagate"]
