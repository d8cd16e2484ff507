"""Scenario 4: the workflow executor in-process, 10 / 100 / 1,000 no-op nodes, ledger in the database.

Two measurements per workflow:

* execute path: a RUNNING workflow run of a schedule goes through
  `execute_run` exactly as a worker runs it (claim, heartbeat thread, one
  pipeline per node with its retry policy, the executor with its
  `NodeLedger`: one committed row per node as it finishes, the report stored
  on the run, completion). Per-node overhead is the marginal cost
  (t(N) - t(10)) / (N - 10) and the average t(N) / N. Target: below Luigi's
  0.9 ms per task (issue 12), with every node's record durable.
* executor only: `Executor` + `NodeLedger` without the run around it.
* node record only: `NodeLedger.append`, the durable write each node pays.
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import Result, emit, maybe_profile, median, scenario_args, scratch_database, setup_django, timed  # noqa: E402

TITLE = "workflow executor, no-op nodes, ledger in the database"
SIZES = {"max_nodes": 1000, "repeat": 5}


def _schedule(workflow_id: str):
    from scheduler.models import Schedule, TargetKind
    from scheduler.services.definitions.schedules import schedule_save

    existing = Schedule.objects.filter(name=workflow_id.replace(".", "-")).first()
    if existing:
        return existing
    return schedule_save(data={"name": workflow_id.replace(".", "-"), "target_kind": TargetKind.WORKFLOW,
                               "target_id": workflow_id, "trigger_kind": "manual", "retry_max_attempts": 1},
                         actor="bench")


def _admitted_run(schedule) -> tuple[int, str]:
    from django.utils import timezone

    from scheduler.models import RunStatus
    from scheduler.services.runs.queue import run_enqueue, run_transition

    now = timezone.now()
    run = run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key=f"bench:{uuid.uuid4().hex}", now=now)
    token = uuid.uuid4().hex
    assert run_transition(run, new=RunStatus.RUNNING, now=now, admitted_at=now, heartbeat_at=now, dispatch_token=token)
    return run.pk, token


def execute_path(schedule) -> None:
    from scheduler.services.cluster.execution import execute_run

    run_id, token = _admitted_run(schedule)
    assert execute_run(run_id, token) == "SUCCEEDED"


def executor_only(schedule, workflow_id: str) -> None:
    from scheduler.core import Executor
    from scheduler.models import Run
    from scheduler.pipelines.context import RunContext
    from scheduler.pipelines.registry import get_workflow
    from scheduler.services.runs.nodes import NodeLedger

    workflow = get_workflow(workflow_id)
    run = Run.objects.get(pk=_admitted_run(schedule)[0])
    executor = Executor(NodeLedger(run))
    ctx = RunContext(run_id=0, schedule=schedule.name, window=None, params={}, logical_time=None, attempt=1,
                     watermark_column=None)
    for node_id, factory in workflow.nodes.items():
        executor.add_pipeline(node_id, factory(ctx))
    for upstream, downstream in workflow.deps:
        executor.add_dep(downstream, upstream)
    assert executor.run().ok


def node_records_only(schedule, n: int) -> None:
    """n durable node records, each one committed INSERT (what the executor pays per node)."""
    from django.utils import timezone

    from scheduler.core import Outcome, RunRecord
    from scheduler.models import Run
    from scheduler.services.runs.nodes import NodeLedger

    ledger = NodeLedger(Run.objects.get(pk=_admitted_run(schedule)[0]))
    now = timezone.now()
    for i in range(n):
        ledger.append(RunRecord(f"n{i}", Outcome.SUCCESS, now, now, rows=1))


def run(max_nodes: int = 1000, repeat: int = 5, profile: bool = False, db: str = "-") -> Result:
    from bench import workflows

    result = Result(4, TITLE, db)
    sizes = [n for n in (10, 100, 1000) if n <= max_nodes] or [max_nodes]
    if sizes[-1] != max_nodes:
        sizes.append(max_nodes)
    worst_marginal = 0.0
    for shape in ("chain", "fanout"):
        path_t, exec_t, path_samples = {}, {}, {}
        for n in sizes:
            workflow_id = workflows.register(shape, n)
            schedule = _schedule(workflow_id)
            execute_path(schedule)  # warm-up: imports, first queries
            times, _ = timed(lambda: execute_path(schedule), repeat)
            if profile and n == sizes[-1] and shape == "chain":
                with maybe_profile(f"s4-{shape}-{n}", True):  # an extra, untimed run
                    execute_path(schedule)
            path_t[n], path_samples[n] = median(times), times
            times, _ = timed(lambda: executor_only(schedule, workflow_id), repeat)
            exec_t[n] = median(times)
        big, small = sizes[-1], sizes[0]
        marginal = (path_t[big] - path_t[small]) / (big - small) if big > small else path_t[big] / big
        worst_marginal = max(worst_marginal, marginal)
        # the spread: the marginal of each repetition (the i-th big run against the i-th small one)
        samples = sorted((b - a) / (big - small) * 1000 for a, b in zip(path_samples[small], path_samples[big])) \
            if big > small else []
        result.details[shape] = {"execute_path_s": path_t, "executor_only_s": exec_t,
                                 "marginal_ms_samples": samples}
        result.add(f"{shape}: per-node overhead, execute path ({small}->{big} nodes, marginal)", marginal * 1000,
                   "ms", "< 0.9 ms (Luigi)", marginal < 0.0009)
        for n in sizes:
            result.add(f"{shape}: {n} nodes, whole run (execute path)", path_t[n] * 1000, "ms", "", None)
        result.add(f"{shape}: {big} nodes, executor + NodeLedger only, per node", exec_t[big] / big * 1000, "ms",
                   "", None)
    times, _ = timed(lambda: node_records_only(schedule, sizes[-1]), repeat)
    per_record = median(times) / sizes[-1]
    result.details["node_record_ms_samples"] = sorted(t / sizes[-1] * 1000 for t in times)
    result.add("durable node record (one committed INSERT), per node", per_record * 1000, "ms", "< 0.9 ms (Luigi)",
               per_record < 0.0009)
    result.details["worst_marginal_ms"] = worst_marginal * 1000
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    max_nodes = args.max_nodes or (100 if args.quick else SIZES["max_nodes"])
    repeat = args.repeat or (2 if args.quick else SIZES["repeat"])
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(max_nodes=max_nodes, repeat=repeat, profile=args.profile, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
