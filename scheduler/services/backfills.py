"""Backfills: windows created up front, pumped into the queue oldest first."""
from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Count

from scheduler.models import Backfill, BackfillStatus, BackfillWindow, RunStatus, TriggerKind, WindowStatus
from scheduler.services.runs import run_enqueue

S = RunStatus
RUN_TO_WINDOW = {
    S.SUCCEEDED: WindowStatus.SUCCEEDED,
    S.SKIPPED: WindowStatus.SUCCEEDED,
    S.FAILED: WindowStatus.FAILED,
    S.BLOCKED: WindowStatus.FAILED,
    S.CANCELLED: WindowStatus.CANCELLED,
}


def backfill_pump(*, now: datetime) -> int:
    """Queue the next pending windows of each active backfill, up to its max_parallel."""
    created = 0
    for backfill in Backfill.objects.filter(status=BackfillStatus.ACTIVE).select_related("schedule"):
        in_flight = BackfillWindow.objects.filter(
            backfill=backfill, status__in=[WindowStatus.QUEUED, WindowStatus.RUNNING]
        ).count()
        free = backfill.max_parallel - in_flight
        if free <= 0:
            continue
        pending = list(BackfillWindow.objects.filter(backfill=backfill, status=WindowStatus.PENDING).order_by("seq")[:free])
        if not pending:
            _maybe_complete(backfill, now=now)
            continue
        for window in pending:
            with transaction.atomic():
                attempt = window.attempts + 1
                run = run_enqueue(
                    schedule=backfill.schedule, trigger_kind=TriggerKind.BACKFILL,
                    trigger_key=f"backfill:{backfill.pk}:{window.seq}:{attempt}", backfill=backfill,
                    window=(window.low, window.high), triggered_by=backfill.requested_by, now=now,
                )
                if run is None:
                    continue
                if BackfillWindow.objects.filter(pk=window.pk, status=WindowStatus.PENDING).update(
                    status=WindowStatus.QUEUED, run=run, attempts=attempt
                ):
                    created += 1
    return created


def backfill_on_run_final(run, *, now: datetime) -> None:
    status = RUN_TO_WINDOW.get(run.status)
    if status is None:
        return
    BackfillWindow.objects.filter(backfill_id=run.backfill_id, run_id=run.pk).update(status=status)
    backfill = Backfill.objects.filter(pk=run.backfill_id).first()
    if backfill is not None:
        _maybe_complete(backfill, now=now)


def backfill_on_run_started(run) -> None:
    BackfillWindow.objects.filter(backfill_id=run.backfill_id, run_id=run.pk, status=WindowStatus.QUEUED).update(
        status=WindowStatus.RUNNING
    )


def _maybe_complete(backfill: Backfill, *, now: datetime) -> None:
    if backfill.status != BackfillStatus.ACTIVE:
        return
    open_windows = BackfillWindow.objects.filter(
        backfill=backfill, status__in=[WindowStatus.PENDING, WindowStatus.QUEUED, WindowStatus.RUNNING]
    ).exists()
    if not open_windows:
        Backfill.objects.filter(pk=backfill.pk, status=BackfillStatus.ACTIVE).update(
            status=BackfillStatus.COMPLETED, finished_at=now
        )


def backfill_progress(backfill: Backfill) -> dict[str, int]:
    counts = dict(
        BackfillWindow.objects.filter(backfill=backfill).values_list("status").annotate(n=Count("id")).order_by()
    )
    return {
        "total": backfill.total_windows,
        "done": counts.get(WindowStatus.SUCCEEDED, 0),
        "failed": counts.get(WindowStatus.FAILED, 0),
        "running": counts.get(WindowStatus.RUNNING, 0) + counts.get(WindowStatus.QUEUED, 0),
        "pending": counts.get(WindowStatus.PENDING, 0),
        "cancelled": counts.get(WindowStatus.CANCELLED, 0),
    }
