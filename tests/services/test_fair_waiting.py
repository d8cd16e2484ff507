"""Fair release of waiting runs (issue 21, point 5): a schedule with many WAITING runs does not keep other
schedules' waiting runs from being released or timed out; each tick looks at a bounded number, in turns."""
from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, RunStatus
from scheduler.services.runs import waiting
from scheduler.services.admission.dispatch import release_waiting
from scheduler.services.cluster.governance import dependency_timeouts
from scheduler.services.runs.queue import run_build, run_trigger_manual
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
BOUND = 10


@pytest.fixture
def small_bound():
    with mock.patch.object(waiting, "WAITING_PER_TICK", BOUND):
        yield


def _waiting(schedule, count, at):
    runs = [run_build(schedule=schedule, trigger_kind="manual", trigger_key=f"w{i}", now=at + timedelta(microseconds=i))
            for i in range(count)]
    for run in runs:
        run.status = S.WAITING
        run.reason = "waiting for upstream"
    Run.objects.bulk_create(runs)
    return list(Run.objects.filter(schedule=schedule, status=S.WAITING).order_by("id"))


def test_a_flood_of_waiting_runs_does_not_hold_back_another_schedules_release(make_schedule, now):
    make_schedule("never")  # an upstream that never succeeds
    ready = make_schedule("ready")
    flood = make_schedule("flooded", depends_on=["never"])
    lucky = make_schedule("lucky", depends_on=["ready"])
    flood_size = waiting.WAITING_PER_TICK + 1  # more than a tick looks at
    _waiting(flood, flood_size, now)  # older, lower ids: first in id order
    (late,) = _waiting(lucky, 1, now + timedelta(seconds=1))
    run_trigger_manual(schedule=ready, actor="tests", now=now)
    tick_and_execute(now + timedelta(seconds=2))  # 'ready' succeeds
    assert release_waiting(now=now + timedelta(seconds=3)) == 1
    late.refresh_from_db()
    assert late.status == S.QUEUED
    assert Run.objects.filter(schedule=flood, status=S.WAITING).count() == flood_size


def test_release_is_bounded_per_tick_and_shared_in_turns(make_schedule, now, small_bound):
    ready = make_schedule("ready")
    a = make_schedule("a", depends_on=["ready"])
    b = make_schedule("b", depends_on=["ready"])
    _waiting(a, 2 * BOUND, now)  # older: first in id order
    _waiting(b, 2 * BOUND, now + timedelta(seconds=1))
    run_trigger_manual(schedule=ready, actor="tests", now=now)
    tick_and_execute(now + timedelta(seconds=2))  # every waiting run may now go
    assert release_waiting(now=now + timedelta(seconds=3)) == BOUND, "a tick releases at most its bound"
    queued = dict(Run.objects.filter(status=S.QUEUED).values_list("schedule__name").annotate(n=Count("id")))
    assert queued == {"a": BOUND // 2, "b": BOUND // 2}, "in turns: the newer schedule is not held back"
    assert release_waiting(now=now + timedelta(seconds=4)) == BOUND, "the rest go in later ticks"


def test_turns_take_each_schedules_oldest_first(make_schedule, now, small_bound):
    make_schedule("never")
    a = make_schedule("a", depends_on=["never"])
    b = make_schedule("b", depends_on=["never"])
    runs_a = _waiting(a, 3 * BOUND, now)
    runs_b = _waiting(b, 2, now + timedelta(seconds=1))
    picked = waiting.waiting_in_turns()
    assert len(picked) == BOUND
    assert [r.pk for r in picked[:4]] == [runs_a[0].pk, runs_b[0].pk, runs_a[1].pk, runs_b[1].pk]
    assert [r.pk for r in picked[4:]] == [r.pk for r in runs_a[2:BOUND - 2]]


def test_a_flood_of_waiting_runs_does_not_hold_back_another_schedules_timeout(make_schedule, now):
    make_schedule("never")
    flood = make_schedule("flooded", depends_on=["never"], max_wait_seconds=86400)
    strict = make_schedule("strict", depends_on=["never"], max_wait_seconds=60)
    flood_size = waiting.WAITING_PER_TICK + 1
    _waiting(flood, flood_size, now)
    (late,) = _waiting(strict, 1, now + timedelta(seconds=1))
    failed = dependency_timeouts(now=now + timedelta(seconds=62))
    assert failed == [late.pk]
    late.refresh_from_db()
    assert late.status == S.FAILED and late.reason.startswith("dependency timeout: waited more than 60 s")
    assert Run.objects.filter(schedule=flood, status=S.WAITING).count() == flood_size


def test_the_timeout_sweep_is_bounded_and_fair(make_schedule, now, small_bound):
    make_schedule("never")
    a = make_schedule("a", depends_on=["never"], max_wait_seconds=60)
    b = make_schedule("b", depends_on=["never"], max_wait_seconds=30)
    _waiting(a, 2 * BOUND, now)
    (rb,) = _waiting(b, 1, now + timedelta(seconds=1))
    failed = dependency_timeouts(now=now + timedelta(seconds=120))
    assert len(failed) == BOUND and rb.pk in failed
    assert dependency_timeouts(now=now + timedelta(seconds=120)), "the rest go in later ticks"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's plan is asked; PostgreSQL's follows its statistics")
def test_the_turns_read_only_the_waiting_runs_never_the_finished_ones(make_schedule, now):
    """Numbering turns over the runs table let SQLite walk every run in (schedule, id) order: 4.9 s a dispatch tick
    with 1,000,000 finished runs and none WAITING (issue 25). A partial index holds only the WAITING runs."""
    schedules = [make_schedule(f"s{i}") for i in range(5)]
    finished = [run_build(schedule=s, trigger_kind="manual", trigger_key=f"f{i}", now=now - timedelta(hours=1))
                for s in schedules for i in range(400)]
    for run in finished:
        run.status, run.finished_at = S.SUCCEEDED, now
    Run.objects.bulk_create(finished)
    _waiting(schedules[0], 3, now)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the planner's statistics, as a long-lived database has them
    with CaptureQueriesContext(connection) as queries:
        assert len(waiting.waiting_in_turns()) == 3
    turns = next(q["sql"] for q in queries.captured_queries if "ROW_NUMBER" in q["sql"].upper())
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + turns)
        plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
    assert "USING INDEX run_waiting_turns_idx" in plan, plan
