"""What follows a run's final status: downstream runs, transitive blocking, backfill progress."""
from __future__ import annotations

from collections import deque
from datetime import datetime

from scheduler.models import Run, RunStatus, Schedule, TriggerKind
from scheduler.services import dependencies
from scheduler.services.runs import run_enqueue, run_transition

ACTIVE_WAITING = (RunStatus.QUEUED, RunStatus.WAITING)


def _root(run: Run) -> int:
    if run.status == RunStatus.BLOCKED and run.trigger_key.startswith("blocked:"):
        return int(run.trigger_key.split(":", 1)[1])
    return run.pk


def on_run_final(run: Run, *, now: datetime) -> None:
    """Call inside the transaction that made `run` final."""
    if run.backfill_id is not None:
        from scheduler.services.backfills import backfill_on_run_final

        backfill_on_run_final(run, now=now)
        return  # backfill windows never drive the live dependency graph
    if run.status == RunStatus.CANCELLED:
        from scheduler.services.breakers import breaker_trial_released

        breaker_trial_released(schedule_id=run.schedule_id, run_id=run.pk, now=now)
        return
    queue: deque[Run] = deque([run])
    seen: set[int] = set()
    while queue:
        current = queue.popleft()
        if current.pk in seen:
            continue
        seen.add(current.pk)
        queue.extend(_propagate(current, now=now))


def _propagate(run: Run, *, now: datetime) -> list[Run]:
    """Start or block the direct downstreams of `run`; return newly blocked runs."""
    newly_blocked: list[Run] = []
    downstream = Schedule.objects.filter(depends_on=run.schedule_id, enabled=True).prefetch_related("depends_on")
    for child in downstream:
        verdict = dependencies.evaluate(child)
        active = list(Run.objects.filter(schedule=child, status__in=ACTIVE_WAITING, backfill__isnull=True))
        if verdict.action == "block":
            for waiting in active:
                if run_transition(waiting, new=RunStatus.BLOCKED, now=now, reason=verdict.reason[:500],
                                  blocked_by=verdict.upstream):
                    newly_blocked.append(waiting)
            if not active and child.trigger_kind == TriggerKind.UPSTREAM:
                blocked = run_enqueue(
                    schedule=child, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"blocked:{_root(run)}",
                    status=RunStatus.BLOCKED, reason=verdict.reason, blocked_by=verdict.upstream,
                    triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
                )
                if blocked is not None:
                    newly_blocked.append(blocked)
        elif run.status in dependencies.SUCCESSISH and child.trigger_kind == TriggerKind.UPSTREAM and not active:
            run_enqueue(
                schedule=child, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"upstream:{run.pk}",
                triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
            )
    return newly_blocked
