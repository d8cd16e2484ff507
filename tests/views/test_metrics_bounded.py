"""/metrics never counts the whole ledger (issue 25): final statuses are counters kept as runs end."""
from __future__ import annotations

import re
from datetime import timedelta
from itertools import count

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler.models import LineageEvent, LineageStatus, Run, RunStatus, RunTally, Team, TriggerKind
from scheduler.services.runs.transitions import run_refused
from scheduler.services.runs.end import run_finish
from scheduler.services.history.tally import runs_tallied, tally_fold, tally_totals

URL = reverse("scheduler:metrics")
S = RunStatus
_keys = count(1)


def _scrape(client) -> dict:
    response = client.get(URL, headers={"Authorization": "Bearer secret-token-123"})
    assert response.status_code == 200
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode()) for sample in family.samples}


def _run(schedule, status, **fields):
    return Run.objects.create(schedule=schedule, trigger_key=f"k{next(_keys)}", trigger_kind=TriggerKind.MANUAL,
                              workload_class_id=schedule.workload_class_id, status=status,
                              queued_at=timezone.now(), **fields)


def _history(schedule, n):
    at = timezone.now() - timedelta(days=3)
    Run.objects.bulk_create([
        Run(schedule=schedule, trigger_key=f"h{next(_keys)}", trigger_kind=TriggerKind.MANUAL,
            workload_class_id=schedule.workload_class_id, status=(S.SUCCEEDED, S.FAILED, S.SKIPPED)[i % 3],
            queued_at=at, started_at=at, finished_at=at)
        for i in range(n)])


@pytest.fixture
def token(settings):
    settings.ETL_METRICS_TOKEN = "secret-token-123"


def test_runs_are_counted_as_they_end_and_stay_counted_after_a_prune(client, token, make_schedule):
    schedule = make_schedule("orders")
    now = timezone.now()
    running = _run(schedule, S.RUNNING, started_at=now, dispatch_token="t")
    assert run_finish(run=running, status=S.SUCCEEDED, now=now, token="t")
    assert run_finish(run=_run(schedule, S.QUEUED), status=S.CANCELLED, now=now)
    assert run_refused(schedule=schedule, status=S.BLOCKED, reason="circuit open", trigger_kind=TriggerKind.MANUAL,
                       trigger_key="refused-1", now=now)
    assert run_refused(schedule=schedule, status=S.BLOCKED, reason="again", trigger_kind=TriggerKind.MANUAL,
                       trigger_key="refused-1", now=now) is None  # a double fire is no run, and no count
    _run(schedule, S.QUEUED)
    s = _scrape(client)
    assert s[("etl_runs_finished_total", (("status", "SUCCEEDED"),))] == 1
    assert s[("etl_runs_finished_total", (("status", "CANCELLED"),))] == 1
    assert s[("etl_runs_finished_total", (("status", "BLOCKED"),))] == 1
    assert s[("etl_runs_finished_total", (("status", "FAILED"),))] == 0
    assert s[("etl_runs", (("status", "QUEUED"),))] == 1
    Run.objects.filter(status__in=S.final()).delete()  # what a prune does: the counters do not go down
    assert _scrape(client)[("etl_runs_finished_total", (("status", "SUCCEEDED"),))] == 1


def test_a_compare_and_set_that_loses_counts_nothing(make_schedule, now):
    schedule = make_schedule("orders")
    run = _run(schedule, S.RUNNING, started_at=now, dispatch_token="t")
    Run.objects.filter(pk=run.pk).update(status=S.CANCELLED)  # someone else got there first
    assert not run_finish(run=run, status=S.SUCCEEDED, now=now, token="t")
    assert tally_totals()[S.SUCCEEDED] == 0


def test_folding_keeps_the_totals_and_leaves_one_row_per_status(db):
    for status in [S.SUCCEEDED] * 5 + [S.FAILED] * 3 + [S.SKIPPED]:
        runs_tallied([status])
    before = tally_totals()
    assert tally_fold() == 9 - 3
    assert tally_totals() == before and before[S.SUCCEEDED] == 5 and before[S.FAILED] == 3
    assert RunTally.objects.count() == 3
    assert tally_fold() == 0  # nothing left to fold
    runs_tallied([S.FAILED, S.FAILED])  # one row: FAILED x 2
    runs_tallied([S.SKIPPED])
    assert tally_fold(batch=4) == 1  # the three folded rows and the first new one; the newest waits
    assert tally_totals() == {**before, S.FAILED: 5, S.SKIPPED: 2} and RunTally.objects.count() == 4


def test_only_final_statuses_are_tallied(db):
    with pytest.raises(ValueError, match="status"):
        runs_tallied([S.QUEUED])
    assert not RunTally.objects.exists()


def _run_table_counts(queries) -> list[str]:
    table = connection.ops.quote_name(Run._meta.db_table)
    return [q["sql"] for q in queries if table in q["sql"] and "COUNT(" in q["sql"].upper()]


def test_the_scrape_costs_the_same_queries_whatever_the_history_and_never_counts_the_ledger(client, token,
                                                                                           make_schedule):
    schedule = make_schedule("orders")
    _history(schedule, 30)
    with CaptureQueriesContext(connection) as small:
        first = _scrape(client)
    _history(schedule, 600)
    with CaptureQueriesContext(connection) as large:
        second = _scrape(client)
    assert len(large.captured_queries) == len(small.captured_queries)
    age = ("etl_history_oldest_run_age_seconds", ())
    first.pop(age), second.pop(age)  # the clock moved
    assert first == second  # history written behind the services' back is no ended run, and not a live one
    for sql in _run_table_counts(large.captured_queries):
        # each count of runs is bounded: the active statuses (a handful) or the last hour's ends
        assert re.search(r"(\"status\" IN \(|\"finished_at\" >= |\"status\" = )", sql), sql


def test_a_scrape_reads_the_ledger_three_times_and_the_outbox_without_its_sent_rows(client, token, make_schedule):
    now = timezone.now()  # the scrape's last hour is the real clock's
    for i, team in enumerate(Team.objects.create(name=f"team-{i}") for i in range(3)):
        make_schedule(f"feed-{i}", owner=team)
    orders = make_schedule("orders")
    _history(orders, 30)
    running = _run(orders, S.RUNNING, started_at=now, stop_requested_at=now)
    _run(orders, S.SUCCEEDED, started_at=now - timedelta(seconds=40), finished_at=now - timedelta(seconds=10))
    event = {"run_uuid": "u", "event_type": "START", "job_name": "orders", "payload": {}, "created_at": now,
             "next_attempt_at": now}
    LineageEvent.objects.bulk_create([LineageEvent(status=LineageStatus.SENT, sent_at=now, **event) for _ in range(5)]
                                     + [LineageEvent(status=LineageStatus.PENDING, **event)])
    with CaptureQueriesContext(connection) as queries:
        s = _scrape(client)
    runs, outbox = (connection.ops.quote_name(m._meta.db_table) for m in (Run, LineageEvent))
    # the active runs (by class, schedule and status), the last hour's ends, the oldest run: once each
    assert sum(f"FROM {runs}" in q["sql"] for q in queries.captured_queries) == 3
    assert [q["sql"] for q in queries.captured_queries if f"FROM {outbox}" in q["sql"]
            and "'SENT'" in q["sql"]] == []
    assert s[("etl_lineage_outbox_pending", ())] == 1 and s[("etl_lineage_outbox_dead", ())] == 0
    assert s[("etl_runs_stopping", ())] == 1 and s[("etl_runs", (("status", "RUNNING"),))] == 1
    assert s[("etl_run_duration_seconds_count", ())] == 1
    assert s[("etl_team_active_runs", (("status", "RUNNING"), ("team", "default")))] == 1
    assert s[("etl_team_schedules", (("team", "team-1"),))] == 1 and running.stop_requested_at == now
