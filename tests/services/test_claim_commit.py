"""A worker's claim of a run: one statement, committed at once; on PostgreSQL without waiting for its WAL flush."""
from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import _claim
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db(transaction=True)
ASYNC = "set_config('synchronous_commit', 'off', true)"


def _admitted(make_schedule, now, n: int) -> list[Run]:
    schedule = make_schedule("claimed")
    runs = [run_trigger_manual(schedule=schedule, actor="tests", now=now) for _ in range(n)]
    admit_runs(now=now, holder="t")
    return list(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("pk"))


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_a_claim_is_one_statement_seen_by_another_connection_at_once_and_only_once(make_schedule, now):
    run, = _admitted(make_schedule, now, 1)
    with CaptureQueriesContext(connection) as ctx:
        assert _claim(run.pk, run.dispatch_token, now=now, worker="w1")
    assert len(ctx.captured_queries) == 1
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT worker_id FROM scheduler_run WHERE id = %s", [run.pk])
            assert cursor.fetchall() == [("w1",)]  # committed: a second worker's claim would see it taken
    finally:
        other.close()
    assert not _claim(run.pk, run.dispatch_token, now=now, worker="w2"), "a claimed run is not claimed twice"
    assert not _claim(run.pk, "another-token", now=now, worker="w2")
    assert Run.objects.get(pk=run.pk).worker_id == "w1"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's commit setting")
def test_on_postgresql_only_the_claim_commits_without_waiting_for_the_wal_flush(make_schedule, now):
    """set_config(..., true) in the claim's own implicit transaction: the session's setting stays, and a caller's
    transaction (lineage's START, a hand-over inside the end's transaction) keeps its commit as it is."""
    first, second = _admitted(make_schedule, now, 2)
    before = _setting()
    with CaptureQueriesContext(connection) as ctx:
        assert _claim(first.pk, first.dispatch_token, now=now, worker="w1")
    assert ASYNC in ctx.captured_queries[0]["sql"]
    assert _setting() == before == "on"  # the run's end and its heartbeats still wait for the flush
    with transaction.atomic():
        with CaptureQueriesContext(connection) as ctx:
            assert _claim(second.pk, second.dispatch_token, now=now, worker="w1")
        assert _setting() == before
    assert ASYNC not in ctx.captured_queries[0]["sql"]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite has no such setting")
def test_on_sqlite_the_claim_is_the_plain_update(make_schedule, now):
    run, = _admitted(make_schedule, now, 1)
    with CaptureQueriesContext(connection) as ctx:
        assert _claim(run.pk, run.dispatch_token, now=now, worker="w1")
    assert ctx.captured_queries[0]["sql"].startswith("UPDATE") and "set_config" not in ctx.captured_queries[0]["sql"]
