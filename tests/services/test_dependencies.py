"""Dependencies between schedules: conditions, upstream triggers, transitive blocking, cycles, timeouts."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.models import Condition, Run, RunStatus, TriggerKind
from scheduler.services.runs import dependencies
from scheduler.services.common.errors import ServiceError
from scheduler.services.cluster.governance import dependency_timeouts
from scheduler.services.runs.queue import run_build, run_enqueue, run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _runs(schedule):
    return list(Run.objects.filter(schedule=schedule).order_by("id"))


def test_an_upstream_triggered_schedule_runs_when_its_upstream_succeeds(make_schedule, now):
    a = make_schedule("a")
    b = make_schedule("b", trigger_kind="upstream", depends_on=["a"])
    run_trigger_manual(schedule=a, actor="tests", now=now)
    tick_and_execute(now)
    (queued,) = _runs(b)
    assert queued.status == S.QUEUED and queued.trigger_kind == TriggerKind.UPSTREAM
    assert queued.triggered_by == "upstream:a"
    tick_and_execute(now)
    queued.refresh_from_db()
    assert queued.status == S.SUCCEEDED


def test_a_schedule_with_its_own_trigger_waits_until_its_upstream_succeeds(make_schedule, now):
    a = make_schedule("a")
    c = make_schedule("c", depends_on=["a"])
    up = run_trigger_manual(schedule=a, actor="tests", now=now)
    down = run_trigger_manual(schedule=c, actor="tests", now=now + timedelta(seconds=1))
    sent = tick(now + timedelta(seconds=1))
    assert [rid for rid, _ in sent] == [up.pk]  # a starts, c may not
    down.refresh_from_db()
    assert down.status == S.WAITING and "waiting for upstream 'a'" in down.reason
    from scheduler.services.cluster.execution import execute_run

    execute_run(up.pk, sent[0][1], clock=lambda: now)
    assert tick_and_execute(now + timedelta(seconds=2)) == [down.pk]
    down.refresh_from_db()
    assert down.status == S.SUCCEEDED


def test_a_diamond_blocks_each_dependent_exactly_once_naming_the_upstream(make_schedule, now):
    make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    b = make_schedule("b", trigger_kind="upstream", depends_on=["a"])
    c = make_schedule("c", trigger_kind="upstream", depends_on=["a"])
    d = make_schedule("d", trigger_kind="upstream", depends_on=["b", "c"])
    from scheduler.models import Schedule

    run_trigger_manual(schedule=Schedule.objects.get(name="a"), actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    (rb,), (rc,), (rd,) = _runs(b), _runs(c), _runs(d)
    assert [rb.status, rc.status, rd.status] == [S.BLOCKED] * 3
    assert rb.reason.startswith("upstream 'a' failed") and rb.blocked_by.name == "a"
    assert rc.reason.startswith("upstream 'a' failed")
    assert rd.reason.startswith("upstream 'b' was blocked") and "root cause: 'a' failed" in rd.reason
    tick_and_execute(now + timedelta(seconds=5))  # nothing more happens later
    assert Run.objects.filter(schedule__name__in=["b", "c", "d"]).count() == 3


def test_an_upstream_failure_blocks_a_waiting_run_down_a_chain(make_schedule, now):
    make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    b = make_schedule("b", depends_on=["a"])
    c = make_schedule("c", depends_on=["b"])
    from scheduler.models import Schedule

    up = run_trigger_manual(schedule=Schedule.objects.get(name="a"), actor="tests", params={"fail": True}, now=now)
    wb = run_enqueue(schedule=b, trigger_kind="cron", trigger_key="cron:1", status=S.WAITING, now=now)
    wc = run_enqueue(schedule=c, trigger_kind="cron", trigger_key="cron:1", status=S.WAITING, now=now)
    tick_and_execute(now)
    up.refresh_from_db(), wb.refresh_from_db(), wc.refresh_from_db()
    assert up.status == S.FAILED
    assert wb.status == S.BLOCKED and wb.blocked_by.name == "a"
    assert wc.status == S.BLOCKED and wc.blocked_by.name == "b"


def test_an_all_done_dependent_starts_even_when_its_upstream_fails(make_schedule, now):
    make_schedule("a", target_id="demo.flaky", retry_max_attempts=1)
    b = make_schedule("b", trigger_kind="upstream", depends_on=["a"], condition=Condition.ALL_DONE)
    from scheduler.models import Schedule

    run_trigger_manual(schedule=Schedule.objects.get(name="a"), actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    (rb,) = _runs(b)
    assert rb.status == S.QUEUED
    tick_and_execute(now)
    rb.refresh_from_db()
    assert rb.status == S.SUCCEEDED


@pytest.mark.parametrize(
    "condition, b_status, c_status, action",
    [
        (Condition.ALL_SUCCESS, S.SUCCEEDED, S.SUCCEEDED, "admit"),
        (Condition.ALL_SUCCESS, S.SUCCEEDED, S.RUNNING, "wait"),
        (Condition.ALL_SUCCESS, S.FAILED, S.RUNNING, "block"),
        (Condition.ANY_SUCCESS, S.FAILED, S.SUCCEEDED, "admit"),
        (Condition.ANY_SUCCESS, S.FAILED, S.RUNNING, "wait"),
        (Condition.ANY_SUCCESS, S.FAILED, S.BLOCKED, "block"),
        (Condition.ALL_DONE, S.FAILED, S.SUCCEEDED, "admit"),
        (Condition.ALL_DONE, S.FAILED, S.QUEUED, "wait"),
        (Condition.NONE_FAILED, S.SKIPPED, S.SUCCEEDED, "admit"),
        (Condition.NONE_FAILED, S.SUCCEEDED, S.FAILED, "block"),
        (Condition.NONE_FAILED, S.SUCCEEDED, S.WAITING, "wait"),
    ],
)
def test_each_condition_gives_the_expected_verdict(make_schedule, now, condition, b_status, c_status, action):
    b, c = make_schedule("b"), make_schedule("c")
    d = make_schedule("d", depends_on=["b", "c"], condition=condition)
    # runs in any status, final ones included: built directly, as a fixture
    run_build(schedule=b, trigger_kind="cron", trigger_key="k", status=b_status, now=now).save()
    run_build(schedule=c, trigger_kind="cron", trigger_key="k", status=c_status, now=now).save()
    d_run = run_enqueue(schedule=d, trigger_kind="cron", trigger_key="k", logical_time=now, now=now)
    verdict = dependencies.verdict_for(d_run)
    assert verdict.action == action
    if action == "block":
        assert verdict.upstream is not None and f"upstream '{verdict.upstream.name}'" in verdict.reason


def test_a_run_waiting_longer_than_max_wait_fails_with_dependency_timeout(make_schedule, now):
    make_schedule("a")
    c = make_schedule("c", depends_on=["a"], max_wait_seconds=600)
    waiting = run_enqueue(schedule=c, trigger_kind="cron", trigger_key="k", status=S.WAITING, now=now,
                          reason="waiting for upstream 'a' (ALL_SUCCESS)")
    assert dependency_timeouts(now=now + timedelta(seconds=600)) == []
    assert dependency_timeouts(now=now + timedelta(seconds=601)) == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.status == S.FAILED and waiting.reason.startswith("dependency timeout")


def test_a_cycle_is_refused_on_save_with_the_cycle_spelled_out(make_schedule):
    a = make_schedule("a")
    make_schedule("b", depends_on=["a"])
    make_schedule("c", depends_on=["b"])
    with pytest.raises(ServiceError) as info:
        schedule_save(schedule=a, data={"depends_on": ["c"]}, actor="tests")
    assert info.value.field == "depends_on"
    assert "a -> b -> c -> a" in str(info.value)  # b depends on a, c on b, a on c
    assert list(a.depends_on.all()) == []


def test_a_schedule_depending_on_itself_is_refused(make_schedule):
    a = make_schedule("a")
    with pytest.raises(ServiceError, match="a -> a"):
        schedule_save(schedule=a, data={"depends_on": ["a"]}, actor="tests")
