"""Scenario 2: trigger-to-start latency on an idle cluster, manual trigger and cron fire.

A real `manage.py qcluster` runs with the shipped settings (dispatch loop
every 0.1 s, 2 workers). Manual: `run_trigger_manual` one at a time, each
after the previous run finished, with a random pause in between so the
trigger lands anywhere in the dispatch loop's cycle; latency is
Run.started_at - Run.queued_at. Cron: a schedule firing every second
(6-field cron, seconds last) for a while; latency is started_at - logical_time.
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    REDIS_URL,
    Result,
    emit,
    flush_redis,
    pct,
    scenario_args,
    scratch_database,
    setup_django,
    start_cluster,
    stop_cluster,
    wait_until,
)

TITLE = "trigger-to-start latency, idle cluster"
SIZES = {"manual": 40, "cron_seconds": 30}


def run(url: str, manual: int = 40, cron_seconds: int = 30, db: str = "-", extra: dict | None = None) -> Result:
    from scheduler.models import LoopLease, Run, RunStatus, Schedule
    from scheduler.services.runs.queue import run_trigger_manual
    from scheduler.services.definitions.schedules import schedule_save

    extra = extra or {}
    result = Result(2, TITLE, db)
    if extra.get("REDIS_URL"):
        flush_redis(extra["REDIS_URL"])
    schedule = schedule_save(data={"name": "bench-manual", "target_id": "demo.noop", "trigger_kind": "manual",
                                   "retry_max_attempts": 1}, actor="bench")
    with tempfile.TemporaryDirectory(prefix="etl-bench-s2-") as tmp:
        log = Path(tmp) / "cluster.log"
        proc = start_cluster(url, log_path=log, **extra)
        try:
            wait_until(lambda: LoopLease.objects.filter(name="dispatch").exclude(holder="").exists(), timeout=60,
                       what="the dispatch loop", log_path=log)
            time.sleep(1.0)  # workers forked and idle
            manual_ms = []
            for _ in range(manual):
                run = run_trigger_manual(schedule=schedule, actor="bench")
                wait_until(lambda: Run.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=30,
                           what=f"run {run.pk}", poll=0.01, log_path=log)
                run.refresh_from_db()
                manual_ms.append((run.started_at - run.queued_at).total_seconds() * 1000)
                time.sleep(random.uniform(0.0, 0.2))
            cron = schedule_save(data={"name": "bench-cron", "target_id": "demo.noop", "trigger_kind": "cron",
                                       "trigger_config": {"cron": "* * * * * *"}, "retry_max_attempts": 1},
                                 actor="bench")
            time.sleep(cron_seconds)
            Schedule.objects.filter(pk=cron.pk).update(enabled=False)
            time.sleep(1.0)
        finally:
            stop_cluster(proc)
    cron_ms = [
        (r.started_at - r.logical_time).total_seconds() * 1000
        for r in Run.objects.filter(schedule__name="bench-cron", started_at__isnull=False)
    ]
    cron_queue_ms = [
        (r.queued_at - r.logical_time).total_seconds() * 1000
        for r in Run.objects.filter(schedule__name="bench-cron", started_at__isnull=False)
    ]
    cron_runs = list(Run.objects.filter(schedule__name="bench-cron", started_at__isnull=False))
    split = {
        "queued->admitted": [(r.admitted_at - r.queued_at).total_seconds() * 1000 for r in cron_runs],
        "admitted->started": [(r.started_at - r.admitted_at).total_seconds() * 1000 for r in cron_runs],
    }
    manual_runs = list(Run.objects.filter(schedule__name="bench-manual", started_at__isnull=False))
    manual_split = {
        "queued->admitted": [(r.admitted_at - r.queued_at).total_seconds() * 1000 for r in manual_runs],
        "admitted->started": [(r.started_at - r.admitted_at).total_seconds() * 1000 for r in manual_runs],
    }
    result.details = {
        "cron_split_ms": split,
        "manual_split_ms": manual_split,
        "manual_ms": manual_ms,
        "cron_ms": cron_ms,
        "cron_fire_to_queued_ms": cron_queue_ms,
    }
    for label, values in (("manual trigger", manual_ms), ("cron fire", cron_ms)):
        p50, p95 = pct(values, 50), pct(values, 95)
        result.add(f"{label}: p50 ({len(values)} runs)", p50, "ms", "<= 100 ms", p50 <= 100)
        result.add(f"{label}: p95", p95, "ms", "<= 500 ms", p95 <= 500)
    result.add("cron fire: fire time -> run queued, p50", pct(cron_queue_ms, 50), "ms", "", None)
    for label, parts in (("cron fire", split), ("manual trigger", manual_split)):
        for part, values in parts.items():
            result.add(f"{label}: {part}, p50", pct(values, 50), "ms", "", None)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    manual = args.manual or (10 if args.quick else SIZES["manual"])
    cron_seconds = args.cron_seconds or (8 if args.quick else SIZES["cron_seconds"])
    extra = {"REDIS_URL": REDIS_URL} if args.db == "postgres" else {}
    with scratch_database(args.db) as url:
        setup_django(url, **extra)
        result = run(url, manual=manual, cron_seconds=cron_seconds, db=args.db, extra=extra)
    emit(result, args.out)


if __name__ == "__main__":
    main()
