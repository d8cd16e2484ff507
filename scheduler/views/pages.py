"""Overview, runs, run detail, blocked and skipped lists."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from scheduler import selectors
from scheduler.models import Run, RunStatus
from scheduler.pipelines.registry import get_workflow
from scheduler.services import dispatch
from scheduler.services.errors import ServiceError
from scheduler.services.finish import run_cancel as cancel
from scheduler.services.nodes import RERUNNABLE, node_records, run_rerun_from_failure
from scheduler.services.reruns import rerun_offers
from scheduler.services.reruns import run_rerun as run_rerun_service
from scheduler.views import charts
from scheduler.views.common import action, int_or_none, page, partial, team_scope
from scheduler.views.forms import ReasonForm, RerunForm, RunFilterForm, TimelineForm

PAGE_SIZE = 50


@page("scheduler.view_run")
def overview(request):
    scope = team_scope(request)
    context = {**selectors.overview(timezone.now(), team_ids=scope["team_ids"]), **scope}
    return render(request, partial(request, "scheduler/overview.html", "live"), context)


@page("scheduler.view_run")
def run_list(request):
    form = RunFilterForm(request.GET or None)
    if form.is_bound:
        form.is_valid()  # a bad field is shown with its error and left out; the valid ones still filter
    scope = team_scope(request)
    filters = {**form.filters(), "team_ids": scope["team_ids"]}
    result = selectors.runs_keyset_page(
        filters,
        before=int_or_none(request.GET.get("before")),
        after=int_or_none(request.GET.get("after")),
        size=PAGE_SIZE,
    )
    query = request.GET.copy()
    for key in ("before", "after"):
        query.pop(key, None)
    context = {"form": form, "page": result, "query": query.urlencode(), "live": not request.GET.get("before"),
               **scope}
    return render(request, partial(request, "scheduler/runs.html", "table"), context)


def _explain(run: Run, now) -> str:
    """Why a queued or waiting run has not started; the dispatch service knows best when it can say."""
    if run.status not in (RunStatus.QUEUED, RunStatus.WAITING):
        return ""

    explain = getattr(dispatch, "explain_wait", None)
    if explain is not None:
        try:
            answer = explain(run, now)
        except Exception:  # an explanation must never break the page
            answer = None
        if isinstance(answer, dict):
            return "; ".join(f"{k}: {v}" for k, v in answer.items() if v not in (None, "", [], {}))
        if answer:
            return str(answer)
    return run.reason or (
        "waiting for its upstreams" if run.status == RunStatus.WAITING else "waiting for the dispatcher"
    )


def _workflow_deps(run: Run) -> list[tuple[str, str]]:
    try:
        return list(get_workflow(run.schedule.target_id).deps)
    except Exception:  # the workflow may have been renamed since the run
        return []


@page("scheduler.view_run")
def run_detail(request, run_id: int):
    run = get_object_or_404(
        Run.objects.select_related("schedule", "workload_class", "blocked_by", "backfill"), pk=run_id
    )
    now = timezone.now()
    context = {"run": run, "waiting_reason": _explain(run, now), "final": run.is_final,
               "upstreams": selectors.run_upstreams(run)}
    if run.started_at:
        context["duration"] = ((run.finished_at or now) - run.started_at).total_seconds()
    if run.started_at:
        context["latency"] = (run.started_at - run.queued_at).total_seconds()
    if run.report:
        context["report_rows"], context["report_graph"] = charts.report_nodes(run.report, _workflow_deps(run))
    if run.schedule.target_kind == "workflow":
        context["nodes"] = node_records(run)
        context["can_resume"] = run.status in RERUNNABLE and run.backfill_id is None
    context["offers"] = rerun_offers(run)
    context["rerun_form"] = RerunForm()
    if not request.htmx:
        context["log_lines"] = selectors.run_log_lines(run)
        context["last_seq"] = context["log_lines"][-1].seq if context["log_lines"] else 0
        context["log_done"] = _log_done(run, now)
    return render(request, partial(request, "scheduler/run_detail.html", "live"), context)


# The worker stores a run's last lines just after the run's final status
# commits: a follower keeps asking for a few seconds more before it stops.
LOG_GRACE_SECONDS = 10


def _log_done(run: Run, now) -> bool:
    return run.is_final and (run.finished_at is None or (now - run.finished_at).total_seconds() > LOG_GRACE_SECONDS)


@page("scheduler.view_run")
def run_log(request, run_id: int):
    """The run's log: new lines for the follower on the run page (htmx), the whole log as text otherwise."""
    run = get_object_or_404(Run.objects.only("id", "status", "finished_at"), pk=run_id)
    if not request.htmx:
        lines = selectors.run_log_lines(run, limit=100_000)
        text = "".join(f"{line.at:%Y-%m-%d %H:%M:%S} UTC {line.level:<7} {line.source}: {line.message}\n" for line in lines)
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="run-{run.pk}.log"'
        return response
    after = int_or_none(request.GET.get("after")) or 0
    lines = selectors.run_log_lines(run, after=after)
    context = {"run": run, "log_lines": lines, "last_seq": lines[-1].seq if lines else after,
               "log_done": _log_done(run, timezone.now()), "oob": True}
    return render(request, "scheduler/run_log_more.html", context)


@action("scheduler.trigger_schedule")
def run_rerun(request, run_id: int):
    run = get_object_or_404(Run.objects.select_related("schedule"), pk=run_id)
    form = RerunForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("scheduler:run_detail", run_id=run.pk)
    downstream = form.cleaned_data["downstream"]
    try:
        new = run_rerun_service(run=run, actor=request.user, downstream=downstream, reason=form.cleaned_data["reason"])
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("scheduler:run_detail", run_id=run.pk)
    messages.success(
        request, f"Run {new.pk} queued: a re-run of run {run.pk}" + (" and then its downstream." if downstream else ".")
    )
    return redirect("scheduler:run_detail", run_id=new.pk)


@action("scheduler.trigger_schedule")
def run_rerun_failed(request, run_id: int):
    """Re-run from failure: a new run of the workflow that skips the nodes which succeeded."""
    run = get_object_or_404(Run.objects.select_related("schedule"), pk=run_id)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        new = run_rerun_from_failure(run=run, actor=request.user, reason=reason)
    except ServiceError as exc:
        messages.error(request, f"{exc.field}: {exc}" if exc.field else str(exc))
        return redirect("scheduler:run_detail", run_id=run.pk)
    messages.success(request, f"Run {new.pk} re-runs run {run.pk} from its failure.")
    return redirect("scheduler:run_detail", run_id=new.pk)


@action("scheduler.cancel_run")
def run_cancel(request, run_id: int):
    run = get_object_or_404(Run, pk=run_id)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        done = cancel(run=run, actor=request.user, reason=reason or f"cancelled by {request.user.get_username()}")
        messages.success(
            request, f"Run {run.pk} cancelled." if done else f"Run {run.pk} changed meanwhile; not cancelled."
        )
    except ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("scheduler:run_detail", run_id=run.pk)


def _reason_list(request, status: str, title: str):
    before = int_or_none(request.GET.get("before"))
    scope = team_scope(request)
    result = selectors.blocked_or_skipped(status, before=before, size=PAGE_SIZE, team_ids=scope["team_ids"])
    result["before"] = before  # an older page stands still; the newest refreshes
    return render(
        request,
        partial(request, "scheduler/reason_list.html", "table"),
        {"page": result, "title": title, "status": status, **scope},
    )


@page("scheduler.view_run")
def blocked_list(request):
    return _reason_list(request, RunStatus.BLOCKED, "Blocked runs")


@page("scheduler.view_run")
def skipped_list(request):
    return _reason_list(request, RunStatus.SKIPPED, "Skipped runs")


@page("scheduler.view_run")
def timeline(request):
    """A Gantt of the last hours: one row per schedule, queue wait pale, execution solid."""
    form = TimelineForm(request.GET or None)
    hours = settings.ETL_TIMELINE_HOURS
    if form.is_bound and form.is_valid() and form.cleaned_data["hours"]:
        hours = form.cleaned_data["hours"]
    now = timezone.now()
    start = now - timedelta(hours=hours)
    scope = team_scope(request)
    chart = charts.timeline_chart(
        selectors.timeline_runs(start=start, end=now, team_ids=scope["team_ids"]), start=start, end=now,
        href=lambda run: reverse("scheduler:run_detail", args=[run.pk]),
        schedule_href=lambda pk: reverse("scheduler:schedule_detail", args=[pk]),
        tz=timezone.get_current_timezone(),
    )
    context = {"form": form, "chart": chart, "hours": hours, "start": start, "now": now, **scope}
    return render(request, partial(request, "scheduler/timeline.html", "chart"), context)
