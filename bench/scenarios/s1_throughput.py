"""Scenario 1: dispatch throughput through the whole path vs raw django-q2.

Ours: N QUEUED no-op runs (demo.noop) are in the queue when a real
`manage.py qcluster` starts; its dispatch loop gates and admits them, hands
them to the broker (inside the timed window) and the workers execute them and
record every outcome in the ledger. Raw: the same cluster (same settings, same
workers) is started and warmed up first; then a producer process puts N
`scheduler.tasks.noop_task` messages on the same broker with plain
`async_task` while the cluster consumes, so raw django-q2 also enqueues inside
the timed window, as our dispatcher does.

Both are timed on one clock, from the first hand-off to the broker to the
last finish: the window opens when the raw producer sends its first message
(it prints the time) or when our dispatcher's first admission starts (the
earliest `admitted_at`), and closes at the last finish that bench/probe.py,
loaded into the cluster, records from django-q2's `post_execute` (a message
carrying a batch of k runs counts k finishes, at the time the whole message
finished). Throughput is N / window, so cluster start-up is left out of both.
One process runs one raw phase, then one of ours (`--samples` alternates
more pairs in the same process); bench/run.py takes three such samples and
reports each figure as their median with the spread. The workload class limit is raised to CLASS_LIMIT
(1,000) so the class limit is not what is measured: a class admits at most its
limit per dispatch tick (every 0.1 s) and a slot is free again only once its
run has finished, so with batched hand-off a limit of 100 capped the whole
path near 100 runs per tick-and-a-bit (Little's law), below what the workers
can do. (With the shipped limit of 4 the gate caps a class at 4 runs per
dispatch tick on purpose.)
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    Result,
    child_env,
    emit,
    flush_redis,
    redis_url,
    scenario_args,
    scratch_database,
    setup_django,
    start_cluster,
    stop_cluster,
    wait_until,
)

TITLE = "dispatch throughput, no-op runs, real cluster"
SIZES = {"runs": 5000, "samples": 1}
CLASS_LIMIT = 1000
# the producer of the raw phase: its own process, plain async_task per message (what a django-q2 user writes)
PRODUCER = """
import os, sys, time, django
sys.path.insert(0, os.getcwd())
django.setup()
from django_q.tasks import async_task
print(time.time(), flush=True)  # the window opens with the first message
for _ in range(int(sys.argv[1])):
    async_task("scheduler.tasks.noop_task")
"""


def _finishes(path: Path) -> list[float]:
    if not path.exists():
        return []
    return [float(x) for x in path.read_text().split()]


def _phase(url: str, n: int, *, raw: bool, tmp: Path, extra: dict) -> dict:
    from django.utils import timezone

    from scheduler.models import Run, RunStatus, Schedule, WorkloadClass

    if extra.get("REDIS_URL"):
        flush_redis(extra["REDIS_URL"])
    done = tmp / f"done-{'raw' if raw else 'ours'}-{uuid.uuid4().hex[:6]}"
    if not raw:
        wc = WorkloadClass.objects.get(name="standard")
        schedule = Schedule.objects.get(name="bench-noop")
        now = timezone.now()
        Run.objects.bulk_create([
            Run(schedule=schedule, trigger_key=f"bench:{uuid.uuid4().hex}", trigger_kind="manual", workload_class=wc,
                status=RunStatus.QUEUED, attempt=1, max_attempts=1, queued_at=now, params={})
            for _ in range(n)
        ], batch_size=1000)
    log = tmp / f"cluster-{'raw' if raw else 'ours'}.log"
    proc = start_cluster(url, log_path=log, ETL_BENCH_DONE_FILE=str(done), **extra)
    warm = 0
    try:
        if raw:
            from django_q.tasks import async_task

            # the cluster is up and consuming before the producer starts: start-up is not in the window
            async_task("scheduler.tasks.noop_task")
            wait_until(lambda: len(_finishes(done)) >= 1, timeout=120, what="the warm-up task", poll=0.05,
                       log_path=log)
            warm = 1
            producer = subprocess.Popen(
                [sys.executable, "-c", PRODUCER, str(n)],
                cwd=Path(__file__).resolve().parents[2],
                env=child_env(url, **extra),
                stdout=subprocess.PIPE,
                text=True,
            )
        wait_until(lambda: len(_finishes(done)) >= n + warm, timeout=max(120, n / 10), what=f"{n} finished tasks",
                   poll=0.2, log_path=log)
        if raw:
            opened = float(producer.stdout.readline())
            if producer.wait(60) != 0:
                raise RuntimeError("the raw producer failed")
    finally:
        stop_cluster(proc)
    times = sorted(_finishes(done))[warm:]
    if not raw:
        # the window opens when the dispatcher starts handing runs out: its first admission
        opened = Run.objects.order_by("admitted_at").values_list("admitted_at", flat=True).first().timestamp()
    out = {"n": n, "seconds": times[-1] - opened, "per_s": n / (times[-1] - opened),
           "finish_to_finish_per_s": (n - 1) / (times[-1] - times[0])}
    if not raw:
        out["succeeded"] = Run.objects.filter(status=RunStatus.SUCCEEDED).count()
        out["persisted_per_run"] = _persisted(Run.objects.filter(status=RunStatus.SUCCEEDED), n)
        Run.objects.all().delete()
    return out


def _floor(url: str, n: int, extra: dict) -> dict:
    """The floor (bench/floor.py) on the same database, in processes of its own: the run's writes alone."""
    import json

    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "floor.py"), "--url", url,
                           "--runs", str(n), "--json"], cwd=Path(__file__).resolve().parents[2],
                          env=child_env(url, **extra), capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the floor failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _persisted(runs, n: int) -> dict:
    """What the ledger kept for the phase's runs: rows per run in each table."""
    from scheduler.models import AuditEntry, RunLogLine, RunUpstream

    ids = runs.values("pk")
    return {
        "run rows": runs.count() / n,
        "run log lines": RunLogLine.objects.filter(run_id__in=ids).count() / n,
        "upstream records": RunUpstream.objects.filter(run_id__in=ids).count() / n,
        "audit entries": AuditEntry.objects.filter(target_type="run").count() / n,
    }


def profile_in_process(n: int) -> None:
    """The same path in one process (broker stubbed): gate, hand-off into messages, execute each message, profiled."""
    from unittest import mock

    from django.utils import timezone

    from bench.common import maybe_profile
    from scheduler.models import Run, RunStatus, Schedule, WorkloadClass
    from scheduler.services.admission.dispatch import dispatch_tick
    from scheduler.services.cluster.batch import execute_runs

    wc = WorkloadClass.objects.get(name="standard")
    schedule = Schedule.objects.get(name="bench-noop")
    Run.objects.bulk_create([
        Run(schedule=schedule, trigger_key=f"prof:{i}", trigger_kind="manual", workload_class=wc,
            status=RunStatus.QUEUED, attempt=1, max_attempts=1, queued_at=timezone.now(), params={})
        for i in range(n)
    ])
    sent: list = []
    with maybe_profile("s1-path-in-process", True), mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution", lambda rid, tok: sent.append([(rid, tok)])
    ), mock.patch("scheduler.services.admission.dispatch.enqueue_executions", sent.append):
        while Run.objects.filter(status=RunStatus.QUEUED).exists():
            dispatch_tick(now=timezone.now(), holder="bench")
            for message in sent:
                execute_runs(message)
            sent.clear()
    Run.objects.all().delete()


def run(url: str, runs: int = 5000, db: str = "-", extra: dict | None = None, profile: bool = False,
        samples: int = 1) -> Result:
    from scheduler.models import WorkloadClass
    from scheduler.services.definitions.schedules import schedule_save

    extra = extra or {}
    result = Result(1, TITLE, db)
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=CLASS_LIMIT)
    schedule_save(data={"name": "bench-noop", "target_id": "demo.noop", "trigger_kind": "manual",
                        "retry_max_attempts": 1}, actor="bench")
    if profile:
        profile_in_process(min(runs, 1000))
    raws, ours, floors = [], [], []
    with tempfile.TemporaryDirectory(prefix="etl-bench-s1-") as tmp:
        for _ in range(samples):  # alternated, so a slow spell of the machine hits all three alike
            raws.append(_phase(url, runs, raw=True, tmp=Path(tmp), extra=extra))
            ours.append(_phase(url, runs, raw=False, tmp=Path(tmp), extra=extra))
            floors.append(_floor(url, runs, extra))
    for sample in ours:
        assert sample["succeeded"] == runs, f"only {sample['succeeded']} of {runs} runs SUCCEEDED"
    raw_s = [r["per_s"] for r in raws]
    ours_s = [o["per_s"] for o in ours]
    ratios = [o / r for o, r in zip(ours_s, raw_s)]
    ratio = statistics.median(ours_s) / statistics.median(raw_s)
    broker = "Redis" if extra.get("REDIS_URL") else "ORM broker"
    floor_s = [f["per_s"] for f in floors]
    to_floor = statistics.median(ours_s) / statistics.median(floor_s)
    result.details = {"raw": raws, "ours": ours, "floor": floors, "ratio": ratio, "ratios": ratios,
                      "to_floor": to_floor, "broker": broker,
                      "samples": samples, "persisted_per_run": ours[-1]["persisted_per_run"]}
    # fixed figure names: bench/run.py matches the rows of its samples by position
    n = f"{runs:,}" if samples == 1 else f"{runs:,}, median of {samples} pairs"
    result.add(f"raw django-q2 no-op tasks, enqueued in the window ({broker}, {n})",
               statistics.median(raw_s), "tasks/s", "", None)
    result.add(f"scheduler no-op runs, whole path ({broker}, {n})", statistics.median(ours_s), "runs/s", "", None)
    result.add("scheduler / raw", ratio * 100, "%", ">= 150 %", ratio >= 1.5)
    result.add(f"floor: the run's database writes alone (bench/floor.py, 2 processes, {n})",
               statistics.median(floor_s), "runs/s", "", None)
    result.add("scheduler / floor", to_floor * 100, "%", ">= 50 %", to_floor >= 0.5)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    runs = args.runs or (500 if args.quick else SIZES["runs"])
    samples = args.samples or SIZES["samples"]
    extra = {"REDIS_URL": redis_url()} if args.db == "postgres" else {}
    with scratch_database(args.db) as url:
        setup_django(url, **extra)
        result = run(url, runs=runs, db=args.db, extra=extra, profile=args.profile, samples=samples)
    emit(result, args.out)


if __name__ == "__main__":
    main()
