"""Each schedule's kept latest success and failure (services/outcomes.py) says what the ledger says after every
way a run ends, a rolled-back end, a batch, a backfill window, and a prune."""
from __future__ import annotations

import importlib
from datetime import timedelta
from itertools import count
from unittest import mock

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Backfill, LatestOutcome, Run, RunStatus, StopKind, TriggerKind, WatermarkState
from scheduler.services.runs import end as finish
from scheduler.services.runs.transitions import run_refused
from scheduler.services.runs.end import Ending, run_cancel, run_finish, run_lost, run_stop_settled, runs_finish, runs_lost
from scheduler.services.history.outcomes import outcomes_rebuild, outcomes_record, outcomes_stale
from scheduler.services.history.prune import history_prune
from scheduler.services.runs.queue import run_build

pytestmark = pytest.mark.django_db
S = RunStatus
_keys = count(1)


def _run(schedule, now, status=S.RUNNING, *, attempt=1, max_attempts=1, backfill=None, **fields):
    """A run as the dispatcher and a worker leave it: RUNNING runs claimed, with a token and a heartbeat."""
    run = run_build(schedule=schedule, trigger_kind=TriggerKind.MANUAL, trigger_key=f"k{next(_keys)}", now=now,
                    backfill=backfill)
    run.status, run.attempt, run.max_attempts = status, attempt, max_attempts
    if status == S.RUNNING:
        run.admitted_at = run.started_at = run.heartbeat_at = now
        run.dispatch_token, run.worker_id = f"tok-{run.trigger_key}", "c1@host:1"
    for key, value in fields.items():
        setattr(run, key, value)
    run.save()
    return Run.objects.select_related("schedule").get(pk=run.pk)


def _row(schedule) -> tuple:
    row = LatestOutcome.objects.filter(schedule=schedule).first()
    if row is None:
        return (None, None, None, None)
    return (row.live_success_id, row.live_failure_id, row.failure_id, row.success_id)


def test_every_way_a_run_ends_keeps_the_row_what_the_ledger_says(make_schedule, now):
    schedule = make_schedule("orders")
    ok = _run(schedule, now)
    assert run_finish(run=ok, status=S.SUCCEEDED, now=now, token=ok.dispatch_token)
    assert _row(schedule) == (ok.pk, None, None, ok.pk) and outcomes_stale() == []

    failed = _run(schedule, now)
    assert run_finish(run=failed, status=S.FAILED, now=now, reason="boom", token=failed.dispatch_token)
    assert _row(schedule) == (ok.pk, failed.pk, failed.pk, ok.pk)

    timed_out = _run(schedule, now, max_attempts=2)  # attempts left: re-queued, not ended, nothing to record
    assert run_finish(run=timed_out, status=S.FAILED, now=now, token=timed_out.dispatch_token, retryable=True)
    assert timed_out.status == S.QUEUED and _row(schedule) == (ok.pk, failed.pk, failed.pk, ok.pk)

    cancelled = _run(schedule, now, status=S.QUEUED)
    assert run_cancel(run=cancelled, actor="tests")
    assert run_refused(schedule=schedule, status=S.BLOCKED, reason="circuit open", trigger_kind=TriggerKind.MANUAL,
                       trigger_key="refused", now=now)
    assert _row(schedule) == (ok.pk, failed.pk, failed.pk, ok.pk), "a cancel or a block is no verdict"

    waited = _run(schedule, now, status=S.WAITING)  # a dependency timeout
    assert run_finish(run=waited, status=S.FAILED, now=now, reason="dependency timeout", actor="governance",
                      audit_action="run.dependency_timeout")
    assert _row(schedule) == (ok.pk, waited.pk, waited.pk, ok.pk)

    lost = _run(schedule, now)
    assert run_lost(run=lost, now=now, why="worker lost: no heartbeat") == "failed"
    assert _row(schedule)[1:3] == (lost.pk, lost.pk)

    stopped = _run(schedule, now, stop_requested_at=now, stop_kind=StopKind.TIMEOUT, stop_reason="timed out after 5 s")
    assert run_stop_settled(run=stopped, now=now, why="its worker process has ended")
    assert stopped.status == S.FAILED and _row(schedule)[1:3] == (stopped.pk, stopped.pk)

    later = now + timedelta(minutes=1)
    again = _run(schedule, later)
    assert run_finish(run=again, status=S.SUCCEEDED, now=later, token=again.dispatch_token)
    assert _row(schedule) == (again.pk, stopped.pk, stopped.pk, again.pk)
    assert outcomes_stale() == []


def test_governance_settling_lost_runs_in_bulk_records_the_failed_ones(make_schedule, now):
    schedule = make_schedule("orders", retry_max_attempts=2)
    spent = [_run(schedule, now, attempt=2, max_attempts=2) for _ in range(2)]
    spare = _run(schedule, now, attempt=1, max_attempts=2)
    out = runs_lost(runs=[*spent, spare], now=now + timedelta(minutes=5))
    assert out == {"requeued": [spare.pk], "failed": [r.pk for r in spent]}
    assert _row(schedule) == (None, spent[1].pk, spent[1].pk, None) and outcomes_stale() == []


def test_a_batch_writes_its_rows_in_one_statement_and_drops_what_a_rolled_back_end_recorded(make_schedule, now):
    first, second = make_schedule("a"), make_schedule("b")
    runs = [_run(first, now), _run(second, now), _run(second, now), _run(first, now)]
    endings = [Ending(run=runs[0], status=S.SUCCEEDED, now=now, token=runs[0].dispatch_token),
               Ending(run=runs[1], status=S.FAILED, now=now, reason="boom", token=runs[1].dispatch_token),
               Ending(run=runs[2], status=S.SUCCEEDED, now=now, token=runs[2].dispatch_token),
               Ending(run=runs[3], status=S.FAILED, now=now, reason="bad row", token=runs[3].dispatch_token)]
    real = finish.breaker_on_result

    def breaker(*, run, **kwargs):
        if run.pk == runs[3].pk:  # after its compare-and-set recorded it: its savepoint is rolled back
            raise RuntimeError("the breaker row is unreadable")
        return real(run=run, **kwargs)

    with mock.patch.object(finish, "breaker_on_result", side_effect=breaker), \
            CaptureQueriesContext(connection) as queries:
        out = runs_finish(endings=endings)
    assert out == {runs[0].pk: S.SUCCEEDED, runs[1].pk: S.FAILED, runs[2].pk: S.SUCCEEDED, runs[3].pk: "error"}
    table = connection.ops.quote_name(LatestOutcome._meta.db_table)
    assert sum(q["sql"].startswith(f"INSERT INTO {table}") for q in queries) == 1
    assert _row(first) == (runs[0].pk, None, None, runs[0].pk), "the rolled-back failure is not recorded"
    assert _row(second) == (runs[2].pk, runs[1].pk, runs[1].pk, runs[2].pk)
    assert outcomes_stale() == []


def test_ends_written_out_of_order_leave_the_same_row(make_schedule, now):
    schedule = make_schedule("orders")
    older, newer = _run(schedule, now), _run(schedule, now)
    # the newer run ends first, the older one a minute later: the latest success by id is `newer`, the one that
    # finished last is `older`
    assert run_finish(run=newer, status=S.SUCCEEDED, now=now, token=newer.dispatch_token)
    assert run_finish(run=older, status=S.SUCCEEDED, now=now + timedelta(minutes=1), token=older.dispatch_token)
    row = LatestOutcome.objects.get(schedule=schedule)
    assert (row.live_success_id, row.success_id, row.success_at) == (newer.pk, older.pk, now + timedelta(minutes=1))
    outcomes_record([newer])  # recorded again (a retried statement): nothing moves back
    assert LatestOutcome.objects.get(schedule=schedule).success_id == older.pk and outcomes_stale() == []


def test_a_backfill_window_counts_for_the_work_list_not_for_the_live_verdict(make_schedule, now):
    schedule = make_schedule("orders")
    backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to="20", window_size="10",
                                       reason="r", requested_by="tests", created_at=now)
    window = _run(schedule, now, backfill=backfill)
    assert run_finish(run=window, status=S.FAILED, now=now, token=window.dispatch_token)
    assert _row(schedule) == (None, None, window.pk, None)
    later = _run(schedule, now, backfill=backfill)
    assert run_finish(run=later, status=S.SUCCEEDED, now=now + timedelta(seconds=1), token=later.dispatch_token)
    assert _row(schedule) == (None, None, window.pk, later.pk) and outcomes_stale() == []


def _ended(schedule, status, at, **fields):
    run = _run(schedule, at, status=status, started_at=at, finished_at=at, **fields)
    outcomes_record([run])
    return run


def test_a_prune_moves_the_row_to_the_next_run_the_ledger_holds(make_schedule, now):
    schedule, other = make_schedule("orders"), make_schedule("other")
    old = now - timedelta(days=200)  # past the 90-day default
    kept_failure = _ended(schedule, S.FAILED, old - timedelta(days=2))
    WatermarkState.objects.create(schedule=schedule, value="5", updated_by_run=kept_failure)  # never deleted
    live_success = _ended(schedule, S.SUCCEEDED, old - timedelta(days=1))
    _ended(schedule, S.FAILED, old)
    backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to="20", window_size="10",
                                       reason="r", requested_by="tests", created_at=old, status="COMPLETED")
    window = _ended(schedule, S.SUCCEEDED, old + timedelta(hours=1), backfill=backfill)  # its latest success
    latest = _ended(schedule, S.SKIPPED, now)  # its latest run
    untouched = _ended(other, S.FAILED, now)
    before = _row(other)

    counts = history_prune(now=now)
    assert counts["runs"] == 2  # the later failure and the live success; not what the scheduler stands on
    assert set(Run.objects.filter(schedule=schedule).values_list("pk", flat=True)) == {kept_failure.pk, window.pk,
                                                                                       latest.pk}
    assert not Run.objects.filter(pk=live_success.pk).exists()
    assert _row(schedule) == (None, kept_failure.pk, kept_failure.pk, window.pk)
    assert _row(other) == before == (None, untouched.pk, untouched.pk, None)
    assert outcomes_stale() == []


def test_the_migration_seeds_the_rows_the_ledger_gives(make_schedule, now):
    schedule, idle = make_schedule("orders"), make_schedule("idle")
    failed = _run(schedule, now, status=S.FAILED, finished_at=now)
    ok = _run(schedule, now, status=S.SUCCEEDED, finished_at=now - timedelta(minutes=1))
    assert outcomes_stale() == [schedule.pk]  # written directly: nothing recorded them
    importlib.import_module("scheduler.migrations.0029_overview_indexes").seed(apps, None)
    assert _row(schedule) == (ok.pk, failed.pk, failed.pk, ok.pk) and _row(idle) == (None, None, None, None)
    assert outcomes_stale() == []
    LatestOutcome.objects.all().delete()
    assert outcomes_rebuild() == 2 and outcomes_stale() == []
