"""Priority queue, workload class limits, rate limit, and why a queued run waits."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, RunStatus, WorkloadClass
from scheduler.services.admission.dispatch import _rate_limited
from scheduler.services.admission.waits import explain_wait
from scheduler.services.runs.queue import run_enqueue, run_trigger_manual
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _queue(schedule, at, key):
    return run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key=key, now=at)


def test_higher_priority_runs_first_and_fifo_within_a_priority_across_classes(make_schedule, now):
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=1)
    heavy, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": 1})
    low = make_schedule("low", priority=1)
    high = make_schedule("high", priority=9)
    high_heavy = make_schedule("high-heavy", priority=9, workload_class=heavy)
    order = [
        _queue(low, now, "1"),
        _queue(high, now + timedelta(seconds=1), "2"),
        _queue(high_heavy, now + timedelta(seconds=2), "3"),
        _queue(high, now + timedelta(seconds=3), "4"),
        _queue(low, now + timedelta(seconds=4), "5"),
    ]
    started = []
    for i in range(4):
        started.append(tick_and_execute(now + timedelta(seconds=10 + i)))
    # one per class per tick: standard goes high(2), high(4), low(1), low(5); heavy takes its own at once
    assert started == [[order[1].pk, order[2].pk], [order[3].pk], [order[0].pk], [order[4].pk]]


def test_a_class_never_runs_more_than_its_limit_and_says_it_is_full(make_schedule, now):
    heavy, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": 2})
    schedule = make_schedule("big", workload_class=heavy)
    runs = [_queue(schedule, now + timedelta(seconds=i), str(i)) for i in range(5)]
    assert len(tick(now + timedelta(seconds=10))) == 2
    assert tick(now + timedelta(seconds=11)) == []
    assert Run.objects.filter(status=S.RUNNING, workload_class=heavy).count() == 2
    waiting = Run.objects.get(pk=runs[2].pk)
    # the holders named, oldest admitted first (issue 37: "why waiting" one hop further)
    assert explain_wait(waiting, now + timedelta(seconds=11)) == (
        f"class 'heavy' full (2/2): held by run #{runs[0].pk} of 'big', run #{runs[1].pk} of 'big'")


def test_max_runs_per_minute_keeps_the_excess_queued_until_allowed(make_schedule, now):
    schedule = make_schedule("limited", max_runs_per_minute=2)
    runs = [_queue(schedule, now, str(i)) for i in range(4)]
    assert len(tick_and_execute(now)) == 2
    assert tick_and_execute(now + timedelta(seconds=30)) == []
    third = Run.objects.get(pk=runs[2].pk)
    assert third.status == S.QUEUED
    assert explain_wait(third, now + timedelta(seconds=30)).startswith("rate limited until 12:01:00")
    assert tick_and_execute(now + timedelta(seconds=59)) == []
    assert len(tick_and_execute(now + timedelta(seconds=60))) == 2


def test_the_rate_limit_reads_only_the_limited_schedules_recent_admissions(make_schedule, now):
    """Most schedules have no rate limit: the dispatch tick does not group a minute of every schedule's runs
    (4.9 s a tick on SQLite with 1,000,000 runs and no limit at all, issue 25)."""
    free = make_schedule("free")
    _queue(free, now, "a")
    with CaptureQueriesContext(connection) as queries:
        assert _rate_limited(now) == set()
    assert [q["sql"] for q in queries.captured_queries if "scheduler_run" in q["sql"]] == []
    limited = make_schedule("limited", max_runs_per_minute=1)
    tick_and_execute(now)  # admits free's run
    _queue(limited, now, "b")
    tick_and_execute(now)
    assert _rate_limited(now + timedelta(seconds=1)) == {limited.pk}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL setting")
def test_postgresql_connections_do_not_jit_compile_the_schedulers_short_queries():
    """At 10,000,000 runs a query that reads nothing had an estimate over jit_above_cost: 190 ms of JIT a tick."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


def test_a_queued_run_knows_its_position_in_the_queue(make_schedule, now):
    schedule = make_schedule("s")
    runs = [_queue(schedule, now + timedelta(seconds=i), str(i)) for i in range(3)]
    assert explain_wait(runs[2], now) == "position 3 in queue"
    assert explain_wait(runs[0], now) == "position 1 in queue"


def test_a_queued_run_says_which_upstream_it_waits_for(make_schedule, now):
    make_schedule("x")
    dependent = make_schedule("y", depends_on=["x"])
    run = _queue(dependent, now, "1")
    assert explain_wait(run, now).startswith("waiting for upstream 'x'")
    assert tick(now) == []
    run.refresh_from_db()
    assert run.status == S.WAITING and explain_wait(run, now).startswith("waiting for upstream 'x'")


def test_a_queued_retry_says_when_it_may_start(make_schedule, now):
    run = _queue(make_schedule("s"), now, "1")
    Run.objects.filter(pk=run.pk).update(not_before=now + timedelta(minutes=5))
    run.refresh_from_db()
    assert explain_wait(run, now) == "retry not before 2026-03-02 12:05:00 UTC"
    assert tick(now) == []
    assert len(tick(now + timedelta(minutes=5))) == 1


def test_a_queued_run_of_an_open_breaker_says_until_when(make_schedule, now):
    schedule = make_schedule("s", breaker_cooldown_seconds=300)
    from scheduler.models import Schedule

    Schedule.objects.filter(pk=schedule.pk).update(breaker_status="open", breaker_opened_at=now,
                                                   breaker_current_cooldown_seconds=300)
    run = run_trigger_manual(schedule=Schedule.objects.get(pk=schedule.pk), actor="tests", now=now)
    assert explain_wait(run, now) == "circuit open until 2026-03-02 12:05:00 UTC"
