"""The overview reads a bounded number of rows whatever the history (issue 25): its failing schedules and failure
work list from each schedule's kept latest success and failure, its lost runs through their own index."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from scheduler import oncall, worklist
from scheduler.models import RunStatus

pytestmark = pytest.mark.django_db
URL = reverse("scheduler:overview")
# a subquery into the ledger per schedule row (`U0."schedule_id" = ("scheduler_schedule"."id")`): what the
# failing schedules and the work list read before their rows were kept
PER_SCHEDULE = re.compile(r'FROM "scheduler_run" U\d+ WHERE .*"schedule_id" = \("scheduler_(schedule|latestoutcome)"')


def _queries(client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(URL + "?team=all").status_code == 200
    return [q["sql"] for q in queries.captured_queries]


def _flapping(make_schedule, make_run, now, names):
    for i, name in enumerate(names):
        schedule = make_schedule(name)
        make_run(schedule, RunStatus.SUCCEEDED, finished_at=now - timedelta(minutes=30))
        # in the order they are made, as ids and times go
        make_run(
            schedule, RunStatus.FAILED, reason=f"{name} broke", finished_at=now - timedelta(minutes=len(names) - i)
        )


def test_the_overview_asks_the_same_queries_for_3_or_30_failing_schedules(operator_client, make_schedule, make_run,
                                                                            now):
    _flapping(make_schedule, make_run, now, [f"a{i}" for i in range(3)])
    few = _queries(operator_client)
    _flapping(make_schedule, make_run, now, [f"b{i}" for i in range(27)])
    many = _queries(operator_client)
    assert len(few) == len(many)
    assert not [sql for sql in many if PER_SCHEDULE.search(sql)], "no seek into the ledger per schedule"
    page = operator_client.get(URL + "?team=all")
    assert len([i for i in page.context["attention"] if i["kind"] == "failing"]) == 30
    assert len(page.context["failures"]["open"]) == 30


def test_the_work_list_looks_at_the_schedules_that_failed_last(make_schedule, make_run, now, monkeypatch):
    monkeypatch.setattr(worklist, "CANDIDATES", 2)
    _flapping(make_schedule, make_run, now, ["oldest", "newer", "newest"])
    work = worklist.failure_worklist(now)
    assert [item["schedule"].name for item in work["open"]] == ["newest", "newer"]
    assert work["open"][0]["run"].reason == "newest broke" and work["open"][0]["count"] == 1


def test_an_item_keeps_the_start_of_the_error_when_the_run_gave_no_reason(make_schedule, make_run, now):
    make_run(make_schedule("orders"), RunStatus.FAILED, reason="", error="Traceback: " + "x" * 5000)
    [item] = worklist.failure_worklist(now)["open"]
    assert item["run"].error == ("Traceback: " + "x" * 5000)[:worklist.ERROR_SHOWN]


def test_the_lost_runs_are_read_through_their_own_index(make_schedule, make_run, now):
    lost = make_run(make_schedule("lost"), RunStatus.FAILED, queued_at=now - timedelta(minutes=30),
                    reason="worker lost: no heartbeat from a/1 since 11:00:00 UTC (attempt 3/3)")
    make_run(make_schedule("down"), RunStatus.FAILED, queued_at=now - timedelta(minutes=30), reason="source down")
    make_run(make_schedule("older"), RunStatus.FAILED, queued_at=now - timedelta(hours=25), reason="worker lost: x")
    qs = oncall.lost_runs(now)
    assert [run.pk for run in qs] == [lost.pk]
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # usable, not merely preferred: SQLite refuses to prepare a query INDEXED BY an index it cannot use
            cursor.execute(sql.replace('FROM "scheduler_run"', 'FROM "scheduler_run" INDEXED BY run_lost_idx', 1),
                           params)
            assert [row[0] for row in cursor.fetchall()] == [lost.pk]
            return
        cursor.execute("SET LOCAL enable_seqscan = off")  # the table is small: make the planner show its index
        cursor.execute("EXPLAIN " + sql, params)
        plan = " ".join(str(cell) for row in cursor.fetchall() for cell in row)
    assert "run_lost_idx" in plan, plan
