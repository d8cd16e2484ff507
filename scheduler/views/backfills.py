"""Backfills: list with progress, a live grid of windows, submit and control."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django_htmx.http import HttpResponseStopPolling

from scheduler import selectors
from scheduler.models import Backfill, BackfillStatus, WindowStatus
from scheduler.services import backfills as backfill_services
from scheduler.services.errors import ServiceError
from scheduler.views.common import action, page, partial, require
from scheduler.views.forms import BackfillForm, ReasonForm

# the service names its inputs from / to / window; the form's fields are longer
SERVICE_FIELDS = {"from": "range_from", "to": "range_to", "window": "window_size"}
OPEN_WINDOWS = {WindowStatus.PENDING, WindowStatus.QUEUED, WindowStatus.RUNNING}


def _service(name: str):
    """The backfill service by name; a missing one is a clear refusal, not a crash."""
    fn = getattr(backfill_services, name, None)
    if fn is None:
        raise ServiceError(f"{name} is not available in this version", field="backfill")
    return fn


@page("scheduler.view_backfill")
def backfill_list(request):
    initial = {"schedule": request.GET.get("schedule")} if request.GET.get("schedule") else None
    context = {"backfills": selectors.backfills_with_progress()[:100], "form": BackfillForm(initial=initial)}
    return render(request, partial(request, "scheduler/backfills.html", "table"), context)


@action("scheduler.manage_backfill")
def backfill_submit(request):
    form = BackfillForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        require(request, "scheduler.manage_backfill", data["schedule"])
        try:
            backfill = _service("backfill_submit")(
                schedule=data["schedule"],
                start=data["range_from"],
                end=data["range_to"],
                window=data["window_size"],
                reason=data["reason"],
                max_parallel=data["max_parallel"],
                params=data["params"],
                requested_by=request.user,
            )
        except ServiceError as exc:
            for error in exc.errors:  # every problem under its own field, each said once
                name = (error.field or "").split(".")[0]
                field = SERVICE_FIELDS.get(name, name)
                if field in form.fields:
                    form.add_error(field, error.message_under(name))
                else:
                    form.add_error(None, str(error))
        else:
            messages.success(request, f"Backfill {backfill.pk} submitted with {backfill.total_windows} windows.")
            return redirect("scheduler:backfill_detail", backfill_id=backfill.pk)
    context = {"backfills": selectors.backfills_with_progress()[:100], "form": form}
    return render(request, "scheduler/backfills.html", context, status=400)


def _progress(backfill: Backfill, windows) -> dict:
    counts = {status: 0 for status in WindowStatus.values}
    for window in windows:
        counts[window.status] += 1
    total = backfill.total_windows or len(windows)
    done = counts[WindowStatus.SUCCEEDED]
    failed = counts[WindowStatus.FAILED]
    return {
        "total": total,
        "done": done,
        "failed": failed,
        "counts": counts,
        "running": counts[WindowStatus.QUEUED] + counts[WindowStatus.RUNNING],
        "pending": counts[WindowStatus.PENDING],
        "cancelled": counts[WindowStatus.CANCELLED],
        # a cancelled window is settled too: a cancelled backfill's bar reaches its end
        "settled": done + failed + counts[WindowStatus.CANCELLED],
        "percent": round(100 * (done + failed + counts[WindowStatus.CANCELLED]) / total) if total else 100,
    }


@page("scheduler.view_backfill")
def backfill_detail(request, backfill_id: int):
    backfill = get_object_or_404(Backfill.objects.select_related("schedule"), pk=backfill_id)
    windows = selectors.backfill_windows(backfill)
    progress = _progress(backfill, windows)
    finished = backfill.status in (BackfillStatus.COMPLETED, BackfillStatus.CANCELLED) and not any(
        w.status in OPEN_WINDOWS for w in windows
    )
    context = {
        "backfill": backfill,
        "windows": windows,
        "progress": progress,
        "finished": finished,
        "statuses": WindowStatus.choices,
    }
    if request.htmx and finished:
        # the last swap shows the final grid; 286 tells htmx to stop polling
        response = render(request, "scheduler/backfill_detail.html#grid", context)
        return HttpResponseStopPolling(response.content)
    return render(
        request, "scheduler/backfill_detail.html#grid" if request.htmx else "scheduler/backfill_detail.html", context
    )


def _control(request, backfill_id: int, service: str, done: str) -> HttpResponse:
    backfill = get_object_or_404(Backfill, pk=backfill_id)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        _service(service)(backfill=backfill, actor=request.user, reason=reason or f"{done} from the dashboard")
        messages.success(request, f"Backfill {backfill.pk} {done}.")
    except ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("scheduler:backfill_detail", backfill_id=backfill.pk)


@action("scheduler.manage_backfill")
def backfill_pause(request, backfill_id: int):
    return _control(request, backfill_id, "backfill_pause", "paused")


@action("scheduler.manage_backfill")
def backfill_resume(request, backfill_id: int):
    return _control(request, backfill_id, "backfill_resume", "resumed")


@action("scheduler.manage_backfill")
def backfill_cancel(request, backfill_id: int):
    return _control(request, backfill_id, "backfill_cancel", "cancelled")


@action("scheduler.manage_backfill")
def backfill_retry(request, backfill_id: int):
    return _control(request, backfill_id, "backfill_retry_failed", "failed windows queued again")
