"""Acknowledging a schedule's failures from the overview's work list."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from scheduler.models import Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.oversight.failures import ACK_PERM, failure_acknowledge
from scheduler.views.common import action, page
from scheduler.views.forms import AckForm
from scheduler.worklist import failure_worklist


def _item(schedule: Schedule) -> dict | None:
    work = failure_worklist(timezone.now(), team_ids=frozenset({schedule.owner_id}))
    return next((i for state in ("open", "acknowledged", "recovered") for i in work[state]
                 if i["schedule"].pk == schedule.pk), None)


@page("scheduler.view_schedule")
def schedule_failures(request, schedule_id: int):
    """The schedule's last failure and, to those who may acknowledge it, a note field."""
    return _render(request, get_object_or_404(Schedule.objects.select_related("owner"), pk=schedule_id), None)


@action(ACK_PERM)
def failure_ack(request, schedule_id: int):
    """Acknowledge the schedule's failures with a note (audited); back to the overview."""
    schedule = get_object_or_404(Schedule.objects.select_related("owner"), pk=schedule_id)
    form = AckForm(request.POST)
    if form.is_valid():
        try:
            failure_acknowledge(schedule=schedule, actor=request.user, note=form.cleaned_data["note"],
                                up_to_run_id=form.cleaned_data["up_to"])
        except ServiceError as exc:
            if exc.field == "note":
                form.add_error("note", exc.problem)
            else:
                form.add_error(None, f"{exc.field}: {exc.problem}" if exc.field else str(exc))
        else:
            messages.success(request, f"Failures of {schedule.name} acknowledged: {form.cleaned_data['note']}")
            return redirect("scheduler:overview")
    return _render(request, schedule, form, status=400)


def _render(request, schedule: Schedule, form: AckForm | None, status: int = 200):
    item = _item(schedule)
    if form is None:
        form = AckForm(initial={"up_to": item["run"].pk if item else None})
    context = {"schedule": schedule, "item": item, "form": form}
    return render(request, "scheduler/failure_ack.html", context, status=status)
