"""The floor (issue 35): the database writes alone that a no-op run needs in our design, made by as many processes
as the cluster has workers, with no broker, no Python pipeline and no ORM: what this machine allows at most.

    .venv/bin/python bench/floor.py --db sqlite --runs 5000          # prints runs/s, writes JSON with --out
    .venv/bin/python bench/floor.py --url URL --runs 5000 --json      # against an existing (migrated) database

Per run, as scenario 1's window holds it (the run rows are inserted before the window opens, as there): its
admission (one UPDATE for each message's runs), its claim (one UPDATE per run, as a worker claims each run as it
begins), its end (one UPDATE for the message's runs) with the counter rows it must keep in the same transaction (a
status tally row, the timeline's hour counts, the schedule's latest outcome). The scheduler's own log lines, its
breaker statement and its reads are left out: they are what the floor asks whether we need. The insert is timed on
its own too (one multi-row INSERT per message, as a cron tick inserts its fires), outside the ratio.

Each of WORKERS processes (the cluster's `Q_WORKERS`, 2 as shipped) takes its share of the runs in messages of 64
(ETL_RUN_BATCH_MAX); the window runs from the first write of any process to the last commit of any.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import emit, scratch_database, setup_django  # noqa: E402

MESSAGE = 64  # ETL_RUN_BATCH_MAX as shipped


def _now():
    from django.db import connection
    from django.utils import timezone

    return connection.ops.adapt_datetimefield_value(timezone.now())


def _marks(n: int) -> str:
    return ", ".join(["%s"] * n)


def _message(cursor, ids: list[int], schedule_id: int, worker: str) -> None:
    """One message's runs through every write they need: admit, claim each, end together with the counters."""
    from django.db import connection, transaction

    from scheduler.services.history.hour_counts import runs_counted

    now = _now()
    cursor.execute(f"UPDATE scheduler_run SET status = 'RUNNING', admitted_at = %s, heartbeat_at = %s, "
                   f"worker_id = 'floor', dispatch_token = 'floor-' || id WHERE id IN ({_marks(len(ids))}) "
                   f"AND status = 'QUEUED'", [now, now, *ids])
    # the claim commits without waiting for its WAL flush on PostgreSQL, as the worker's (cluster/execution.py)
    no_flush = " AND set_config('synchronous_commit', 'off', true) = 'off'" if connection.vendor == "postgresql" else ""
    for pk in ids:
        now = _now()
        cursor.execute("UPDATE scheduler_run SET started_at = %s, heartbeat_at = %s, worker_id = %s "
                       f"WHERE id = %s AND dispatch_token = %s AND started_at IS NULL{no_flush}",
                       [now, now, worker, pk, f"floor-{pk}"])
    now = _now()
    with transaction.atomic():
        cursor.execute(f"UPDATE scheduler_run SET status = 'SUCCEEDED', finished_at = %s, heartbeat_at = %s "
                       f"WHERE id IN ({_marks(len(ids))}) AND status = 'RUNNING'", [now, now, *ids])
        cursor.execute("INSERT INTO scheduler_runtally (status, n) VALUES ('SUCCEEDED', %s)", [len(ids)])
        runs_counted(ids)  # the hour counts: the very statement the scheduler uses
        cursor.execute("INSERT INTO scheduler_latestoutcome (schedule_id, live_success_id, success_id, success_at) "
                       "VALUES (%s, %s, %s, %s) ON CONFLICT (schedule_id) DO UPDATE SET "
                       "live_success_id = excluded.live_success_id, success_id = excluded.success_id, "
                       "success_at = excluded.success_at", [schedule_id, ids[-1], ids[-1], now])


def _worker(ids: list[int], schedule_id: int, name: str, start, out) -> None:
    from django.db import connection

    connection.close()  # a connection of this process's own (not the parent's, inherited by fork)
    start.wait()
    began = time.time()
    with connection.cursor() as cursor:
        for i in range(0, len(ids), MESSAGE):
            _message(cursor, ids[i:i + MESSAGE], schedule_id, name)
    out.put((began, time.time()))
    connection.close()


def _insert(n: int, schedule, wc) -> tuple[list[int], float]:
    """n QUEUED runs, one multi-row INSERT per message (bulk_create, as a cron tick inserts its fires): their ids
    and the time it took."""
    from django.db import transaction
    from django.utils import timezone

    from scheduler.models import Run

    tag = f"floor:{time.time_ns()}"
    t0 = time.perf_counter()
    for lo in range(0, n, MESSAGE):
        now = timezone.now()
        with transaction.atomic():
            Run.objects.bulk_create([
                Run(schedule=schedule, trigger_key=f"{tag}:{j}", trigger_kind="manual", workload_class=wc,
                    status="QUEUED", attempt=1, max_attempts=1, queued_at=now, params={})
                for j in range(lo, min(n, lo + MESSAGE))])
    seconds = time.perf_counter() - t0
    return list(Run.objects.filter(trigger_key__startswith=tag).order_by("pk").values_list("pk", flat=True)), seconds


def floor(n: int, *, workers: int = 2) -> dict:
    """The floor on the database Django points at (migrated): runs/s of the writes alone, and of the insert."""
    from django.db import connections

    from scheduler.models import Run, Schedule, WorkloadClass
    from scheduler.services.definitions.schedules import schedule_save

    schedule = Schedule.objects.filter(name="bench-floor").first() or schedule_save(
        data={"name": "bench-floor", "target_id": "demo.noop", "trigger_kind": "manual"}, actor="bench")
    wc = WorkloadClass.objects.get(name="standard")
    ids, insert_s = _insert(n, schedule, wc)
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    share = -(-len(ids) // workers)
    procs = [ctx.Process(target=_worker, args=(ids[i * share:(i + 1) * share], schedule.pk, f"floor-{i}", start, out))
             for i in range(workers)]
    for proc in procs:
        proc.start()
    start.set()
    spans = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
        if proc.exitcode != 0:
            raise RuntimeError(f"a floor worker failed (exit {proc.exitcode})")
    window = max(end for _, end in spans) - min(began for began, _ in spans)
    done = Run.objects.filter(schedule=schedule, status="SUCCEEDED").count()
    if done != n:
        raise RuntimeError(f"only {done} of {n} runs ended SUCCEEDED")
    Run.objects.filter(schedule=schedule).delete()
    return {"n": n, "workers": workers, "seconds": window, "per_s": n / window,
            "insert_seconds": insert_s, "insert_per_s": n / insert_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite",
                        help="a scratch database of this kind")
    parser.add_argument("--url", help="an existing database (migrated) instead of a scratch one")
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2, help="processes, as the cluster's Q_WORKERS (2 shipped)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (scenario 1 reads them)")
    parser.add_argument("--out", help="write a result row (bench/run.py's format) here")
    args = parser.parse_args()
    if args.url:
        setup_django(args.url, migrate=False)
        figures = floor(args.runs, workers=args.workers)
    else:
        with scratch_database(args.db) as url:
            setup_django(url)
            figures = floor(args.runs, workers=args.workers)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"floor: {figures['per_s']:.0f} runs/s ({args.runs} runs, {args.workers} processes, "
              f"{figures['seconds']:.2f} s); insert alone {figures['insert_per_s']:.0f} runs/s")
    if args.out:
        from bench.common import Result

        result = Result(0, "floor: a run's database writes alone", args.db)
        result.add(f"floor, {args.workers} processes", figures["per_s"], "runs/s")
        result.details = figures
        emit(result, args.out)


if __name__ == "__main__":
    main()
