"""Backfill window progress: a backfill run's end marks its window, and the backfill completes with its last."""
from __future__ import annotations

from datetime import datetime

from django.db.models import Count

from scheduler.models import Backfill, BackfillStatus, BackfillWindow, Run, RunStatus, WindowStatus
from scheduler.services.common.audit import audit_record

S = RunStatus

RUN_TO_WINDOW = {
    S.SUCCEEDED: WindowStatus.SUCCEEDED,
    S.SKIPPED: WindowStatus.SUCCEEDED,
    S.FAILED: WindowStatus.FAILED,
    S.BLOCKED: WindowStatus.FAILED,
    S.CANCELLED: WindowStatus.CANCELLED,
}
OPEN_WINDOWS = (WindowStatus.PENDING, WindowStatus.QUEUED, WindowStatus.RUNNING)


def backfill_window_done(run: Run, *, now: datetime) -> None:
    status = RUN_TO_WINDOW.get(run.status)
    if status is None:
        return
    BackfillWindow.objects.filter(backfill_id=run.backfill_id, run_id=run.pk).update(status=status)
    backfill = Backfill.objects.filter(pk=run.backfill_id).first()
    if backfill is not None:
        backfill_complete_if_done(backfill, now=now)


def backfill_complete_if_done(backfill: Backfill, *, now: datetime) -> None:
    """An active backfill with no open window left is COMPLETED (audited)."""
    if backfill.status != BackfillStatus.ACTIVE:
        return
    if BackfillWindow.objects.filter(backfill=backfill, status__in=OPEN_WINDOWS).exists():
        return
    if Backfill.objects.filter(pk=backfill.pk, status=BackfillStatus.ACTIVE).update(
        status=BackfillStatus.COMPLETED, finished_at=now
    ):
        progress = backfill_progress(backfill)
        audit_record(actor="dispatcher", action="backfill.complete", target=backfill,
                     before={"status": BackfillStatus.ACTIVE}, after={"status": BackfillStatus.COMPLETED, **progress},
                     at=now)
        backfill.status, backfill.finished_at = BackfillStatus.COMPLETED, now


def backfill_progress(backfill: Backfill) -> dict[str, int]:
    """done / failed / running / queued / pending / cancelled / total window counts."""
    counts = dict(
        BackfillWindow.objects.filter(backfill=backfill).values_list("status").annotate(n=Count("id")).order_by()
    )
    return {
        "total": backfill.total_windows,
        "done": counts.get(WindowStatus.SUCCEEDED, 0),
        "failed": counts.get(WindowStatus.FAILED, 0),
        "running": counts.get(WindowStatus.RUNNING, 0),
        "queued": counts.get(WindowStatus.QUEUED, 0),
        "pending": counts.get(WindowStatus.PENDING, 0),
        "cancelled": counts.get(WindowStatus.CANCELLED, 0),
    }


__all__ = ["OPEN_WINDOWS", "RUN_TO_WINDOW", "backfill_complete_if_done", "backfill_progress", "backfill_window_done"]
