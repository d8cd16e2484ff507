"""No page, scrape or tick aggregates over the whole ledger (issue 25).

Every query that counts, sums, takes a maximum of or numbers runs (or audit entries) carries a predicate that
bounds it whatever the history: the few active statuses, a recent time range, or one schedule / backfill. The
tables here are small; the shape of the SQL is what holds at 10 million runs (docs/benchmarks.md has the timings).
"""
from __future__ import annotations

import re
from datetime import timedelta
from itertools import count

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AuditEntry, Run, RunStatus, TriggerKind
from scheduler.services.cluster.governance import governance_tick

AGGREGATE = re.compile(r"\b(COUNT|MAX|MIN|SUM|ROW_NUMBER)\s*\(|GROUP BY", re.I)
ACTIVE = r"'(?:QUEUED|WAITING|RUNNING)'"
BOUNDS = [
    rf'"status" IN \({ACTIVE}(?:, {ACTIVE})*\)',  # the live runs: a handful
    rf'"status" = {ACTIVE}',
    r'"(?:finished_at|queued_at|at)" >= ',  # a recent range of an index
    r'"(?:backfill_id|run_id)" = ',  # one backfill's windows, one run's lines
]
_keys = count(1)


def _unbounded(queries) -> list[str]:
    tables = [connection.ops.quote_name(m._meta.db_table) for m in (Run, AuditEntry)]
    out = []
    for q in queries:
        sql = q["sql"]
        if any(t in sql for t in tables) and AGGREGATE.search(sql) and not any(re.search(b, sql) for b in BOUNDS):
            out.append(sql)
    return out


@pytest.fixture
def history(make_schedule):
    now = timezone.now()
    schedules = [make_schedule(f"feed-{i}") for i in range(3)]
    runs = []
    for i in range(450):
        at = now - timedelta(minutes=i)
        status = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED)[i % 3]
        runs.append(Run(schedule=schedules[i % 3], trigger_key=f"h{next(_keys)}", trigger_kind=TriggerKind.CRON,
                        workload_class_id=schedules[0].workload_class_id, status=status, queued_at=at,
                        started_at=at, finished_at=at + timedelta(seconds=5), reason="x"))
    runs.append(Run(schedule=schedules[0], trigger_key="live", trigger_kind=TriggerKind.MANUAL,
                    workload_class_id=schedules[0].workload_class_id, status=RunStatus.RUNNING, queued_at=now,
                    started_at=now, heartbeat_at=now))
    Run.objects.bulk_create(runs)
    AuditEntry.objects.bulk_create([AuditEntry(at=now - timedelta(days=i), actor="ada", action="run.trigger",
                                               target_type="run", target_id=str(i), target_repr="r")
                                    for i in range(60)])
    return schedules


URLS = {
    "overview": lambda s: reverse("scheduler:overview"),
    "schedules": lambda s: reverse("scheduler:schedules"),
    "schedule": lambda s: reverse("scheduler:schedule_detail", args=[s[0].pk]),
    "runs": lambda s: reverse("scheduler:runs"),
    "timeline": lambda s: reverse("scheduler:timeline") + "?range=24h",  # 450 runs: grouped
    "audit": lambda s: reverse("scheduler:audit"),
    "metrics": lambda s: reverse("scheduler:metrics"),
    "status": lambda s: reverse("scheduler:api_status"),
}


@pytest.mark.parametrize("page", sorted(URLS))
def test_no_page_aggregates_over_the_whole_ledger(client, make_user, settings, history, page):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    client.force_login(make_user("ada", "admin", is_staff=True))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(URLS[page](history), headers={"Authorization": "Bearer secret-token-123"}
                              if page == "metrics" else {})
    assert response.status_code == 200
    assert _unbounded(queries.captured_queries) == []


def test_the_governance_tick_aggregates_over_nothing_unbounded(history):
    with CaptureQueriesContext(connection) as queries:
        governance_tick(now=timezone.now(), holder="tests")
    assert _unbounded(queries.captured_queries) == []
