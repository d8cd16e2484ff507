"""Overview, runs, run detail, blocked and skipped lists."""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from scheduler import run_reads
from scheduler.run_facts import Elapsed, attempt_text, typical_durations
from scheduler import oncall
from scheduler.scoped_runs import hide_in_text, hide_other_teams, hide_upstream_rows
from scheduler.models import AuditEntry, Run, RunStatus, StopKind, TargetKind
from scheduler.pipelines.registry import get_workflow
from scheduler.services.admission.waits import explain_wait, wait_reasons
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.cancel import ALREADY_STOPPING, CANCELLED, run_cancel_as
from scheduler.services.runs.stop import stop_outcome
from scheduler.services.runs.nodes import node_records_shown
from scheduler.services.runs.rerun import RERUNNABLE, run_rerun_from_failure
from scheduler.services.runs.rerun import rerun_offers
from scheduler.services.history.prune import run_pruned_note
from scheduler.services.runs.rerun import run_rerun as run_rerun_service
from scheduler.views import charts
from scheduler.views.common import (
    action, command_context, dbt_command_context, int_or_none, page, partial, team_scope,
)
from scheduler.views.forms import ReasonForm, RerunForm, RunFilterForm, scoped
from scheduler.views.logs import log_done, log_page
from scheduler.views.polls import poll_answer
from scheduler.views.run_evidence import error_parts, fold_repeated_traceback
from scheduler.worklist import failure_worklist
from scheduler.services.access.teams import visible_team_ids
from scheduler.services.admission.clusters import clusters_context
from scheduler.services.worker.code_versions import code_before

log = logging.getLogger(__name__)
PAGE_SIZE = 50
# A run page is bounded whatever the run holds (issue 25): a dbt project's thousands of nodes, a long log
RUN_PAGE_NODES = 30  # node records in the table and the Gantt, those that did not succeed first
RUN_PAGE_TRACEBACKS = 5  # failed nodes whose traceback the table shows, each its last RUN_PAGE_TRACEBACK_CHARS
RUN_PAGE_TRACEBACK_CHARS = 2000
RUN_PAGE_REPORT_NODES = 30  # rows (and nodes of the graph) of the workflow report
RUN_PAGE_LOG_NODES = 100  # past this many nodes the log's node filter is a text field, not a select


@page("scheduler.view_run")
def overview(request):
    scope = team_scope(request)
    now = timezone.now()
    context = {**oncall.overview(now, team_ids=scope["team_ids"]),
               "failures": failure_worklist(now, team_ids=scope["team_ids"]), **scope, **clusters_context(now)}
    return poll_answer(request, render(request, partial(request, "scheduler/overview.html", "live"), context))


@page("scheduler.view_run")
def run_list(request):
    form = scoped(RunFilterForm(request.GET or None), request.user)
    if form.is_bound:
        form.is_valid()  # a bad field is shown with its error and left out; the valid ones still filter
    scope = team_scope(request)
    filters = {**form.filters(), "team_ids": scope["team_ids"]}
    result = run_reads.runs_keyset_page(
        filters,
        before=int_or_none(request.GET.get("before")),
        after=int_or_none(request.GET.get("after")),
        size=PAGE_SIZE,
    )
    visible = visible_team_ids(request.user)
    hide_other_teams(result["runs"], visible)
    # after the hiding: a waiting run's reason is its own, already without another team's names (issue 37)
    reasons = wait_reasons(result["runs"], now=timezone.now(), team_ids=visible)
    for run in result["runs"]:
        run.wait_reason = reasons.get(run.pk, "")
    query = request.GET.copy()
    for key in ("before", "after"):
        query.pop(key, None)
    context = {"form": form, "page": result, "query": query.urlencode(), "live": not request.GET.get("before"),
               **scope}
    return poll_answer(request, render(request, partial(request, "scheduler/runs.html", "table"), context))


def _explain(run: Run, now) -> str:
    """Why a queued or waiting run has not started (the gate's read side, admission/waits.py)."""
    if run.status not in (RunStatus.QUEUED, RunStatus.WAITING):
        return ""
    try:
        return explain_wait(run, now)
    except Exception:  # an explanation must never break the page
        log.warning("run %s: why it waits could not be said", run.pk, exc_info=True)
        return run.reason or (
            "waiting for its upstreams" if run.status == RunStatus.WAITING else "waiting for the dispatcher")


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
    visible = visible_team_ids(request.user)
    context = {"run": run, "waiting_reason": hide_in_text(_explain(run, now), visible), "final": run.is_final,
               "upstreams": hide_upstream_rows(run_reads.run_upstreams(run), visible),
               "pruned_note": run_pruned_note(run)}
    hide_other_teams([run], visible)  # after _explain: it judges the run as stored
    if run.started_at:
        context["duration"] = ((run.finished_at or now) - run.started_at).total_seconds()
        context["latency"] = (run.started_at - run.queued_at).total_seconds()
        if run.finished_at is None:  # running: its time so far beside its schedule's typical one (issue 37)
            context["elapsed"] = Elapsed(context["duration"], typical_durations([run.schedule_id]).get(run.schedule_id))
    context["attempt_text"], context["attempt_note"] = attempt_text(run)
    dbt = run.schedule.target_kind == TargetKind.DBT
    if run.report:
        # a dbt run's graph is dbt's (its manifest, kept in the report), a workflow's the registered one
        deps = [tuple(e) for e in run.report.get("deps", [])] if dbt else _workflow_deps(run)
        context["report_rows"], context["report_graph"] = charts.report_nodes(run.report, deps,
                                                                              limit=RUN_PAGE_REPORT_NODES)
        context["report_total"] = charts.report_size(run.report)
        # the nodes that ran have log lines and a record: the graph links each to them (a blocked one has none)
        context["report_ran"] = {str(r.get("task_id")) for r in run.report.get("records", []) or []}
    if run.schedule.target_kind in (TargetKind.WORKFLOW, TargetKind.DBT):
        shown = node_records_shown(run, limit=RUN_PAGE_NODES)
        context["nodes"], context["nodes_total"] = _trim_tracebacks(shown["rows"]), shown["total"]
        context["gantt"] = charts.node_gantt(context["nodes"])
        context["can_resume"] = run.status in RERUNNABLE and run.backfill_id is None
    if run.stopping:
        context["stop"] = _stop_context(run)
    context["timed_out"] = timed_out(run)
    context["code_before"] = code_before(run)
    if run.schedule.target_kind == TargetKind.COMMAND:
        context["command"] = command_context(run.schedule.command)
    elif run.schedule.target_kind == TargetKind.DBT:
        context["command"] = dbt_command_context(run.schedule.dbt)
    context["offers"] = rerun_offers(run, now=now)
    context["rerun_form"] = RerunForm()
    context["error"] = error_parts(run.error)
    if not request.htmx:
        context.update(_log_filter(request, run))
        lines, more = ([], False) if context["node_error"] else log_page(run, after=0, node=context["log_node"])
        context["log_lines"], context["log_more"] = lines, more
        context["last_seq"] = lines[-1].seq if lines else 0
        context["folded_seq"] = fold_repeated_traceback(lines, run.error)
        context["log_done"] = log_done(run, now)
    return render(request, partial(request, "scheduler/run_detail.html", "live"), context)


def _trim_tracebacks(records: list) -> list:
    """The first RUN_PAGE_TRACEBACKS tracebacks, each its last lines (where the error is); the others are left
    to the node's log, so a run of many failed nodes keeps its page small."""
    shown = 0
    for record in records:
        if not record.error:
            continue
        if shown == RUN_PAGE_TRACEBACKS:
            record.error = ""
            continue
        shown += 1
        if len(record.error) > RUN_PAGE_TRACEBACK_CHARS:
            record.error = "…" + record.error[-RUN_PAGE_TRACEBACK_CHARS:]
    return records


def _log_filter(request, run: Run) -> dict:
    """`?node=NAME`: the log of one node. The choices are the nodes the run recorded; another name is an error.

    Past RUN_PAGE_LOG_NODES nodes the choice is a text field, not a select of thousands of options."""
    nodes = run_reads.run_log_nodes(run, limit=RUN_PAGE_LOG_NODES + 1)
    node = request.GET.get("node") or None
    error = ""
    if node is not None and node not in nodes and not (len(nodes) > RUN_PAGE_LOG_NODES
                                                       and run_reads.run_names_node(run, node)):
        error = f"node: no node named '{node[:200]}' in run {run.pk}" + (
            f" (its nodes: {', '.join(nodes[:10])}{' …' if len(nodes) > 10 else ''})" if nodes else "")
    many = len(nodes) > RUN_PAGE_LOG_NODES
    return {"log_nodes": [] if many else nodes, "log_nodes_many": many, "log_node": node, "node_error": error}


# A timeout's reason, as the stop token words it: the run's own limit or a workflow node's
TIMED_OUT = re.compile(r"^(node '.*' )?timed out after ")


def timed_out(run: Run) -> bool:
    """A run that ended FAILED because it ran past its time limit (its own, or one of its nodes')."""
    return run.status == RunStatus.FAILED and bool(TIMED_OUT.match(run.reason or ""))


STOP_NEXT = {
    StopKind.CANCEL: "Its code is asked to stop at its next check; if it has not stopped after {grace} its process "
                     "is killed.",
    StopKind.TIMEOUT: "It ran past its time limit; if its code has not stopped after {grace} its process is killed.",
    StopKind.CANCEL_OTHER: "A newer fire replaces it (cancel_other); its code is asked to stop, and killed after "
                           "{grace}.",
    StopKind.SHUTDOWN: "Its cluster is stopping; the run goes back to the queue for the next cluster when its code "
                       "has stopped (killed after {grace}).",
    StopKind.TERMINATE: "Its process is being killed now, without a grace period.",
    StopKind.FENCE: "Its worker could not write to the database; the worker stops it so that no one else's copy "
                    "overlaps it.",
}


def _stop_context(run: Run) -> dict:
    """What the run page says about a STOPPING run: who asked, why, and what happens next."""
    asked = (AuditEntry.objects.filter(target_type="run", target_id=str(run.pk), action__startswith="run.stop.")
             .order_by("-at", "-id").only("actor").first())
    status, _ = stop_outcome(kind=run.stop_kind, reason=run.stop_reason)
    outcome = status
    if run.stop_kind == StopKind.TIMEOUT and run.attempt < run.max_attempts:
        outcome = f"{status} and is queued again (attempt {run.attempt + 1} of {run.max_attempts})"
    elif run.stop_kind == StopKind.SHUTDOWN:
        outcome = f"QUEUED again for the next cluster (attempt {run.attempt} of {run.max_attempts}, not spent)"
    grace = f"{settings.ETL_CANCEL_GRACE_SECONDS:g} s"
    return {
        "kind": run.get_stop_kind_display() or run.stop_kind,
        "by": asked.actor if asked else "",
        "outcome": outcome,
        "next": STOP_NEXT.get(run.stop_kind, "").format(grace=grace),
        # run_cancel(force=True) escalates a cancel or a timeout; a fenced run is its cut-off worker's to end
        "may_kill": run.stop_kind in (StopKind.CANCEL, StopKind.CANCEL_OTHER, StopKind.TIMEOUT),
    }


@action("scheduler.trigger_schedule")
def run_rerun(request, run_id: int):
    run = get_object_or_404(Run.objects.select_related("schedule"), pk=run_id)
    form = RerunForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect("scheduler:run_detail", run_id=run.pk)
    downstream, reset = form.cleaned_data["downstream"], form.cleaned_data["reset_breaker"]
    try:
        new = run_rerun_service(run=run, actor=request.user, downstream=downstream, reason=form.cleaned_data["reason"],
                                reset_breaker=reset)
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("scheduler:run_detail", run_id=run.pk)
    messages.success(
        request, ("Breaker reset. " if reset else "") + f"Run {new.pk} queued: a re-run of run {run.pk}"
        + (" and then its downstream." if downstream else ".")
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


# a flash true only while the run is stopping: app.js takes it away once the run page shows the run final
UNTIL_FINAL = "until-final"


@action("scheduler.cancel_run")
def run_cancel(request, run_id: int):
    """Cancel a run; `force=1` ("Kill now") ends its process at once instead of asking its code to stop."""
    run = get_object_or_404(Run.objects.select_related("schedule"), pk=run_id)
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    force = request.POST.get("force") == "1"
    verb = "killed" if force else "cancelled"
    try:
        outcome = run_cancel_as(run=run, actor=request.user, force=force,
                                reason=reason or f"{verb} by {request.user.get_username()}")
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("scheduler:run_detail", run_id=run.pk)
    if outcome == CANCELLED:
        messages.success(request, f"Run {run.pk} cancelled.")
    elif outcome == ALREADY_STOPPING:
        messages.info(request, f"Run {run.pk} is already stopping ({run.get_stop_kind_display().lower()}): "
                               f"{run.stop_reason}.", extra_tags=UNTIL_FINAL)
    elif force:
        messages.success(request, f"Run {run.pk} is being killed; it shows as STOPPING until its process has ended.",
                         extra_tags=UNTIL_FINAL)
    else:
        messages.success(request, f"Run {run.pk} is stopping: its code was asked to stop. It keeps its slot until "
                                  "its work has ended, then it is CANCELLED.", extra_tags=UNTIL_FINAL)
    return redirect("scheduler:run_detail", run_id=run.pk)


def _reason_list(request, status: str, title: str):
    before = int_or_none(request.GET.get("before"))
    scope = team_scope(request)
    result = oncall.blocked_or_skipped(status, before=before, size=PAGE_SIZE, team_ids=scope["team_ids"])
    result["before"] = before  # an older page stands still; the newest refreshes
    hide_other_teams(result["runs"], visible_team_ids(request.user))
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
