"""Why a queued or waiting run has not started yet: the read side of the gate (pages, commands, the host)."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from scheduler.core.overlap import SERIAL_POLICIES
from scheduler.models import BackfillStatus, BreakerStatus, Run, RunStatus
from scheduler.services.admission.clusters import is_unknown_target_reason, unknown_target_deadline
from scheduler.services.admission.dispatch import _held_back
from scheduler.services.runs import dependencies

S = RunStatus


def explain_wait(run: Run, now: datetime) -> str:
    """One line saying why a QUEUED or WAITING run has not started yet."""
    if run.status == S.WAITING:
        verdict = dependencies.verdict_for(run)
        return verdict.reason or run.reason or "waiting for upstreams"
    if run.status != S.QUEUED:
        return f"not waiting: the run is {run.status}"
    if is_unknown_target_reason(run.reason):
        return f"{run.reason} (it waits for new code until {unknown_target_deadline(run):%Y-%m-%d %H:%M:%S} UTC)"
    schedule = run.schedule
    if run.backfill_id is not None and run.backfill.status != BackfillStatus.ACTIVE:
        return f"backfill {run.backfill_id} {run.backfill.status.lower()}"
    if run.not_before is not None and run.not_before > now:
        return f"retry not before {run.not_before:%Y-%m-%d %H:%M:%S} UTC"
    if run.backfill_id is None and schedule.depends_on.exists():
        verdict = dependencies.verdict_for(run)
        if verdict.action != "admit":
            return verdict.reason
    running_watermarked = set()
    if run.backfill_id is None and schedule.overlap in SERIAL_POLICIES:
        ahead = (Run.objects.filter(schedule_id=schedule.pk, status=S.RUNNING, backfill__isnull=True)
                 .values("pk", "stop_requested_at", "stop_kind").first())
        if ahead is not None and ahead["stop_requested_at"] is not None:
            return (f"previous run {ahead['pk']} of this schedule is stopping ({ahead['stop_kind']}); "
                    "this one starts once its work has ended")
        if ahead is not None:
            running_watermarked.add(schedule.pk)
    held = _held_back(run, now=now, running_watermarked=running_watermarked)
    if held:
        return held
    if schedule.breaker_status == BreakerStatus.OPEN and schedule.breaker_opened_at is not None:
        until = schedule.breaker_opened_at + timedelta(seconds=schedule.breaker_current_cooldown_seconds or 0)
        if until > now:
            return f"circuit open until {until:%Y-%m-%d %H:%M:%S} UTC"
    wc = run.workload_class
    in_use = Run.objects.filter(status=S.RUNNING, workload_class_id=wc.pk).count()
    if in_use >= wc.concurrency_limit:
        return f"class '{wc.name}' full ({in_use}/{wc.concurrency_limit})"
    ahead = Run.objects.filter(status=S.QUEUED, workload_class_id=wc.pk).filter(
        Q(priority__gt=run.priority)
        | Q(priority=run.priority, queued_at__lt=run.queued_at)
        | Q(priority=run.priority, queued_at=run.queued_at, id__lt=run.pk)
    ).count()
    return f"position {ahead + 1} in queue"


__all__ = ["explain_wait"]
