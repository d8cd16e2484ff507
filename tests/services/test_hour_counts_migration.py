"""Migration 0027: the hour counts start from the runs already in the ledger, one folded row per key."""
from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("scheduler", "0026_run_tally_and_history_indexes")]
AFTER = [("scheduler", "0027_run_hour_counts")]
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
        columns = ("succeeded", "failed", "skipped", "blocked", "cancelled")
        for sid, hour, end_hour, folded, *ns in apps.get_model("scheduler", "RunHourCount").objects.values_list(
                "schedule_id", "hour", "end_hour", "folded", *columns):
            assert folded
            for column, n in zip(columns, ns):
                if n:
                    counted[(sid, hour, end_hour, column)] += n
        h, h1 = _hour(T), _hour(T) + timedelta(hours=1)
        assert counted == {
            (a.pk, h, h, "succeeded"): 2,
            (a.pk, h, h, "failed"): 1,
            (a.pk, h, h + timedelta(hours=2), "failed"): 1,  # and again in the row of the hour it ended in
            (a.pk, h1, h1, "blocked"): 1,
            (b.pk, _hour(T - timedelta(days=40)), _hour(T - timedelta(days=40)), "cancelled"): 1,
            (b.pk, _hour(T - timedelta(days=40)), h, "cancelled"): 1,
            (b.pk, h1, h1, "skipped"): 1,  # queued at 10:35
            (b.pk, h1, h1, "succeeded"): 1,  # started at 10:39
        }
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
