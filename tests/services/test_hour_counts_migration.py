"""Migration 0027: the hour counts start from the runs already in the ledger, one folded row per key."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("scheduler", "0026_run_tally_and_history_indexes")]
AFTER = [("scheduler", "0027_run_hour_counts")]
UTC = timezone.utc
T = datetime(2026, 3, 2, 9, 40, 12, 345678, tzinfo=UTC)


def _hour(moment):
    return moment.replace(minute=0, second=0, microsecond=0)


def test_the_ledgers_final_runs_are_counted_by_schedule_hours_and_status():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Team, Schedule, Run = (apps.get_model("scheduler", name) for name in ("Team", "Schedule", "Run"))
    WorkloadClass = apps.get_model("scheduler", "WorkloadClass")
    wc, _ = WorkloadClass.objects.get_or_create(name="standard", defaults={"concurrency_limit": 4})
    team, _ = Team.objects.get_or_create(name="default")
    a = Schedule.objects.create(name="a", target_id="demo.noop", workload_class=wc, owner=team)
    b = Schedule.objects.create(name="b", target_id="demo.noop", workload_class=wc, owner=team)
    rows = [  # schedule, status, queued, started, finished
        (a, "SUCCEEDED", T, T + timedelta(seconds=5), T + timedelta(minutes=3)),
        (a, "SUCCEEDED", T + timedelta(minutes=1), T + timedelta(minutes=1), T + timedelta(minutes=2)),
        (a, "FAILED", T, T + timedelta(minutes=10), T + timedelta(hours=2)),  # reaches two hours on
        (a, "BLOCKED", T + timedelta(hours=1), None, T + timedelta(hours=1)),  # never started: its queue hour
        (b, "CANCELLED", T - timedelta(days=40), None, T),
        (b, "SKIPPED", T + timedelta(minutes=55), None, T + timedelta(minutes=55)),
        (b, "SUCCEEDED", T + timedelta(minutes=58), T + timedelta(minutes=59), None),  # no end recorded
        (b, "QUEUED", T, None, None),  # live: not counted
        (b, "RUNNING", T, T, None),
    ]
    Run.objects.bulk_create([
        Run(schedule=s, status=status, trigger_kind="manual", trigger_key=f"k{i}", workload_class=wc, queued_at=q,
            started_at=st, finished_at=f) for i, (s, status, q, st, f) in enumerate(rows)])
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        counted = Counter()
        for sid, hour, end_hour, status, n, folded in apps.get_model("scheduler", "RunHourCount").objects.values_list(
                "schedule_id", "hour", "end_hour", "status", "n", "folded"):
            assert folded
            counted[(sid, hour, end_hour, status)] += n
        h = _hour(T)
        assert counted == {
            (a.pk, h, h, "SUCCEEDED"): 2,
            (a.pk, h, h + timedelta(hours=2), "FAILED"): 1,
            (a.pk, h + timedelta(hours=1), h + timedelta(hours=1), "BLOCKED"): 1,
            (b.pk, _hour(T - timedelta(days=40)), h, "CANCELLED"): 1,
            (b.pk, h + timedelta(hours=1), h + timedelta(hours=1), "SKIPPED"): 1,  # queued at 10:35
            (b.pk, h + timedelta(hours=1), h + timedelta(hours=1), "SUCCEEDED"): 1,  # started at 10:39
        }
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
