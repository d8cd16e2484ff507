"""Running a run's target (a pipeline, a workflow, a command, dbt) inside one attempt, with its in-process retries
drawn from the run's one attempt budget."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from django.db.models import F

from scheduler.core import Executor, PermanentError, Pipeline, RetryPolicy, RunReport
from scheduler.models import Run, RunStatus, Schedule, TargetKind
from scheduler.pipelines.connections import connection_scope
from scheduler.pipelines.context import RunContext
from scheduler.pipelines.registry import get_pipeline, get_workflow
from scheduler.services.worker.commands import (command_env_open, command_execute, command_spec_check, command_tempdir,
                                        run_env)
from scheduler.services.access.connections import connections_env
from scheduler.services.worker.dbt import dbt_execute
from scheduler.services.integrations.lineage import datasets_of, lineage_attach, lineage_enabled
from scheduler.services.runs.nodes import NodeLedger, nodes_done, nodes_run_here, rows_run_here
from scheduler.services.runs.logs import node_logger
from scheduler.services.access.teams import PermissionRefused
from scheduler.services.runs.watermarks import encode_value

S = RunStatus


def retry_policy(schedule: Schedule) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=schedule.retry_max_attempts, initial_delay=schedule.retry_initial_delay,
        backoff=schedule.retry_backoff, max_delay=schedule.retry_max_delay, jitter=schedule.retry_jitter,
    )


def retry_policy_for(pipeline: Pipeline, schedule: Schedule, budget_left: int) -> RetryPolicy:
    """The in-process retry policy of one execution (precedence in docs/semantics.md, "Retries").

    The back-off shape is the pipeline's own declared policy when it declares
    one, else the schedule's retry_* settings; the number of attempts is never
    more than what is left of the run's one budget (`max_attempts`).
    """
    base = pipeline.declared_policy or retry_policy(schedule)
    return dataclasses.replace(base, max_attempts=max(1, min(base.max_attempts, budget_left)))


def _spend_attempt(run: Run, token: str) -> Callable[[int, BaseException, float], None]:
    """The hook before each in-process retry: count it on the run, or stop when the budget is spent."""

    def on_retry(_attempt: int, exc: BaseException, _wait: float) -> None:
        # Counted in the database at once, so governance (re-queueing a lost
        # worker's run) and the worker draw from the same budget.
        spent = Run.objects.filter(
            pk=run.pk, status=S.RUNNING, dispatch_token=token, attempt__lt=F("max_attempts")
        ).update(attempt=F("attempt") + 1)
        if not spent:
            raise exc  # budget spent (or the run was taken away): no further try
        run.attempt += 1

    return on_retry


def _prepare(pipeline: Pipeline, run: Run, token: str) -> Pipeline:
    pipeline.policy = retry_policy_for(pipeline, run.schedule, run.max_attempts - run.attempt + 1)
    pipeline.on_retry = _spend_attempt(run, token)
    return pipeline


def _prepare_node(pipeline: Pipeline, schedule: Schedule) -> Pipeline:
    """A workflow node retries under its own declared policy (else the schedule's); its record counts the tries."""
    pipeline.policy = pipeline.declared_policy or retry_policy(schedule)
    return pipeline


def run_target(run: Run, token: str, ctx: RunContext, clock, *, control, logs
                ) -> tuple[int | None, Any, RunReport | None, int | None]:
    """(rows, largest value loaded or a command's reported mark, workflow report, a command's exit code).

    Connections resolve for this run's schedule only (its own team's); a refusal is permanent: the same
    definition would be refused again."""
    try:
        with connection_scope(run.schedule):
            return _run_target(run, token, ctx, clock, control=control, logs=logs)
    except PermissionRefused as exc:
        raise PermanentError(str(exc)) from None


def _run_target(run: Run, token: str, ctx: RunContext, clock, *, control, logs
                ) -> tuple[int | None, Any, RunReport | None, int | None]:
    schedule = run.schedule
    if schedule.target_kind == TargetKind.COMMAND:
        spec = command_spec_check(schedule.command)
        window = ctx.window
        with command_tempdir(run.pk) as tmp:
            result_file = os.path.join(tmp, "result.json")
            env = run_env(
                run_id=run.pk,
                schedule=schedule.name,
                logical_time=run.logical_time,
                window_low=encode_value(window.low) if window else "",
                window_high=encode_value(window.high) if window else "",
                params=ctx.params,
                attempt=run.attempt,
                backfill=run.backfill_id,
                result_file=result_file,
                extra=command_env_open(spec),
                connections=connections_env(spec.get("connections", []), schedule=schedule),
            )
            result = command_execute(spec=spec, env=env, control=control, logs=logs, result_file=result_file)
        return result.rows, result.watermark, None, result.exit_code
    if schedule.target_kind == TargetKind.DBT:
        outcome = dbt_execute(run=run, spec=schedule.dbt, window=ctx.window, params=ctx.params, control=control,
                              logs=logs)
        return outcome.rows, None, outcome.report, outcome.exit_code
    if schedule.target_kind == TargetKind.WORKFLOW:
        workflow = get_workflow(schedule.target_id)
        if ctx.window is not None and not (run.window_low or run.window_high):
            # a re-queued attempt resumes on the same window its finished nodes read
            Run.objects.filter(pk=run.pk, dispatch_token=token).update(
                window_low=encode_value(ctx.window.low), window_high=encode_value(ctx.window.high))
        # each node's record is written by NodeLedger as the node finishes; nodes that
        # already succeeded for this run (an earlier attempt, or the run it re-runs) are skipped
        ledger = NodeLedger(run)
        here = nodes_run_here(run)
        executor = Executor(ledger, clock=clock, done=nodes_done(run), on_node=node_logger(logs))
        lineage = lineage_enabled()
        for node_id, factory in workflow.nodes.items():
            node = _prepare_node(factory(ctx), schedule)
            if lineage:
                ledger.datasets[node_id] = datasets_of(node)
            executor.add_pipeline(node_id, node)
        if lineage:
            inputs, outputs = datasets_of(None, ctx)
            lineage_attach(run, inputs=inputs, outputs=outputs)
        for upstream, downstream in workflow.deps:
            executor.add_dep(downstream, upstream)
        report = executor.run()
        return rows_run_here(report, here), _largest_integer_mark(report), report, None
    spec = get_pipeline(schedule.target_id)
    pipeline = _prepare(spec.factory(ctx), run, token)
    if ctx.watermark_column and not pipeline.watermark_column:
        pipeline.watermark_column = ctx.watermark_column
    if lineage_enabled():  # named before it runs, so a failed run's FAIL names them too
        inputs, outputs = datasets_of(pipeline, ctx)
        lineage_attach(run, inputs=inputs, outputs=outputs)
    result = pipeline.run()
    if lineage_enabled() and (ctx.lineage_inputs or ctx.lineage_outputs):  # declared while it ran
        inputs, outputs = datasets_of(pipeline, ctx)
        lineage_attach(run, inputs=inputs, outputs=outputs)
    return result.rows, result.max_value, None, None


def _largest_integer_mark(report: RunReport) -> int | None:
    """A workflow's integer mark: the largest value any of its nodes loaded (a resumed node's, as stored).

    Datetime marks move to the window's high end, so only integer values count here."""
    values = []
    for record in report.records:
        value = record.watermark
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                continue  # a datetime mark's text
        if isinstance(value, int) and not isinstance(value, bool):
            values.append(value)
    return max(values) if values else None


__all__ = ["retry_policy", "retry_policy_for", "run_target"]
