"""Dependencies tied to runs: a downstream run is judged on the upstream runs it stands for."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, RunStatus, RunUpstream
from scheduler.services.runs import dependencies
from scheduler.services.admission.dispatch import release_waiting
from scheduler.services.runs.queue import run_build, run_enqueue, run_trigger_manual
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _only(schedule) -> Run:
    (run,) = Run.objects.filter(schedule=schedule)
    return run


def _stands_for(run) -> dict[str, int | None]:
    return {link.upstream_schedule.name: link.upstream_run_id
            for link in RunUpstream.objects.filter(run=run).select_related("upstream_schedule")}


def test_a_downstream_run_triggered_by_a1_is_not_held_back_by_a_later_queued_a2(make_schedule, now):
    a = make_schedule("a")
    b = make_schedule("b", trigger_kind="upstream", depends_on=["a"])
    a1 = run_trigger_manual(schedule=a, actor="tests", now=now)
    tick_and_execute(now)
    b_run = _only(b)
    assert _stands_for(b_run) == {"a": a1.pk}

    later = now + timedelta(minutes=1)
    a2 = run_trigger_manual(schedule=a, actor="tests", now=later)  # queued, not run yet
    assert dependencies.verdict_for(b_run).action == "admit"
    sent = [rid for rid, _ in tick(later)]
    assert b_run.pk in sent and a2.pk in sent
    b_run.refresh_from_db()
    assert b_run.status == S.RUNNING


def test_a_downstream_run_that_stands_for_a1_is_not_blocked_when_a2_fails(make_schedule, now):
    a = make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    c = make_schedule("c")
    d = make_schedule("d", trigger_kind="upstream", depends_on=["a", "c"])
    a1 = run_trigger_manual(schedule=a, actor="tests", now=now)
    tick_and_execute(now)
    d_run = _only(d)
    tick(now)  # d's run waits for c
    d_run.refresh_from_db()
    assert d_run.status == S.WAITING

    # a second run of a fails while d's run (standing for a1) still waits for c
    a2 = run_trigger_manual(schedule=a, actor="tests", params={"fail": True}, now=now + timedelta(minutes=1))
    tick_and_execute(now + timedelta(minutes=1))
    a2.refresh_from_db()
    assert a2.status == S.FAILED
    d_run.refresh_from_db()
    assert d_run.status == S.WAITING  # neither blocked by a2 nor made to wait for it

    c1 = run_trigger_manual(schedule=c, actor="tests", now=now + timedelta(minutes=2))
    tick_and_execute(now + timedelta(minutes=2))  # c1 succeeds: d's run now stands for a1 and c1
    assert tick_and_execute(now + timedelta(minutes=3)) == [d_run.pk]
    d_run.refresh_from_db()
    assert d_run.status == S.SUCCEEDED
    assert _stands_for(d_run) == {"a": a1.pk, "c": c1.pk}
    assert Run.objects.filter(schedule=d).count() == 1


def test_an_own_trigger_run_is_never_matched_with_an_upstream_success_from_30_days_ago(make_schedule, now):
    a = make_schedule("a")
    c = make_schedule("c", depends_on=["a"], max_upstream_age_seconds=86400)
    old = run_build(schedule=a, trigger_kind="manual", trigger_key="old", status=S.SUCCEEDED,
                    logical_time=now - timedelta(days=30), now=now - timedelta(days=30))
    old.save()
    c_run = run_trigger_manual(schedule=c, actor="tests", now=now)
    tick(now)
    c_run.refresh_from_db()
    assert c_run.status == S.WAITING and "'a' (no run yet)" in c_run.reason

    # the upstream run of its logical time (at or before it, within a day) counts
    a1 = run_trigger_manual(schedule=a, actor="tests", now=now - timedelta(hours=1))
    tick_and_execute(now)
    assert tick_and_execute(now + timedelta(seconds=1)) == [c_run.pk]
    assert _stands_for(c_run) == {"a": a1.pk}


def test_an_own_trigger_run_is_not_blocked_by_an_upstream_run_after_its_logical_time(make_schedule, now):
    a = make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    c = make_schedule("c", depends_on=["a"])
    a1 = run_trigger_manual(schedule=a, actor="tests", now=now - timedelta(minutes=5))
    tick_and_execute(now - timedelta(minutes=5))
    # a later run of a (logical time after c's fire time) fails before c's run is looked at
    a2 = run_trigger_manual(schedule=a, actor="tests", params={"fail": True}, now=now + timedelta(minutes=1))
    tick_and_execute(now + timedelta(minutes=1))
    assert Run.objects.get(pk=a2.pk).status == S.FAILED
    c_run = run_enqueue(schedule=c, trigger_kind="cron", trigger_key="cron:1", logical_time=now,
                        now=now + timedelta(minutes=2))
    assert c_run.pk in tick_and_execute(now + timedelta(minutes=2))
    c_run.refresh_from_db()
    assert c_run.status == S.SUCCEEDED and _stands_for(c_run) == {"a": a1.pk}


def test_an_own_trigger_run_is_blocked_by_the_failed_upstream_run_of_its_logical_time(make_schedule, now):
    a = make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    c = make_schedule("c", depends_on=["a"])
    a1 = run_trigger_manual(schedule=a, actor="tests", params={"fail": True}, now=now - timedelta(minutes=5))
    tick_and_execute(now - timedelta(minutes=5))
    c_run = run_trigger_manual(schedule=c, actor="tests", now=now)
    tick(now)
    c_run.refresh_from_db()
    assert c_run.status == S.BLOCKED and c_run.reason == f"upstream 'a' failed (run {a1.pk})"
    assert _stands_for(c_run) == {"a": a1.pk}


def test_dependency_verdicts_cost_the_same_queries_for_5_or_50_waiting_runs(make_schedule, now):
    for name in ("u1", "u2", "u3"):
        make_schedule(name)
    child = make_schedule("child", depends_on=["u1", "u2", "u3"])

    def waiting_runs(count: int, start: int) -> int:
        for i in range(count):
            run_build(schedule=child, trigger_kind="cron", trigger_key=f"cron:{start + i}", status=S.WAITING,
                      logical_time=now, now=now).save()
        with CaptureQueriesContext(connection) as queries:
            assert release_waiting(now=now) == 0
        return len(queries)

    few = waiting_runs(5, 0)
    many = waiting_runs(45, 100)  # now 50 waiting
    assert Run.objects.filter(schedule=child, status=S.WAITING).count() == 50
    assert many == few <= 5
