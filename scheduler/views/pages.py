"""Overview, runs, run detail, blocked and skipped lists."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from scheduler import selectors
from scheduler.models import Run, RunStatus
from scheduler.services.errors import ServiceError
from scheduler.views import charts
from scheduler.views.common import action, int_or_none, page, partial
from scheduler.views.forms import ReasonForm, RunFilterForm

PAGE_SIZE = 50


@page("scheduler.view_run")
def overview(request):
    context = selectors.overview(timezone.now())
    return render(request, partial(request, "scheduler/overview.html", "live"), context)


@page("scheduler.view_run")
def run_list(request):
    form = RunFilterForm(request.GET or None)
    filters = form.filters() if form.is_bound and form.is_valid() else {}
    result = selectors.runs_keyset_page(
        filters,
        before=int_or_none(request.GET.get("before")),
        after=int_or_none(request.GET.get("after")),
        size=PAGE_SIZE,
    )
    query = request.GET.copy()
    for key in ("before", "after"):
        query.pop(key, None)
    context = {"form": form, "page": result, "query": query.urlencode(), "live": not request.GET.get("before")}
    return render(request, partial(request, "scheduler/runs.html", "table"), context)


def _explain(run: Run, now) -> str:
    """Why a queued or waiting run has not started; the dispatch service knows best when it can say."""
    if run.status not in (RunStatus.QUEUED, RunStatus.WAITING):
        return ""
    from scheduler.services import dispatch

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
    from scheduler.pipelines.registry import get_workflow

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
    context = {"run": run, "waiting_reason": _explain(run, now), "final": run.is_final}
    if run.started_at:
        context["duration"] = ((run.finished_at or now) - run.started_at).total_seconds()
    if run.started_at:
        context["latency"] = (run.started_at - run.queued_at).total_seconds()
    if run.report:
        context["report_rows"], context["report_graph"] = charts.report_nodes(run.report, _workflow_deps(run))
    return render(request, partial(request, "scheduler/run_detail.html", "live"), context)


@action("scheduler.cancel_run")
def run_cancel(request, run_id: int):
    from scheduler.services.finish import run_cancel as cancel

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
    result = selectors.blocked_or_skipped(status, before=int_or_none(request.GET.get("before")), size=PAGE_SIZE)
    return render(
        request,
        partial(request, "scheduler/reason_list.html", "table"),
        {"page": result, "title": title, "status": status},
    )


@page("scheduler.view_run")
def blocked_list(request):
    return _reason_list(request, RunStatus.BLOCKED, "Blocked runs")


@page("scheduler.view_run")
def skipped_list(request):
    return _reason_list(request, RunStatus.SKIPPED, "Skipped runs")
