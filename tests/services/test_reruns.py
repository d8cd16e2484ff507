"""Re-run a finished run: same params and window, just this one or followed by its downstream."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Run, RunStatus, Schedule, TriggerKind
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.rerun import run_rerun
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _finished(schedule, now, **fields):
    defaults = dict(trigger_kind=TriggerKind.CRON, trigger_key=f"cron:{now.isoformat()}", status=S.FAILED,
                    workload_class_id=schedule.workload_class_id, queued_at=now, started_at=now, finished_at=now,
                    logical_time=now, params={"day": "2026-03-01"}, window_low="2026-03-01T00:00:00+00:00",
                    window_high="2026-03-02T00:00:00+00:00", reason="source down")
    defaults.update(fields)
    return Run.objects.create(schedule=schedule, **defaults)


def test_a_rerun_copies_params_window_and_logical_time_and_is_audited(make_schedule, now, operator):
    schedule = make_schedule("orders")
    old = _finished(schedule, now)
    new = run_rerun(run=old, actor=operator, reason="source is back")
    new.refresh_from_db()
    assert new.status == S.QUEUED and new.trigger_kind == TriggerKind.RERUN
    assert new.params == {"day": "2026-03-01"}
    assert (new.window_low, new.window_high) == (old.window_low, old.window_high)
    assert new.logical_time == old.logical_time
    assert new.rerun_of_id == old.pk and new.propagate is False
    assert new.triggered_by == operator.username
    entry = AuditEntry.objects.get(action="run.rerun")
    assert entry.actor == operator.username and entry.target_id == str(old.pk)
    assert entry.after["run"] == new.pk and entry.after["downstream"] is False and entry.reason == "source is back"


def test_a_run_that_has_not_finished_cannot_be_rerun(make_schedule, now):
    run = _finished(make_schedule("orders"), now, status=S.RUNNING, finished_at=None)
    with pytest.raises(ServiceError, match="is still RUNNING; only a finished run can be re-run") as refused:
        run_rerun(run=run, actor="user:alice")
    assert refused.value.field == "run"
    assert Run.objects.count() == 1 and not AuditEntry.objects.filter(action="run.rerun").exists()


def test_a_backfill_window_is_retried_from_its_backfill_not_rerun(make_schedule, now):
    from scheduler.models import Backfill

    schedule = make_schedule("orders")
    backfill = Backfill.objects.create(schedule=schedule, range_from="1", range_to="2", window_size="1",
                                       total_windows=1, requested_by="alice", reason="x", created_at=now)
    run = _finished(schedule, now, backfill=backfill)
    with pytest.raises(ServiceError, match="retry it from the backfill"):
        run_rerun(run=run, actor="user:alice")


def test_a_disabled_schedule_needs_a_reason(make_schedule, now):
    schedule = make_schedule("orders")
    old = _finished(schedule, now)
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    old.refresh_from_db()
    with pytest.raises(ServiceError, match="schedule 'orders' is disabled: give a reason") as refused:
        run_rerun(run=old, actor="user:alice")
    assert refused.value.field == "reason"
    assert Run.objects.count() == 1
    new = run_rerun(run=old, actor="user:alice", reason="one-off fix while it is paused")
    assert new.status == S.QUEUED


def test_bad_reason_text_is_refused(make_schedule, now):
    old = _finished(make_schedule("orders"), now)
    with pytest.raises(ServiceError, match="reason: must not contain the NUL"):
        run_rerun(run=old, actor="user:alice", reason="a\x00b")
    with pytest.raises(ServiceError, match="reason: must be at most 500"):
        run_rerun(run=old, actor="user:alice", reason="x" * 501)


def _chain(make_schedule):
    up = make_schedule("up", target_id="test.counting", retry_max_attempts=1)
    down = make_schedule("down", target_id="test.counting", trigger_kind="upstream", retry_max_attempts=1,
                         depends_on=["up"])
    return up, down


def test_rerun_just_this_does_not_start_the_downstream(make_schedule, counter, now):
    up, down = _chain(make_schedule)
    failed = run_trigger_manual(schedule=up, actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    failed.refresh_from_db()
    assert failed.status == S.FAILED
    Run.objects.filter(schedule=down).delete()  # whatever the failure blocked
    new = run_rerun(run=failed, actor="user:alice", now=now)
    Run.objects.filter(pk=new.pk).update(params={})  # the source works now
    tick_and_execute(now)
    new.refresh_from_db()
    assert new.status == S.SUCCEEDED
    assert not Run.objects.filter(schedule=down).exists()


def test_rerun_and_then_downstream_starts_the_downstream_when_it_succeeds(make_schedule, counter, now):
    up, down = _chain(make_schedule)
    failed = run_trigger_manual(schedule=up, actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    failed.refresh_from_db()
    assert Run.objects.get(schedule=down).status == S.BLOCKED
    new = run_rerun(run=failed, actor="user:alice", downstream=True, now=now)
    Run.objects.filter(pk=new.pk).update(params={})
    tick_and_execute(now)  # the re-run succeeds and queues the downstream
    tick_and_execute(now)  # the downstream runs
    new.refresh_from_db()
    assert new.status == S.SUCCEEDED and new.propagate is True
    followed = Run.objects.filter(schedule=down, trigger_key=f"upstream:{new.pk}").get()
    assert followed.status == S.SUCCEEDED


def test_reset_and_rerun_needs_the_reset_permission_and_changes_nothing_without_it(make_schedule, make_user, now):
    from django.contrib.auth.models import Permission

    from scheduler.models import BreakerStatus, Team
    from scheduler.services.access.teams import PermissionRefused

    schedule = make_schedule("flaky")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=3,
                                                   breaker_opened_at=now, breaker_current_cooldown_seconds=600)
    run = _finished(Schedule.objects.get(pk=schedule.pk), now)
    user = make_user("tom", "operator")
    Team.objects.get(pk=schedule.owner_id).members.add(user)
    user.groups.first().permissions.remove(Permission.objects.get(codename="reset_breaker"))
    with pytest.raises(PermissionRefused, match="scheduler.reset_breaker"):
        run_rerun(run=run, actor=user, reset_breaker=True, now=now)
    assert Schedule.objects.get(pk=schedule.pk).breaker_status == BreakerStatus.OPEN
    assert not Run.objects.filter(rerun_of=run).exists()
    new = run_rerun(run=run, actor="tests", reset_breaker=True, reason="feed is back", now=now)
    assert new.rerun_of_id == run.pk and Schedule.objects.get(pk=schedule.pk).breaker_status == BreakerStatus.CLOSED
