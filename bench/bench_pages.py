"""Time the dashboard pages on the test client with many runs in the database.

    ETL_VAR_DIR=/tmp/etl-bench .venv/bin/python bench/bench_pages.py --runs 100000

Builds a fresh SQLite (or DATABASE_URL) database under ETL_VAR_DIR, bulk-inserts
runs spread over schedules and statuses, then reports the median time of each
page. The issue's target: every page under 100 ms with 100,000 runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "etlsite.settings")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from scheduler.models import Run, RunStatus, Schedule, TriggerKind, WorkloadClass
    from scheduler.services.definitions.schedules import schedule_save

    call_command("migrate", verbosity=0)
    if not Schedule.objects.exists():
        schedules = [
            schedule_save(data={"name": f"bench-{i}", "target_id": "demo.noop"}, actor="bench") for i in range(50)
        ]
        wc = WorkloadClass.objects.get(name="standard")
        statuses = [RunStatus.SUCCEEDED] * 8 + [RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.BLOCKED]
        now = timezone.now()
        batch = []
        for i in range(args.runs):
            queued = now - timedelta(seconds=args.runs - i)
            batch.append(
                Run(
                    schedule=schedules[i % 50],
                    trigger_key=f"b{i}",
                    trigger_kind=TriggerKind.CRON,
                    workload_class=wc,
                    status=statuses[i % len(statuses)],
                    queued_at=queued,
                    started_at=queued,
                    finished_at=queued + timedelta(seconds=3),
                    rows_loaded=i % 1000,
                )
            )
            if len(batch) == 5000:
                Run.objects.bulk_create(batch)
                batch = []
        Run.objects.bulk_create(batch)
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    some = Schedule.objects.first()
    pages = [
        "/",
        "/runs/",
        "/runs/?status=FAILED",
        f"/runs/?schedule={some.name}",
        "/runs/?trigger_kind=cron",
        "/runs/blocked/",
        "/runs/skipped/",
        "/schedules/",
        f"/schedules/{some.pk}/",
        "/schedules/graph/",
        f"/runs/{Run.objects.order_by('-id').values_list('id', flat=True).first()}/",
        "/audit/",
        "/backfills/",
    ]
    print(f"{Run.objects.count()} runs")
    for url in pages:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            status = client.get(url).status_code
            times.append((time.perf_counter() - start) * 1000)
        print(f"{statistics.median(times):8.1f} ms  {status}  {url}")


if __name__ == "__main__":
    main()
