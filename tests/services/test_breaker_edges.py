"""The breaker at the run path's edges (issue 21, points 1 and 2).

A run's end is decided against the schedule row as it is when the end is
written, not as its worker read it when it claimed the run: a success zeroes
the count of a breaker that is closed now, and a run that is not the test run
never decides a half-open (or open) breaker.
"""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import BreakerStatus, Run, RunStatus, Schedule, WorkloadClass
from scheduler.services.runs.end import Ending, run_finish, runs_finish
from scheduler.services.runs.queue import run_build
from tests.services.semantics_helpers import tick

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture
def flaky(make_schedule):
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=20)
    return make_schedule("flaky", retry_max_attempts=1, breaker_threshold=2, breaker_cooldown_seconds=60,
                         breaker_max_cooldown_seconds=100)


def _claimed(schedule, count, now):
    """`count` runs admitted and claimed, each with the schedule row as its worker read it (all at once)."""
    Run.objects.bulk_create([run_build(schedule=schedule, trigger_kind="manual", trigger_key=f"m{i}",
                                       now=now + timedelta(microseconds=i)) for i in range(count)])
    pairs = tick(now)
    assert len(pairs) == count
    Run.objects.filter(pk__in=[rid for rid, _ in pairs]).update(started_at=now)
    return list(Run.objects.filter(pk__in=[rid for rid, _ in pairs]).select_related("schedule").order_by("id"))


def _end(run, status, now):
    return Ending(run=run, status=status, now=now, token=run.dispatch_token,
                  reason="boom" if status == S.FAILED else "", fields={"heartbeat_at": now})


def _breaker(schedule):
    row = Schedule.objects.get(pk=schedule.pk)
    return row.breaker_status, row.breaker_failures


def test_in_a_batch_fail_success_fail_leaves_the_breaker_closed_at_one(flaky, now):
    runs = _claimed(flaky, 3, now)
    out = runs_finish(endings=[_end(runs[0], S.FAILED, now), _end(runs[1], S.SUCCEEDED, now),
                               _end(runs[2], S.FAILED, now)])
    assert list(out.values()) == [S.FAILED, S.SUCCEEDED, S.FAILED]
    assert _breaker(flaky) == (BreakerStatus.CLOSED, 1), "the success zeroed the first failure"


def test_lone_runs_fail_success_fail_leave_the_breaker_closed_at_one(flaky, now):
    runs = _claimed(flaky, 3, now)  # each worker read the row while the count was 0
    for run, status in zip(runs, [S.FAILED, S.SUCCEEDED, S.FAILED]):
        assert run_finish(run=run, status=status, now=now, token=run.dispatch_token, reason="boom")
    assert _breaker(flaky) == (BreakerStatus.CLOSED, 1)


def test_bare_successes_together_zero_a_count_written_after_their_claim(flaky, make_schedule, now):
    other = make_schedule("other")
    runs = _claimed(flaky, 3, now) + _claimed(other, 2, now)
    Schedule.objects.filter(pk__in=[flaky.pk, other.pk]).update(breaker_failures=1)  # failures that ended meanwhile
    out = runs_finish(endings=[_end(r, S.SUCCEEDED, now) for r in runs])
    assert set(out.values()) == {S.SUCCEEDED}
    assert _breaker(flaky) == (BreakerStatus.CLOSED, 0) and _breaker(other) == (BreakerStatus.CLOSED, 0)


@pytest.mark.parametrize("failures_at_claim", [0, 1])
def test_a_success_leaves_a_breaker_opened_after_its_claim_open(flaky, now, failures_at_claim):
    Schedule.objects.filter(pk=flaky.pk).update(breaker_failures=failures_at_claim)
    late = _claimed(flaky, 1, now)[0]
    opened = now - timedelta(seconds=5)
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=2,
                                                breaker_opened_at=opened, breaker_current_cooldown_seconds=60)
    assert run_finish(run=late, status=S.SUCCEEDED, now=now, token=late.dispatch_token)
    row = Schedule.objects.get(pk=flaky.pk)
    assert (row.breaker_status, row.breaker_failures, row.breaker_opened_at) == (BreakerStatus.OPEN, 2, opened)


@pytest.mark.parametrize("failures_at_claim", [0, 1])
@pytest.mark.parametrize("batch", [False, True])
def test_a_late_success_does_not_close_a_half_open_breaker(flaky, now, batch, failures_at_claim):
    Schedule.objects.filter(pk=flaky.pk).update(breaker_failures=failures_at_claim)
    late = _claimed(flaky, 2, now)  # admitted while the breaker was closed
    # meanwhile two failures opened it and its cooldown ended: half-open, a test run admitted
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.HALF_OPEN, breaker_failures=2,
                                                breaker_opened_at=now - timedelta(seconds=61),
                                                breaker_current_cooldown_seconds=60)
    trial = Run.objects.create(**{f.attname: getattr(run_build(schedule=flaky, trigger_kind="manual",
                                                                trigger_key="trial", now=now), f.attname)
                                  for f in Run._meta.concrete_fields if f.attname != "id"})
    Schedule.objects.filter(pk=flaky.pk).update(breaker_trial_run_id=trial.pk)
    if batch:
        runs_finish(endings=[_end(r, S.SUCCEEDED, now) for r in late])
    else:
        for r in late:
            assert run_finish(run=r, status=S.SUCCEEDED, now=now, token=r.dispatch_token)
    row = Schedule.objects.get(pk=flaky.pk)
    assert (row.breaker_status, row.breaker_trial_run_id) == (BreakerStatus.HALF_OPEN, trial.pk), \
        "only the test run's result decides"


def test_the_test_runs_success_still_closes_a_half_open_breaker(flaky, now):
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=2,
                                                breaker_opened_at=now - timedelta(seconds=61),
                                                breaker_current_cooldown_seconds=60)
    Run.objects.create(**{f.attname: getattr(run_build(schedule=flaky, trigger_kind="manual", trigger_key="t",
                                                       now=now), f.attname)
                          for f in Run._meta.concrete_fields if f.attname != "id"})
    ((rid, token),) = tick(now)
    trial = Run.objects.select_related("schedule").get(pk=rid)
    assert trial.schedule.breaker_status == BreakerStatus.HALF_OPEN and trial.schedule.breaker_trial_run_id == rid
    Run.objects.filter(pk=rid).update(started_at=now)
    assert run_finish(run=trial, status=S.SUCCEEDED, now=now, token=token)
    assert _breaker(flaky) == (BreakerStatus.CLOSED, 0)


def _schedule_row_statements(queries) -> list[str]:
    """Statements that read, lock or write schedule rows (the breaker's); not the dependency table's."""
    return [q["sql"] for q in queries if re.search(r'(UPDATE|FROM) "?scheduler_schedule"? ', q["sql"])]


def test_on_the_hot_path_the_breaker_is_one_statement_for_a_batch(flaky, make_schedule, now):
    other = make_schedule("other")
    runs = _claimed(flaky, 3, now) + _claimed(other, 2, now)
    with CaptureQueriesContext(connection) as queries:
        runs_finish(endings=[_end(r, S.SUCCEEDED, now) for r in runs])
    (statement,) = _schedule_row_statements(queries)  # no read, no lock: one UPDATE
    assert statement.startswith('UPDATE "scheduler_schedule" SET "breaker_failures" = 0'), statement


def test_on_the_hot_path_a_lone_success_is_one_breaker_statement(flaky, now):
    (run,) = _claimed(flaky, 1, now)
    Schedule.objects.filter(pk=flaky.pk).update(breaker_failures=1)  # a failure that ended meanwhile
    with CaptureQueriesContext(connection) as queries:
        assert run_finish(run=run, status=S.SUCCEEDED, now=now, token=run.dispatch_token)
    (statement,) = _schedule_row_statements(queries)  # no read, no lock: one UPDATE
    assert statement.startswith('UPDATE "scheduler_schedule" SET "breaker_failures" = 0'), statement
    assert _breaker(flaky) == (BreakerStatus.CLOSED, 0)
