"""What follows a run's final status: downstream runs, transitive blocking, backfill progress."""
from __future__ import annotations

from collections import deque
from datetime import datetime

from scheduler.models import Run, RunStatus, Schedule, TriggerKind
from scheduler.services import dependencies
from scheduler.services.runs import run_enqueue, run_transition

ACTIVE_WAITING = (RunStatus.QUEUED, RunStatus.WAITING)


def _root(run: Run) -> int:
    """The run whose failure started a chain of blocks (itself when it is not a propagated block)."""
    if run.status == RunStatus.BLOCKED and run.trigger_key.startswith("blocked:"):
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


def on_run_final(run: Run, *, now: datetime) -> None:
    """Call inside the transaction that made `run` final."""
    if run.backfill_id is not None:
        from scheduler.services.backfills import backfill_on_run_final

        backfill_on_run_final(run, now=now)
        return  # backfill windows never drive the live dependency graph
    if run.status in (RunStatus.CANCELLED, RunStatus.SKIPPED, RunStatus.BLOCKED):
        # a trial that ends without a verdict must not keep the breaker half-open forever
        from scheduler.services.breakers import breaker_trial_released

        breaker_trial_released(schedule_id=run.schedule_id, run_id=run.pk, now=now)
    if run.status == RunStatus.CANCELLED or not run.propagate:
        return  # a person stopped it, or re-ran just this one: downstreams neither start nor block
    queue: deque[Run] = deque([run])
    seen: set[int] = set()
    while queue:
        current = queue.popleft()
        if current.pk in seen:
            continue
        seen.add(current.pk)
        queue.extend(_propagate(current, now=now))


def _propagate(run: Run, *, now: datetime) -> list[Run]:
    """Start or block the direct downstreams of `run`; return newly blocked runs (to go on down)."""
    newly_blocked: list[Run] = []
    child_ids = list(
        Schedule.objects.filter(depends_on=run.schedule_id, enabled=True).order_by("name").values_list("id", flat=True)
    )
    for child_id in child_ids:
        # The row lock serialises two upstreams finishing at once, so the
        # child gets one run, not one per upstream (PostgreSQL; SQLite
        # writers are serialised already).
        child = Schedule.objects.select_for_update().get(pk=child_id)
        verdict = dependencies.evaluate(child)
        active = list(Run.objects.filter(schedule=child, status__in=ACTIVE_WAITING, backfill__isnull=True))
        if verdict.action == "block":
            reason = (verdict.reason + _root_note(run))[:500]
            for waiting in active:
                if run_transition(waiting, new=RunStatus.BLOCKED, now=now, reason=reason, blocked_by=verdict.upstream):
                    newly_blocked.append(waiting)
            if not active and child.trigger_kind == TriggerKind.UPSTREAM:
                # One blocked run per failure chain: the key names the root run,
                # so a diamond reaching the child twice creates it once.
                blocked = run_enqueue(
                    schedule=child, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"blocked:{_root(run)}",
                    status=RunStatus.BLOCKED, reason=reason, blocked_by=verdict.upstream,
                    triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
                )
                if blocked is not None:
                    newly_blocked.append(blocked)
        elif child.trigger_kind == TriggerKind.UPSTREAM and not active and _counts_as_completion(run):
            # admit now, or wait (as a WAITING run) for the other upstreams
            run_enqueue(
                schedule=child, trigger_kind=TriggerKind.UPSTREAM, trigger_key=f"upstream:{run.pk}",
                triggered_by=f"upstream:{run.schedule.name}", logical_time=run.logical_time, now=now,
            )
    return newly_blocked


def _counts_as_completion(run: Run) -> bool:
    # A failed or blocked upstream only starts a child whose condition
    # tolerates it (ALL_DONE, ANY_SUCCESS still waiting on others); the
    # verdict has already said "not blocked" when we get here.
    return run.status in RunStatus.final() and run.status != RunStatus.CANCELLED
