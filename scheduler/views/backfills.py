"""Backfills: list with progress, a live grid of windows, submit and control."""

from __future__ import annotations

import math
from datetime import timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_safe
from django_htmx.http import HttpResponseStopPolling

from scheduler import selectors
from scheduler import backfill_report
from scheduler.core import ConfigError, split_windows
from scheduler.models import Backfill, BackfillStatus, Schedule, WindowStatus
from scheduler.services.admission import backfills as backfill_services
from scheduler.services.common.errors import ServiceError
from scheduler.views.common import action, can, int_or_none, page, partial, require, team_scope
from scheduler.views.forms import BackfillForm, ReasonForm, ScheduleBackfillForm, scoped

# the service names its inputs from / to / window; the form's fields are longer
SERVICE_FIELDS = {"from": "range_from", "to": "range_to", "window": "window_size"}


def _errors_on_form(form, exc: ServiceError, field_for) -> None:
    """Every problem of a refused submit under the form field `field_for(service field)` names, each said once;
    a problem with no such field on the form is said above it."""
    for error in exc.errors:
        name = (error.field or "").split(".")[0]
        field = field_for(name)
        if field is not None and field in form.fields:
            form.add_error(field, error.message_under(name))
        else:
            form.add_error(None, str(error))
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
    scope = team_scope(request)
    context = {"backfills": selectors.backfills_with_progress(scope["team_ids"])[:100],
               "form": scoped(BackfillForm(initial=initial), request.user),
               "watermarked": _watermarked(scope["team_ids"]), **scope}
    return render(request, partial(request, "scheduler/backfills.html", "table"), context)


def _watermarked(team_ids) -> list[Schedule]:
    """The schedules a backfill can replay (those with a watermark), for the links to their forms."""
    schedules = selectors.owned_by(Schedule.objects.order_by("name"), team_ids, path="owner_id")
    return [s for s in schedules.only("id", "name", "watermark_config", "timezone") if s.watermark_config]


@action("scheduler.manage_backfill")
def backfill_submit(request):
    form = scoped(BackfillForm(request.POST), request.user)
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
                newest_first=data["order"] == "newest",
                reprocess=data["reprocess"],
                requested_by=request.user,
            )
        except ServiceError as exc:
            _errors_on_form(form, exc, lambda name: SERVICE_FIELDS.get(name, name))
        else:
            messages.success(request, f"Backfill {backfill.pk} submitted with {backfill.total_windows} windows.")
            return redirect("scheduler:backfill_detail", backfill_id=backfill.pk)
    scope = team_scope(request)
    context = {"backfills": selectors.backfills_with_progress(scope["team_ids"])[:100], "form": form,
               "watermarked": _watermarked(scope["team_ids"]), **scope}
    return render(request, "scheduler/backfills.html", context, status=400)


def _backfill_form(schedule: Schedule, data=None) -> ScheduleBackfillForm | None:
    """The schedule's backfill form (None: it has no watermark, so nothing to backfill)."""
    config = schedule.watermark_config or None
    if config is None:
        return None
    return ScheduleBackfillForm(data, zone=ZoneInfo(schedule.timezone or "UTC"),
                                datetime_mark=config.get("type") == "datetime")


def _about(seconds: float) -> str:
    if seconds < 90:
        return f"about {max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def _preview(schedule: Schedule, form: ScheduleBackfillForm) -> dict:
    """How many windows, of what size, and how long at the schedule's recent run time; or the first problem."""
    form.is_valid()
    problems = [(f, e) for f, e in form.errors.items() if f != "reason"]  # the reason is asked at submit only
    if problems:
        field, errors = problems[0]
        return {"error": f"{field}: {errors[0]}" if field != "__all__" else errors[0]}
    start, end, size = form.range()
    try:
        if start >= end:
            return {"error": "to: must be after from"}
        pairs = split_windows(start, end, size, max_windows=settings.ETL_MAX_BACKFILL_WINDOWS)
    except ConfigError as exc:
        return {"error": f"{exc.field}: {str(exc).removeprefix(exc.field + ': ')}"}
    except (OverflowError, ValueError) as exc:
        return {"error": f"to: {exc}"}
    total = len(pairs)
    skipped = 0
    if form.cleaned_data["reprocess"] == "failed":
        skipped = len(_service("backfill_already_succeeded")(schedule, pairs))
        if skipped == total:
            return {"error": f"reprocess: all {total} windows already succeeded; nothing to reprocess"}
    count = total - skipped
    typical = backfill_report.typical_window_seconds(schedule, size)
    preview = {"count": count, "total": total, "skipped": skipped, "words": form.window_words(), "typical": typical,
               "shorter": count > 1 and pairs[-1][1] - pairs[-1][0] != pairs[0][1] - pairs[0][0],
               "parallel": form.cleaned_data["max_parallel"], "first": pairs[0], "last": pairs[-1]}
    if typical is not None:
        preview["eta"] = _about(math.ceil(count / preview["parallel"]) * typical)
    return preview


@page("scheduler.view_schedule")
def schedule_backfill(request, schedule_id: int):
    """The backfill form of this schedule, for anyone who sees the schedule (it says who may submit)."""
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    form = _backfill_form(schedule)
    if form is not None and form.datetime_mark:  # the last seven whole days in the schedule's zone
        today = timezone.now().astimezone(form.zone).date()
        form.initial.update(from_date=today - timedelta(days=7), to_date=today, from_time="00:00",
                            to_time="00:00", window_count=1, window_unit="days")
    return _backfill_page(request, schedule, form)


def _backfill_page(request, schedule: Schedule, form, *, status: int = 200):
    context = {"schedule": schedule, "form": form, "zone": schedule.timezone or "UTC",
               "preview": _preview(schedule, form) if form is not None and form.is_bound else None}
    return render(request, "scheduler/schedule_backfill.html", context, status=status)


@action("scheduler.manage_backfill")
def schedule_backfill_submit(request, schedule_id: int):
    """Submit the form: a backfill, or the form again with each bad field named (and nothing created)."""
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    form = _backfill_form(schedule, request.POST)
    if form is None:
        messages.error(request, f"schedule: '{schedule.name}' has no watermark config; nothing to backfill")
        return redirect("scheduler:schedule_backfill", schedule_id=schedule.pk)
    if form.is_valid():
        start, end, size = form.range()
        try:
            backfill = _service("backfill_submit")(
                schedule=schedule, start=start, end=end, window=size, reason=form.cleaned_data["reason"],
                max_parallel=form.cleaned_data["max_parallel"], params=form.cleaned_data["params"],
                newest_first=form.cleaned_data["order"] == "newest", reprocess=form.cleaned_data["reprocess"],
                requested_by=request.user,
            )
        except ServiceError as exc:
            # the service's from/to speak of UTC instants, not of the form's day and time fields: said page-wide
            _errors_on_form(form, exc, lambda name: None if name in ("from", "to") else form.field_for(name))
        else:
            messages.success(request, f"Backfill {backfill.pk} submitted with {backfill.total_windows} windows.")
            return redirect("scheduler:backfill_detail", backfill_id=backfill.pk)
    return _backfill_page(request, schedule, form, status=400)


@require_safe
@can("scheduler.view_schedule")
def schedule_backfill_preview(request, schedule_id: int):
    """The live preview under the form (htmx): the window count and an ETA; nothing is created."""
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    form = _backfill_form(schedule, request.GET)
    context = {"schedule": schedule, "preview": _preview(schedule, form) if form is not None else None}
    return render(request, "scheduler/schedule_backfill.html#preview", context)


GRID_CELLS = 400  # the grid never draws more cells than this: larger backfills get a cell per block of windows
WINDOW_PAGE = 100  # windows listed per page under the grid


def _progress(backfill: Backfill, counts: dict[str, int]) -> dict:
    total = backfill.total_windows or sum(counts.values())
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
        # changes whenever any window changes status: the grid reloads only then
        "signature": "-".join(str(counts[s]) for s in WindowStatus.values),
    }


@page("scheduler.view_backfill")
def backfill_detail(request, backfill_id: int):
    """The page; its poll asks only for the summary (one COUNT query) and reloads the grid when that changed."""
    backfill = get_object_or_404(Backfill.objects.select_related("schedule"), pk=backfill_id)
    progress = _progress(backfill, backfill_report.backfill_counts(backfill))
    open_windows = sum(progress["counts"][s] for s in OPEN_WINDOWS)
    finished = backfill.status in (BackfillStatus.COMPLETED, BackfillStatus.CANCELLED) and not open_windows
    status_text, status_class = backfill_report.status_words(backfill.status, progress["failed"])
    context = {"backfill": backfill, "progress": progress, "finished": finished, "statuses": WindowStatus.choices,
               "status_text": status_text, "status_class": status_class}
    part = request.GET.get("part")
    if request.htmx and part not in ("grid", "windows"):  # the poll (and any other htmx request): the summary
        response = render(request, "scheduler/backfill_detail.html#summary", context)
        if request.GET.get("seen") != progress["signature"]:
            response["HX-Trigger"] = "backfill-changed"
        # the last swap shows the final numbers; 286 tells htmx to stop polling
        return HttpResponseStopPolling(response.content, headers=response.headers) if finished else response
    if part != "windows":
        context["grid"] = backfill_report.backfill_grid(backfill, cells=GRID_CELLS)
    if request.htmx and part == "grid":
        return render(request, "scheduler/backfill_detail.html#grid", context)
    # the table under the grid reloads with it (on the summary's "backfill-changed"): one live state on the page
    start = max(0, min(int_or_none(request.GET.get("from")) or 0, max(0, backfill.total_windows - 1)))
    context["page"] = {
        "windows": backfill_report.backfill_window_page(backfill, start=start, size=WINDOW_PAGE),
        "start": start,
        "previous": max(0, start - WINDOW_PAGE) if start else None,
        "next": start + WINDOW_PAGE if start + WINDOW_PAGE < backfill.total_windows else None,
        "size": WINDOW_PAGE,
    }
    if request.htmx and part == "windows":
        return render(request, "scheduler/backfill_detail.html#windows", context)
    return render(request, "scheduler/backfill_detail.html", context)


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
