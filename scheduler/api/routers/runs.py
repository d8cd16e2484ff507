"""/api/v1/runs: list (keyset pages), get, trigger, cancel, re-run, the log."""
from __future__ import annotations

from ninja import Field, Query, Router, Schema, Status

from scheduler import run_reads
from scheduler.api.common import (
    MAX_LIMIT, aware, bounded_limit, caller, cursor_of, errors, require, run_by_id, schedule_by_name, team_ids_for,
)
from scheduler.api.schemas import CancelIn, CancelOut, LogPage, QueryDatetime, RerunIn, RunOut, RunPage, TriggerIn
from scheduler.models import Run, RunStatus
from scheduler.services.runs.cancel import run_cancel_as
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.rerun import run_rerun
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.scoped_runs import hide_other_teams
from scheduler.services.access.teams import visible_team_ids

router = Router(tags=["runs"])
LOG_LIMIT = 5000


def shown(request, run: Run) -> dict:
    """`run` as the caller may see it: with viewing scoped, another team's upstream is not named (scoped_runs)."""
    return run_out(hide_other_teams([run], visible_team_ids(caller(request)))[0])


def run_out(run: Run) -> dict:
    return {
        "id": run.pk, "schedule": run.schedule.name, "status": run.status, "stopping": run.stopping,
        "trigger_kind": run.trigger_kind, "triggered_by": run.triggered_by, "logical_time": run.logical_time,
        "params": run.params, "priority": run.priority, "workload_class": run.workload_class.name,
        "attempt": run.attempt, "max_attempts": run.max_attempts, "window_low": run.window_low,
        "window_high": run.window_high, "rows_loaded": run.rows_loaded, "watermark_after": run.watermark_after,
        "queued_at": run.queued_at, "started_at": run.started_at, "finished_at": run.finished_at,
        "reason": run.reason, "error": run.error, "exit_code": run.exit_code, "backfill_id": run.backfill_id,
        "rerun_of_id": run.rerun_of_id, "code_version": run.code_version,
    }


class RunFilters(Schema):
    schedule: str | None = None
    status: RunStatus | None = None
    team: str | None = None
    since: QueryDatetime | None = Field(default=None, description="Queued at or after (ISO 8601; naive is UTC).")
    until: QueryDatetime | None = Field(default=None, description="Queued before (ISO 8601).")
    cursor: int | None = Field(default=None, ge=1, description="The `next` of the previous page: runs with a lower id.")
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)


@router.get("/runs", response={200: RunPage, **errors()}, summary="List runs, newest first")
def list_runs(request, filters: Query[RunFilters]):
    """Keyset pages on the run id (descending): follow `next` as `cursor` until it is null."""
    require(request, "scheduler.view_run")
    limit = bounded_limit(filters.limit)
    wanted = {"team_ids": team_ids_for(request, filters.team), "status": filters.status,
              "since": aware(filters.since, "since"), "until": aware(filters.until, "until")}
    if filters.schedule:
        schedule = schedule_by_name(filters.schedule)
        require(request, "scheduler.view_schedule", schedule)
        wanted["schedule"] = schedule
    page = run_reads.runs_keyset_page({k: v for k, v in wanted.items() if v is not None or k == "team_ids"},
                                      before=cursor_of(filters.cursor), size=limit)
    # the page's rows load only the list's columns: read the full rows of this page in one query
    rows = Run.objects.select_related("schedule", "workload_class").in_bulk([r.pk for r in page["runs"]])
    items = hide_other_teams([rows[r.pk] for r in page["runs"] if r.pk in rows], visible_team_ids(caller(request)))
    return {"items": [run_out(run) for run in items], "next": page["older"]}


@router.get("/runs/{run_id}", response={200: RunOut, **errors()}, summary="Get a run")
def get_run(request, run_id: int):
    run = run_by_id(run_id)
    require(request, "scheduler.view_run", run)
    return shown(request, run)


@router.post("/schedules/{name}/runs", response={201: RunOut, **errors(409)}, summary="Trigger a run now")
def trigger_run(request, name: str, payload: TriggerIn):
    """Queue a manual run with override params; answers 201 with the run (follow it with GET /runs/{id})."""
    schedule = schedule_by_name(name)
    require(request, "scheduler.trigger_schedule", schedule)
    run = run_trigger_manual(schedule=schedule, actor=caller(request), params=payload.params, reason=payload.reason)
    return Status(201, shown(request, run_by_id(run.pk)))


@router.post("/runs/{run_id}/cancel", response={200: CancelOut, **errors(409)}, summary="Cancel a run")
def cancel_run(request, run_id: int, payload: CancelIn):
    """`cancelled` (it had not begun), `stopping` (its code was asked to stop) or `already stopping`."""
    run = run_by_id(run_id)
    user = caller(request)
    require(request, "scheduler.cancel_run", run)
    verb = "killed" if payload.force else "cancelled"
    outcome = run_cancel_as(run=run, actor=user, force=payload.force,
                            reason=payload.reason or f"{verb} by {user.get_username()} through the API")
    return {"outcome": outcome, "run": shown(request, run_by_id(run.pk))}


@router.post("/runs/{run_id}/rerun", response={201: RunOut, **errors(409)}, summary="Re-run a finished run")
def rerun(request, run_id: int, payload: RerunIn):
    """A new run with the same params and window; `from_failure` re-runs a workflow from its failed nodes."""
    run = run_by_id(run_id)
    require(request, "scheduler.trigger_schedule", run)
    if payload.from_failure:
        new = run_rerun_from_failure(run=run, actor=caller(request), reason=payload.reason)
    else:
        new = run_rerun(run=run, actor=caller(request), downstream=payload.downstream, reason=payload.reason)
    return Status(201, shown(request, run_by_id(new.pk)))


class LogQuery(Schema):
    after: int = Field(default=0, ge=0, description="The last seq already read (0: from the start).")
    limit: int = Field(default=1000, ge=1, le=LOG_LIMIT)


@router.get("/runs/{run_id}/log", response={200: LogPage, **errors()}, summary="A run's log, by seq")
def run_log(request, run_id: int, query: Query[LogQuery]):
    run = run_by_id(run_id)
    require(request, "scheduler.view_run", run)
    lines = run_reads.run_log_lines(run, after=query.after, limit=query.limit)
    more = len(lines) == query.limit or not run.is_final
    return {
        "lines": [{"seq": ln.seq, "at": ln.at, "level": ln.level, "source": ln.source, "message": ln.message}
                  for ln in lines],
        "next": (lines[-1].seq if lines else query.after) if more else None,
        "done": run.is_final and len(lines) < query.limit,
    }


