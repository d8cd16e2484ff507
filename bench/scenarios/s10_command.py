"""Scenario 10: what a command target costs per run, over the bare `subprocess.run(["true"])`.

In-process, as a worker runs it: a manual run of a command schedule whose
argv is `["true"]` is triggered (untimed), then admitted (`admit_runs`) and
executed (`execute_run`: claim, heartbeat registration, run log, supervisor
watch, temp dir and result file, spawn in its own session under the child
subreaper, the two output readers, reaping the group, the end written): that
pair is timed, per run. The bare figure is `subprocess.run(["true"])` in the
same process, per call. The overhead is the difference of the two medians;
target: at most 20 ms per run (issue 20). A Python no-op run (`demo.noop`)
through the same path gives the part of the cost that any run pays.

Then, if asked (`--cluster-runs`, default 20), a real `manage.py qcluster`
(shipped settings) runs manual triggers one at a time, alternating the
command schedule and the no-op one: trigger-to-finish, `finished_at -
queued_at`, for each, and the worker's part of it, `finished_at - started_at`
(from its claim to the end it wrote).
"""
from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    Result,
    emit,
    flush_redis,
    maybe_profile,
    median,
    pct,
    redis_url,
    scenario_args,
    scratch_database,
    setup_django,
    start_cluster,
    stop_cluster,
    wait_until,
)

TITLE = "command target overhead, `true`"
SIZES = {"runs": 100, "cluster_runs": 20}
TARGET_MS = 20.0
WARM_UP = 3


def _schedules():
    from scheduler.models import Schedule
    from scheduler.services.definitions.schedules import schedule_save

    def get(name: str, **data):
        return Schedule.objects.filter(name=name).first() or schedule_save(
            data={"name": name, "trigger_kind": "manual", "retry_max_attempts": 1, **data}, actor="bench")

    command = get("bench-true", target_kind="command", target_id="", command={"argv": ["true"]})
    noop = get("bench-noop", target_id="demo.noop")
    return command, noop


def one_run(schedule) -> tuple[float, float]:
    """Seconds for (admit, execute_run) of one freshly triggered run of `schedule` (the trigger is not timed)."""
    from django.utils import timezone

    from scheduler.models import Run
    from scheduler.services.admission.dispatch import admit_runs
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_trigger_manual

    run = run_trigger_manual(schedule=schedule, actor="bench")
    t0 = time.perf_counter()
    admit_runs(now=timezone.now(), holder="bench")  # gate, admit, hand the run to the broker (never consumed here)
    token = Run.objects.filter(pk=run.pk).values_list("dispatch_token", flat=True).get()
    t1 = time.perf_counter()
    outcome = execute_run(run.pk, token)
    t2 = time.perf_counter()
    assert outcome == "SUCCEEDED", f"run {run.pk} of {schedule.name}: {outcome} ({Run.objects.get(pk=run.pk).reason})"
    return t1 - t0, t2 - t1


def bare(n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["true"], check=True)
        out.append(time.perf_counter() - t0)
    return out


def in_process(runs: int, *, profile: bool = False) -> dict:
    command, noop = _schedules()
    for _ in range(WARM_UP):  # first spawn, first thread, imports: not what a run costs
        one_run(command), one_run(noop), bare(1)
    cmd, noop_runs, bare_s = [], [], []
    for _ in range(runs):  # interleaved, so a slow spell of the machine hits all three alike
        cmd.append(one_run(command))
        noop_runs.append(one_run(noop))
        bare_s += bare(1)
    if profile:
        with maybe_profile("s10-command-runs", True):
            for _ in range(20):
                one_run(command)
    ms = lambda values: [v * 1000 for v in values]  # noqa: E731
    return {"command_ms": ms(a + e for a, e in cmd), "command_execute_ms": ms(e for _, e in cmd),
            "noop_ms": ms(a + e for a, e in noop_runs), "noop_execute_ms": ms(e for _, e in noop_runs),
            "bare_ms": ms(bare_s)}


def on_cluster(url: str, runs: int, extra: dict) -> dict:
    from scheduler.models import LoopLease, Run
    from scheduler.services.runs.queue import run_trigger_manual

    command, noop = _schedules()
    if extra.get("REDIS_URL"):
        flush_redis(extra["REDIS_URL"])
    out: dict[str, list[float]] = {"command": [], "noop": [], "command_worker": [], "noop_worker": []}
    with tempfile.TemporaryDirectory(prefix="etl-bench-s10-") as tmp:
        log = Path(tmp) / "cluster.log"
        proc = start_cluster(url, log_path=log, **extra)
        try:
            wait_until(lambda: LoopLease.objects.filter(name="dispatch").exclude(holder="").exists(), timeout=60,
                       what="the dispatch loop", log_path=log)
            time.sleep(1.0)  # workers forked and idle
            for i in range(2 * runs):
                kind, schedule = ("command", command) if i % 2 == 0 else ("noop", noop)
                run = run_trigger_manual(schedule=schedule, actor="bench")
                wait_until(lambda: Run.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=30,
                           what=f"run {run.pk}", poll=0.01, log_path=log)
                run.refresh_from_db()
                assert run.status == "SUCCEEDED", f"run {run.pk}: {run.status} {run.reason}"
                out[kind].append((run.finished_at - run.queued_at).total_seconds() * 1000)
                # the worker's part: from its claim to the end it wrote (no dispatch latency in it)
                out[f"{kind}_worker"].append((run.finished_at - run.started_at).total_seconds() * 1000)
                time.sleep(random.uniform(0.0, 0.2))  # lands anywhere in the dispatch loop's cycle
        finally:
            stop_cluster(proc)
    return out


def run(url: str | None = None, runs: int = 100, cluster_runs: int = 0, db: str = "-", extra: dict | None = None,
        profile: bool = False) -> Result:
    result = Result(10, TITLE, db)
    if (extra or {}).get("REDIS_URL"):
        flush_redis(extra["REDIS_URL"])  # admit_runs hands each run to the broker; nothing consumes them here
    measured = in_process(runs, profile=profile)
    command, noop, bare_ms = median(measured["command_ms"]), median(measured["noop_ms"]), median(measured["bare_ms"])
    overhead = command - bare_ms
    result.details = {**measured, "runs": runs}
    result.add(f'subprocess.run(["true"]) alone, median of {runs}', bare_ms, "ms")
    result.add(f"command run of `true`: admit + execute_run, median of {runs}", command, "ms")
    result.add("  scheduler's overhead over subprocess.run (difference of the medians)", overhead, "ms",
               f"<= {TARGET_MS:g} ms", overhead <= TARGET_MS)
    result.add("  p95 of the command run", pct(measured["command_ms"], 95), "ms")
    result.add("  of which execute_run, median", median(measured["command_execute_ms"]), "ms")
    result.add(f"Python no-op run (demo.noop): admit + execute_run, median of {runs}", noop, "ms")
    result.add("  of which execute_run, median", median(measured["noop_execute_ms"]), "ms")
    result.add("command run - no-op run - subprocess.run (what only a command pays)", command - noop - bare_ms, "ms")
    if cluster_runs and url:
        cluster = on_cluster(url, cluster_runs, extra or {})
        result.details["cluster_ms"] = cluster
        broker = "Redis" if (extra or {}).get("REDIS_URL") else "ORM broker"
        for kind, label in (("command", "`true` command run"), ("noop", "no-op run")):
            values = cluster[kind]
            result.add(f"real cluster ({broker}), {label}: trigger -> finished, p50 ({len(values)} runs)",
                       pct(values, 50), "ms")
        result.add("  command - no-op, p50", pct(cluster["command"], 50) - pct(cluster["noop"], 50), "ms")
        for kind, label in (("command", "`true` command run"), ("noop", "no-op run")):
            result.add(f"real cluster, {label}: claimed -> finished (the worker's part), p50",
                       pct(cluster[f"{kind}_worker"], 50), "ms")
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    runs = args.runs or (20 if args.quick else SIZES["runs"])
    cluster_runs = args.cluster_runs if args.cluster_runs is not None else (5 if args.quick else SIZES["cluster_runs"])
    extra = {"REDIS_URL": redis_url()} if args.db == "postgres" else {}
    with scratch_database(args.db) as url:
        setup_django(url, **extra)
        result = run(url, runs=runs, cluster_runs=cluster_runs, db=args.db, extra=extra, profile=args.profile)
    emit(result, args.out)


if __name__ == "__main__":
    main()
