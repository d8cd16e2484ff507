"""/api/v1/backfills: create (or preview), progress, pause, resume, cancel."""
from __future__ import annotations

from django.db import transaction
from ninja import Router, Status

from scheduler.api.common import backfill_by_id, caller, errors, require, schedule_by_name
from scheduler.api.schemas import BackfillIn, BackfillOut, BackfillPreview, ReasonIn
from scheduler.models import Backfill, BackfillWindow
from scheduler.services.admission.backfills import backfill_cancel, backfill_pause, backfill_resume, backfill_submit
from scheduler.services.history.backfill_progress import backfill_progress

router = Router(tags=["backfills"])


class _Preview(Exception):
    """Rolls the preview's transaction back, carrying what it would have created."""

    def __init__(self, result: dict) -> None:
        self.result = result


def backfill_out(backfill: Backfill) -> dict:
    return {
        "id": backfill.pk,
        "schedule": backfill.schedule.name,
        "status": backfill.status,
        "range_from": backfill.range_from,
        "range_to": backfill.range_to,
        "window_size": backfill.window_size,
        "reason": backfill.reason,
        "requested_by": backfill.requested_by,
        "max_parallel": backfill.max_parallel,
        "newest_first": backfill.newest_first,
        "total_windows": backfill.total_windows,
        "created_at": backfill.created_at,
        "finished_at": backfill.finished_at,
        "progress": backfill_progress(backfill),
    }


@router.post("/backfills", response={201: BackfillOut, 200: BackfillPreview, **errors()}, summary="Request a backfill")
def create_backfill(request, payload: BackfillIn):
    """Split [from, to) into windows and queue them; with `preview: true` only count them (nothing changes)."""
    schedule = schedule_by_name(payload.schedule)
    require(request, "scheduler.manage_backfill", schedule)
    submit = {"schedule": schedule, "start": payload.from_, "end": payload.to, "window": payload.window,
              "reason": payload.reason, "requested_by": caller(request), "max_parallel": payload.max_parallel,
              "params": payload.params, "reprocess": payload.reprocess,
              "newest_first": payload.newest_first}
    if not payload.preview:
        return Status(201, backfill_out(backfill_by_id(backfill_submit(**submit).pk)))
    # the preview is the real submit rolled back: the same checks and the same windows, and nothing kept
    try:
        with transaction.atomic():
            backfill = backfill_submit(**submit)
            windows = BackfillWindow.objects.filter(backfill=backfill).order_by("seq")
            first, last = windows.first(), windows.last()
            raise _Preview({"preview": True, "windows": backfill.total_windows,
                            "already_succeeded": backfill.skipped_windows,
                            "first": [first.low, first.high] if first else [],
                            "last": [last.low, last.high] if last else []})
    except _Preview as done:
        return Status(200, done.result)


@router.get("/backfills/{backfill_id}", response={200: BackfillOut, **errors()}, summary="A backfill and its progress")
def get_backfill(request, backfill_id: int):
    backfill = backfill_by_id(backfill_id)
    require(request, "scheduler.view_backfill", backfill)
    return backfill_out(backfill)


def _control(request, backfill_id: int, service, payload: ReasonIn) -> dict:
    backfill = backfill_by_id(backfill_id)
    require(request, "scheduler.manage_backfill", backfill)
    service(backfill=backfill, actor=caller(request), reason=payload.reason)
    return backfill_out(backfill_by_id(backfill_id))


@router.post("/backfills/{backfill_id}/pause", response={200: BackfillOut, **errors(409)}, summary="Pause a backfill")
def pause_backfill(request, backfill_id: int, payload: ReasonIn):
    return _control(request, backfill_id, backfill_pause, payload)


@router.post("/backfills/{backfill_id}/resume", response={200: BackfillOut, **errors(409)}, summary="Resume a backfill")
def resume_backfill(request, backfill_id: int, payload: ReasonIn):
    return _control(request, backfill_id, backfill_resume, payload)


@router.post("/backfills/{backfill_id}/cancel", response={200: BackfillOut, **errors(409)}, summary="Cancel a backfill")
def cancel_backfill(request, backfill_id: int, payload: ReasonIn):
    return _control(request, backfill_id, backfill_cancel, payload)
