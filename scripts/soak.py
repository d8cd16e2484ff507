#!/usr/bin/env python
"""Soak test: many schedules firing every few seconds with random failures, for a bounded time.

    .venv/bin/python scripts/soak.py --duration 600            # SQLite + ORM broker, one cluster
    .venv/bin/python scripts/soak.py --duration 600 --postgres --clusters 2   # PostgreSQL + Redis

Loopback only. Afterwards it checks the invariants (no run stuck, no duplicate
trigger key, class limits never exceeded, every failure has a reason) and the
memory of the cluster processes, prints a summary and writes it as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_of_tree(pid: int) -> int:
    """Resident memory (KiB) of a process and its descendants, from /proc."""
    total, todo = 0, [pid]
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    while todo:
        current = todo.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
        todo.extend(children.get(current, []))
    return total


def max_overlap(intervals) -> int:
    """The largest number of (start, end) intervals open at one instant; end None = still open.

    A run that ends at the instant another starts did not overlap it (ends count first).
    """
    events = []
    for start, end in intervals:
        events.append((start, 1))
        if end is not None:
            events.append((end, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    now_open = best = 0
    for _, step in events:
        now_open += step
        best = max(best, now_open)
    return best


def max_running_from_history(run_model) -> dict[int, int]:
    """Per class, the most runs executing at once, from every run's own started/finished times in the database.

    Samples every 0.5 s can miss a brief excess; the ledger cannot.
    """
    by_class: dict[int, list] = {}
    for cls, started, finished in (run_model.objects.filter(started_at__isnull=False)
                                   .values_list("workload_class", "started_at", "finished_at").iterator()):
        by_class.setdefault(cls, []).append((started, finished))
    return {cls: max_overlap(intervals) for cls, intervals in by_class.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--fail-rate", type=float, default=0.1)
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL + Redis instead of SQLite + ORM broker")
    parser.add_argument("--out", default=str(ROOT / "var" / "soak-latest.json"))
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="etl-soak-"))
    env = {
        **os.environ,
        "ETL_VAR_DIR": str(scratch),
        "ETL_PIPELINE_MODULES": "scheduler.pipelines.demo,tests.reliability.pipelines",
        "ETL_GOVERNANCE_INTERVAL": "5",
        "ETL_STUCK_SECONDS": "30",
        "ETL_HEARTBEAT_SECONDS": "2",
    }
    if args.postgres:
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c", "DROP DATABASE IF EXISTS etl_soak"],
            check=True,
            capture_output=True,
        )
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c", "CREATE DATABASE etl_soak"],
                       check=True, capture_output=True)
        env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/etl_soak"
        env["REDIS_URL"] = "redis://127.0.0.1:6379/8"
        subprocess.run(["redis-cli", "-n", "8", "flushdb"], capture_output=True)
    else:
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "etlsite.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)

    import django

    django.setup()
    from django.db import InterfaceError, OperationalError, connection
    from django.db.models import Count, Max

    from scheduler.models import Run, RunStatus, Schedule, WorkloadClass
    from scheduler.services.definitions.schedules import schedule_save

    rng = random.Random(7)
    classes = list(WorkloadClass.objects.values_list("name", flat=True))
    names = []
    for i in range(args.schedules):
        name = f"soak{i:03d}"
        data = {"name": name, "target_id": "reliability.chaos", "workload_class": rng.choice(classes),
                "priority": rng.randint(0, 9), "params": {"fail_rate": args.fail_rate, "seconds": 0.05},
                "breaker_threshold": 3, "breaker_cooldown_seconds": 20, "retry_max_attempts": 1}
        if names and rng.random() < 0.2:
            data.update(trigger_kind="upstream", depends_on=[rng.choice(names)], max_wait_seconds=60)
        else:
            data.update(trigger_kind="interval", trigger_config={"seconds": rng.randint(4, 12)})
        schedule_save(data=data, actor="soak")
        names.append(name)
    limits = dict(WorkloadClass.objects.values_list("id", "concurrency_limit"))

    procs = []
    for c in range(args.clusters):
        log = open(scratch / f"cluster{c}.log", "wb")  # noqa: SIM115
        procs.append(subprocess.Popen([sys.executable, "manage.py", "qcluster", "--name", f"soak{c}"], cwd=ROOT,
                                      env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    started = time.monotonic()
    max_running: dict[int, int] = {}
    memory: list[tuple[float, int]] = []
    next_mem = 0.0
    outages: list[int] = []
    try:
        while time.monotonic() - started < args.duration:
            elapsed = time.monotonic() - started
            try:
                for cls, n in (Run.objects.filter(status=RunStatus.RUNNING).values_list("workload_class")
                               .annotate(n=Count("id"))):
                    max_running[cls] = max(max_running.get(cls, 0), n)
                if elapsed >= next_mem:
                    memory.append((round(elapsed), sum(rss_of_tree(p.pid) for p in procs)))
                    next_mem += 10
                    done = Run.objects.filter(status__in=RunStatus.final()).count()
                    print(f"[{elapsed:6.0f}s] runs final={done} rss={memory[-1][1] // 1024} MiB", flush=True)
            except (OperationalError, InterfaceError) as exc:
                # a database restart (a fault test on the same server) must not end the soak: the
                # clusters are expected to ride it out, so the observer does too
                outages.append(round(elapsed))
                print(f"[{elapsed:6.0f}s] database unavailable: {str(exc).splitlines()[0]}", flush=True)
                connection.close()
                time.sleep(2)
            time.sleep(0.5)
        Schedule.objects.update(enabled=False, next_fire_at=None)
        drain_until = time.monotonic() + 90
        while time.monotonic() < drain_until and Run.objects.filter(status=RunStatus.RUNNING).exists():
            time.sleep(0.5)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    by_status = dict(Run.objects.values_list("status").annotate(n=Count("id")))
    duplicates = Run.objects.values("schedule", "trigger_key").annotate(n=Count("id")).filter(n__gt=1).count()
    stuck = Run.objects.filter(status=RunStatus.RUNNING).count()
    unexplained = Run.objects.filter(
        status__in=[RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.SKIPPED], reason=""
    ).count()
    history = max_running_from_history(Run)
    peak = {c: max(max_running.get(c, 0), history.get(c, 0)) for c in set(max_running) | set(history)}
    over_limit = {str(c): n for c, n in peak.items() if n > limits.get(c, 0)}
    # the first 30 s are start-up (imports, workers forking), not growth
    warm = [m for t, m in memory if 30 <= t < 90] or [m for _t, m in memory[:6]]
    first = sum(warm) / max(1, len(warm))
    last = sum(m for t, m in memory[-6:]) / max(1, len(memory[-6:]))
    left = dict(Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.WAITING])
                .values_list("workload_class__name").annotate(n=Count("id")).order_by())
    summary = {
        "duration_s": args.duration, "schedules": args.schedules, "clusters": args.clusters,
        "backend": "postgresql+redis" if args.postgres else "sqlite+orm",
        "runs_by_status": by_status, "runs_total": sum(by_status.values()),
        "duplicate_trigger_keys": duplicates, "runs_left_running": stuck, "failures_without_reason": unexplained,
        "max_running_per_class": {str(k): v for k, v in max_running.items()},
        "max_running_per_class_from_history": {str(k): v for k, v in history.items()},
        "limits": {str(k): v for k, v in limits.items()},
        "limit_exceeded": over_limit, "queued_or_waiting_left_by_class": left, "database_outages_at_s": outages,
        "rss_kib_first_minute": int(first), "rss_kib_last_minute": int(last),
        "rss_growth_pct": round(100 * (last - first) / first, 1) if first else None,
        "last_finished_at": str(Run.objects.aggregate(Max("finished_at"))["finished_at__max"]),
    }
    ok = not duplicates and not stuck and not unexplained and not over_limit
    summary["invariants_hold"] = ok
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
