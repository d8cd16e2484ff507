"""Migration 0003: the boolean `catchup` becomes the catch-up policy without losing what each row meant."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("scheduler", "0002_groups_and_classes")]
AFTER = [("scheduler", "0003_overlap_and_catchup_policies")]


def test_true_becomes_all_and_false_becomes_latest():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Schedule, WorkloadClass = apps.get_model("scheduler", "Schedule"), apps.get_model("scheduler", "WorkloadClass")
    wc, _ = WorkloadClass.objects.get_or_create(name="standard", defaults={"concurrency_limit": 4})
    Schedule.objects.create(name="every", target_id="demo.noop", workload_class=wc, catchup=True, max_catchup=7)
    Schedule.objects.create(name="coalesce", target_id="demo.noop", workload_class=wc, catchup=False)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        rows = dict(apps.get_model("scheduler", "Schedule").objects.values_list("name", "catchup"))
        assert rows == {"every": "all", "coalesce": "latest"}
        assert set(apps.get_model("scheduler", "Schedule").objects.values_list("overlap_policy", flat=True)) == {""}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
