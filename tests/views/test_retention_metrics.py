"""/metrics tells whether retention keeps up: the oldest run's age and what the latest prune deleted."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AuditEntry, Run, RunStatus, TriggerKind
from scheduler.services.history.prune import history_prune, history_status, latest_prune
from tests.views.test_metrics import _samples

URL = reverse("scheduler:metrics")
AUTH = {"Authorization": "Bearer secret-token-123"}


def _run(schedule, key, age):
    at = timezone.now() - age
    return Run.objects.create(schedule=schedule, trigger_key=key, trigger_kind=TriggerKind.MANUAL,
                              workload_class=schedule.workload_class, status=RunStatus.FAILED, queued_at=at,
                              finished_at=at)


def test_the_oldest_run_and_the_latest_prune_are_reported(client, settings, make_schedule):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    s = _samples(client.get(URL, headers=AUTH))
    assert s[("etl_history_oldest_run_age_seconds", ())] == 0
    assert s[("etl_history_last_prune_age_seconds", ())] == -1
    schedule = make_schedule("orders")
    _run(schedule, "old", timedelta(days=100))
    _run(schedule, "older", timedelta(days=120))
    _run(schedule, "young", timedelta(days=1))
    s = _samples(client.get(URL, headers=AUTH))
    assert 120 * 86400 <= s[("etl_history_oldest_run_age_seconds", ())] < 120 * 86400 + 600
    history_prune(now=timezone.now())
    s = _samples(client.get(URL, headers=AUTH))
    assert s[("etl_history_pruned_rows", (("kind", "runs"),))] == 2
    assert s[("etl_history_pruned_rows", (("kind", "ticks"),))] == 0
    assert 0 <= s[("etl_history_last_prune_age_seconds", ())] < 600
    assert 86400 <= s[("etl_history_oldest_run_age_seconds", ())] < 86400 + 600


def _entry(action, at, after=None):
    return AuditEntry(at=at, actor="prune", action=action, target_type="history", after=after)


@pytest.mark.django_db
def test_the_latest_prune_is_one_seek_however_many_prunes_the_log_keeps():
    """The loop audits every prune that deleted rows (every 5 minutes: ~100,000 entries a year, never deleted).
    Read through the `action` index, PostgreSQL sorted them all on every scrape; the partial index
    `audit_prune_idx` gives the newest in one seek, and SQLite's `action` index is in id order already."""
    now = timezone.now()
    entries = []
    for i in range(40):
        entries.append(_entry("history.prune", now - timedelta(minutes=5 * (40 - i)), {"runs": i}))
        entries.append(_entry("run.trigger", now - timedelta(minutes=5 * (40 - i)) + timedelta(seconds=1)))
    AuditEntry.objects.bulk_create(entries)
    status = history_status(now)
    assert status["last_prune"]["runs"] == 39
    assert 5 * 60 - 1 <= status["last_prune_age_seconds"] <= 5 * 60 + 1
    sql, params = latest_prune()[:1].query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = " ".join(str(cell) for row in cursor.fetchall() for cell in row)
            assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan
            return
        cursor.execute("ANALYZE scheduler_auditentry")
        cursor.execute("SET LOCAL enable_seqscan = off")  # the table is small: make the planner show its index
        cursor.execute("EXPLAIN " + sql, params)
        plan = " ".join(str(cell) for row in cursor.fetchall() for cell in row)
    assert "audit_prune_idx" in plan and "Sort" not in plan, plan
