"""Schedules: list, detail, toggle, run now, watermark, breaker, dependency graph."""

from __future__ import annotations

import re
from collections import Counter

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from scheduler import selectors
from scheduler.streaks import failing_streaks, recent_runs_folded, verdict_streaks, with_verdicts
from scheduler.models import Schedule, TargetKind
from scheduler.services.runs.breakers import breaker_forecast, breaker_reset
from scheduler.services.common.errors import Conflict, ServiceError
from scheduler.services.oversight.freshness import freshness_status
from scheduler.services.history.prune import schedule_runs_retention
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_set_enabled
from scheduler.services.access.teams import actable_team_ids, visible_team_ids
from scheduler.services.runs.watermarks import (encode_value, watermark_config, watermark_preview, watermark_reset,
                                                watermark_set)
from scheduler.templatetags.scheduler_tags import mark_text
from scheduler.views import charts
from scheduler.views.common import action, command_context, dbt_command_context, page, require, team_scope
from scheduler.views.forms import ReasonForm, RunNowForm, WatermarkForm
from scheduler.views.teams import answer_test, channel_rows
from scheduler.views.watermark_hints import watermark_hints


HIDDEN = {"hidden": True}


# what one page of the list renders, whatever the number of schedules (issue 25: every page <= 100 KB)
PAGE_SIZE = 25
CURSOR = re.compile(r"[-a-zA-Z0-9_]{1,100}")


def _cursors(request) -> tuple[dict, str]:
    """`after` / `before` from the query string: schedule names (slugs); a bad one is named and ignored."""
    cursors, errors = {}, []
    for key in ("after", "before"):
        value = request.GET.get(key)
        if value is None:
            continue
        if CURSOR.fullmatch(value):
            cursors[key] = value
        else:
            errors.append(f"{key}: must be a schedule name (letters, digits, - and _), got '{value[:100]}'")
    if len(cursors) > 1:
        errors.append("after, before: give one of them, not both")
        cursors = {}
    return cursors, "; ".join(errors)


def _strip_label(runs) -> str:
    """The strip in words, in one line rather than one per run (a row stays small: issue 25)."""
    if not runs:
        return ""
    counts = Counter(r.status.lower() for r in runs)
    told = ", ".join(f"{n} {status}" for status, n in counts.most_common())
    return f"last {len(runs)} runs: {told}; the latest {runs[-1].status.lower()}"


@page("scheduler.view_schedule")
def schedule_list(request):
    now = timezone.now()
    scope = team_scope(request)
    cursors, cursor_error = _cursors(request)
    result = selectors.schedules_keyset_page(with_verdicts(selectors.schedules_with_last_run(scope["team_ids"])),
                                             size=PAGE_SIZE, **cursors)
    schedules = result["schedules"]
    recent = selectors.recent_runs_by_schedule(s.pk for s in schedules)
    streaks = verdict_streaks(schedules, now=now)
    rows = [
        {
            "schedule": s,
            "trigger_text": selectors.describe_trigger(s),
            "fires": selectors.next_fire_times(s, now=now, count=2),
            **selectors.strip_summary(recent.get(s.pk, [])),
            "strip_label": _strip_label(recent.get(s.pk, [])),
            "streak": streaks.get(s.pk),
        }
        for s in schedules
    ]
    actable = actable_team_ids(request.user) if request.user.has_perm("scheduler.trigger_schedule") else None
    view_only = [] if actable is None else sorted({s.owner.name for s in schedules if s.owner_id not in actable})
    query = request.GET.copy()
    for key in ("after", "before"):
        query.pop(key, None)
    return render(request, "scheduler/schedules.html",
                  {"rows": rows, "page": result, "query": query.urlencode(), "cursor_error": cursor_error,
                   "run_now_form": RunNowForm(), "view_only_teams": view_only, **scope})


def _detail_context(request, schedule: Schedule, **extra) -> dict:
    now = timezone.now()
    context = selectors.schedule_detail(schedule, now=now)
    context["freshness"] = next(iter(freshness_status(now=now, schedules=[schedule])), None)
    context["chart"] = charts.history_chart(
        context["history"], href=lambda run: reverse("scheduler:run_detail", args=[run.pk])
    )
    if schedule.target_kind == TargetKind.COMMAND:
        context["command"] = command_context(schedule.command)
    elif schedule.target_kind == TargetKind.DBT:
        context["command"] = dbt_command_context(schedule.dbt)
    context["channels"] = channel_rows(schedule)
    context["retention_days"] = schedule_runs_retention(schedule)
    context["breaker_forecast"] = breaker_forecast(schedule, now=now)
    streaks = verdict_streaks([schedule], now=now) if hasattr(schedule, "verdict_failure") else \
        failing_streaks([schedule.pk], now=now)
    context["streak"] = streaks.get(schedule.pk)
    context["recent_rows"] = recent_runs_folded(schedule, now=now)
    visible = visible_team_ids(request.user)
    if visible is not None:  # another team's upstream or downstream is there, but not by name
        for key in ("upstream", "downstream"):
            context[key] = [s if s.owner_id in visible else HIDDEN for s in context[key]]
    context.setdefault("run_now_form", RunNowForm())
    config = watermark_config(schedule)
    mark = context.get("watermark")
    context["wm_hints"] = hints = watermark_hints(schedule, mark.value if mark else "")
    context.setdefault("watermark_form", WatermarkForm(datetime_mark=bool(config and config.is_datetime),
                                                       initial={"value": hints.get("prefill", "")}))
    context.update(extra)
    return context


@page("scheduler.view_schedule")
def schedule_detail(request, schedule_id: int):
    schedule = get_object_or_404(with_verdicts(Schedule.objects.select_related("workload_class")), pk=schedule_id)
    return render(request, "scheduler/schedule_detail.html", _detail_context(request, schedule))


@action("scheduler.change_schedule")
def schedule_channel_test(request, schedule_id: int, index: int):
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    return answer_test(request, target=schedule, index=index,
                       back=reverse("scheduler:schedule_detail", args=[schedule.pk]))


@action("scheduler.toggle_schedule")
def schedule_toggle(request, schedule_id: int):
    """Pause (`enabled=0`) or resume (`enabled=1`) a schedule: the list's switch and the schedule page's button."""
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    back = request.POST.get("next") if _safe_next(request) else reverse("scheduler:schedules")
    choice = request.POST.get("enabled")
    form = ReasonForm(request.POST)
    if choice not in ("0", "1"):
        messages.error(request, f"enabled: must be 1 (resume) or 0 (pause), got '{(choice or '')[:20]}'; "
                                f"{schedule.name} is unchanged.")
        return redirect(back)
    if not form.is_valid():
        messages.error(request, f"reason: {' '.join(form.errors['reason'])} {schedule.name} is unchanged.")
        return redirect(back)
    enabled = choice == "1"
    try:
        schedule_set_enabled(schedule=schedule, enabled=enabled, actor=request.user,
                             reason=form.cleaned_data["reason"] or "dashboard")
        messages.success(request, f"{schedule.name} {'resumed (enabled)' if enabled else 'paused (disabled)'}.")
    except ServiceError as exc:
        messages.error(request, str(exc))
    return redirect(back)


def _safe_next(request) -> bool:
    target = request.POST.get("next", "")
    return bool(target) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})


@action("scheduler.trigger_schedule")
def schedule_run_now(request, schedule_id: int):
    schedule = get_object_or_404(Schedule.objects.select_related("workload_class"), pk=schedule_id)
    form = RunNowForm(request.POST)
    if form.is_valid():
        try:
            run = run_trigger_manual(
                schedule=schedule,
                actor=request.user,
                params=form.cleaned_data["params"],
                reason=form.cleaned_data["reason"],
            )
        except ServiceError as exc:
            for error in exc.errors:
                if (error.field or "").split(".")[0] == "params":
                    form.add_error("params", error.message_under("params"))
                else:
                    form.add_error(None, str(error))
        else:
            messages.success(request, f"Queued run {run.pk} of {schedule.name}.")
            return redirect("scheduler:run_detail", run_id=run.pk)
    return render(
        request, "scheduler/schedule_detail.html", _detail_context(request, schedule, run_now_form=form), status=400
    )


@action("scheduler.manage_watermark")
def schedule_watermark(request, schedule_id: int):
    """Set or reset the mark in two steps: the first POST previews (the next window it causes), `confirm=1` moves."""
    schedule = get_object_or_404(Schedule.objects.select_related("workload_class"), pk=schedule_id)
    config = watermark_config(schedule)
    form = WatermarkForm(request.POST, datetime_mark=bool(config and config.is_datetime))
    if form.is_valid():
        reset = request.POST.get("op") == "reset" or not form.cleaned_data["value"]
        value = None if reset else form.cleaned_data["value"]
        reason, force = form.cleaned_data["reason"], form.cleaned_data["force"]
        try:
            then_run = request.POST.get("then_run") == "1"  # "Move and run now" confirms the move too
            if request.POST.get("confirm") != "1" and not then_run:
                preview = watermark_preview(schedule=schedule, value=value, reason=reason, force=force,
                                            now=timezone.now())
                context = {"schedule": schedule, "preview": preview, "reset": reset, "value": value or "",
                           "typed": request.POST.get("value", ""), "reason": reason, "force": force,
                           "wm_hints": watermark_hints(schedule, encode_value(preview["start"]))}
                return render(request, "scheduler/watermark_confirm.html", context)
            if then_run:  # asked before anything moves: a refused run must not leave a moved mark behind
                require(request, "scheduler.trigger_schedule", schedule)
                if not schedule.enabled:
                    raise Conflict(f"{schedule.name} is paused, so no run can start now; resume it first, or "
                                   "move the mark alone", field="then_run")
            if reset:
                watermark_reset(schedule=schedule, actor=request.user, reason=reason)
                messages.success(request, f"Watermark of {schedule.name} reset.")
            else:
                stored = watermark_set(schedule=schedule, value=value, actor=request.user, reason=reason, force=force)
                messages.success(request, f"Watermark of {schedule.name} set to {mark_text(stored)}.")
            if then_run:
                return _run_after_move(request, schedule, reason)
            return redirect("scheduler:schedule_detail", schedule_id=schedule.pk)
        except ServiceError as exc:
            for error in exc.errors:
                if error.field in form.fields:
                    form.add_error(error.field, error.message_under(error.field))
                else:
                    form.add_error(None, str(error))
    return render(
        request, "scheduler/schedule_detail.html", _detail_context(request, schedule, watermark_form=form), status=400
    )


def _run_after_move(request, schedule: Schedule, reason: str):
    """"Move and run now": the mark has moved; the run reads the window it causes (a refusal is said, the move
    stands)."""
    try:
        run = run_trigger_manual(schedule=schedule, actor=request.user,
                                 reason=f"after moving the watermark: {reason}"[:500])
    except ServiceError as exc:
        messages.error(request, f"The watermark moved, but no run was started: {exc}")
        return redirect("scheduler:schedule_detail", schedule_id=schedule.pk)
    messages.success(request, f"Queued run {run.pk} of {schedule.name}: it reads from the new mark.")
    return redirect("scheduler:run_detail", run_id=run.pk)


@action("scheduler.reset_breaker")
def schedule_breaker_reset(request, schedule_id: int):
    schedule = get_object_or_404(Schedule, pk=schedule_id)
    form = ReasonForm(request.POST)
    reason = (form.cleaned_data["reason"] if form.is_valid() else "") or "reset from the dashboard"
    breaker_reset(schedule=schedule, actor=request.user, reason=reason)
    messages.success(request, f"Breaker of {schedule.name} reset to closed.")
    if _safe_next(request):
        return redirect(request.POST["next"])
    return redirect("scheduler:schedule_detail", schedule_id=schedule.pk)


@page("scheduler.view_schedule")
def dependency_graph(request):
    data = selectors.dependency_graph(visible_team_ids(request.user))
    nodes = [
        charts.Node(
            key=s.pk,
            label=s.name,
            status=(s.last_run_status or "none").lower(),
            href=reverse("scheduler:schedule_detail", args=[s.pk]),
        )
        for s in data["schedules"]
    ]
    # the through table holds (downstream=from, upstream=to)
    layout = charts.layered_layout(nodes, [(up, down) for down, up in data["edges"]])
    return render(request, "scheduler/graph.html", {"layout": layout})
