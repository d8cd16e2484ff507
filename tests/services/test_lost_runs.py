"""Governance settles many lost runs at once (finish.runs_lost): bulk statements, the same guards as one run."""
from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler import signals
from scheduler.models import Alert, AuditEntry, Run, RunStatus, Schedule
from scheduler.services.common import bulk
from scheduler.services.runs import end as finish
from scheduler.services.cluster import governance
from scheduler.services.runs.end import runs_lost
from scheduler.services.runs.queue import run_build

pytestmark = pytest.mark.django_db
S = RunStatus


@pytest.fixture(autouse=True)
def quiet_settings(settings):
    settings.ETL_STUCK_SECONDS = 60
    settings.ETL_ALERTS_SYNC = True


def _running(schedule, n, now, *, attempt=1, prefix="r"):
    """`n` runs a worker claimed at `now` and then went silent (heartbeat at `now`)."""
    runs = []
    for i in range(n):
        run = run_build(schedule=schedule, trigger_kind="manual", trigger_key=f"{prefix}{i}", now=now)
        run.status, run.attempt = S.RUNNING, attempt
        run.admitted_at = run.started_at = run.heartbeat_at = now
        run.dispatch_token, run.worker_id = f"tok-{prefix}{i}", "c1@host:1"
        runs.append(run)
    Run.objects.bulk_create(runs)
    return list(Run.objects.filter(trigger_key__startswith=prefix, schedule=schedule).select_related("schedule")
                .order_by("id"))


def _settle(runs, now):
    with CaptureQueriesContext(connection) as queries:
        out = runs_lost(runs=runs, now=now)
    return out, len(queries)


def test_settling_3_or_30_lost_runs_costs_the_same_statements(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=3)
    few = _running(schedule, 3, now, prefix="few")
    many = _running(schedule, 30, now, prefix="many")
    later = now + timedelta(seconds=61)

    out_few, queries_few = _settle(few, later)
    out_many, queries_many = _settle(many, later)

    assert out_few == {"requeued": [r.pk for r in few], "failed": []}
    assert out_many == {"requeued": [r.pk for r in many], "failed": []}
    assert queries_few == queries_many
    assert AuditEntry.objects.filter(action="run.worker_lost.requeued").count() == 33
    run = Run.objects.get(pk=many[0].pk)
    assert (run.status, run.attempt, run.dispatch_token, run.worker_id, run.heartbeat_at) == (S.QUEUED, 2, "", "", None)
    assert run.reason == "worker lost: no heartbeat from c1@host:1 since 12:00:00 UTC; re-queued (attempt 2/3)"


def test_governance_requeues_lost_runs_in_bulk_only_if_their_heartbeat_is_still_stale(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=3)
    judged = _running(schedule, 4, now)  # what governance read: every heartbeat at `now`, stale a minute later
    resumed, spent_retry = judged[1], judged[2]
    # between governance's read and its write, one worker's heartbeat resumes and another spends a retry
    Run.objects.filter(pk=resumed.pk).update(heartbeat_at=now + timedelta(seconds=65))
    Run.objects.filter(pk=spent_retry.pk).update(attempt=2)

    out = runs_lost(runs=judged, now=now + timedelta(seconds=66))

    assert out == {"requeued": [judged[0].pk, judged[3].pk], "failed": []}
    for kept in (resumed, spent_retry):
        run = Run.objects.get(pk=kept.pk)
        assert run.status == S.RUNNING and run.dispatch_token == kept.dispatch_token
        assert not AuditEntry.objects.filter(target_id=str(kept.pk)).exists()
    assert Run.objects.get(pk=judged[0].pk).status == S.QUEUED


def test_lost_runs_whose_attempts_are_spent_fail_with_signals_alerts_and_breaker_after_commit(
        make_schedule, now, django_capture_on_commit_callbacks):
    schedule = make_schedule("noop", retry_max_attempts=2, breaker_threshold=2)
    spent = _running(schedule, 2, now, attempt=2, prefix="spent")
    spare = _running(schedule, 1, now, attempt=1, prefix="spare")
    heard = []

    def on_failed(sender, run, final, **kwargs):
        heard.append((run.pk, final, run.status))

    signals.run_failed.connect(on_failed)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            out = runs_lost(runs=spent + spare, now=now + timedelta(seconds=61))
        assert heard == []  # nothing is said before the commit
        for callback in callbacks:
            callback()
    finally:
        signals.run_failed.disconnect(on_failed)

    assert out == {"requeued": [spare[0].pk], "failed": [r.pk for r in spent]}
    assert sorted(heard) == sorted([(r.pk, True, S.FAILED) for r in spent] + [(spare[0].pk, False, S.QUEUED)])
    for run in spent:
        run.refresh_from_db()
        assert run.status == S.FAILED and run.finished_at == now + timedelta(seconds=61)
        assert run.reason == "worker lost: no heartbeat from c1@host:1 since 12:00:00 UTC (attempt 2/2)"
        assert AuditEntry.objects.filter(action="run.worker_lost.failed", target_id=str(run.pk)).exists()
    assert Alert.objects.filter(incident_key__in=[f"run_failed:{r.pk}" for r in spent]).count() == 2
    # the breaker counted both failures, as run_finish would: two in a row open it
    assert Schedule.objects.get(pk=schedule.pk).breaker_status == "open"


def test_one_lost_runs_failing_end_does_not_roll_back_the_others(make_schedule, now, caplog):
    schedule = make_schedule("noop", retry_max_attempts=1)
    runs = _running(schedule, 3, now)
    poisoned = runs[1].pk
    real = finish.breaker_on_result

    def breaker_breaks_on_one_run(*, schedule_id, run, succeeded, now):
        if run.pk == poisoned:
            raise RuntimeError("breaker row unreadable")
        real(schedule_id=schedule_id, run=run, succeeded=succeeded, now=now)

    with mock.patch.object(finish, "breaker_on_result", breaker_breaks_on_one_run):
        out = runs_lost(runs=runs, now=now + timedelta(seconds=61))

    # the bulk path rolled back as a whole, then each run was settled on its own savepoint
    assert out == {"requeued": [], "failed": [runs[0].pk, runs[2].pk]}
    assert Run.objects.get(pk=poisoned).status == S.RUNNING  # left for the next tick
    assert [Run.objects.get(pk=r.pk).status for r in (runs[0], runs[2])] == [S.FAILED, S.FAILED]
    assert AuditEntry.objects.filter(action="run.worker_lost.failed").count() == 2
    assert "could not settle lost run" in caplog.text


def test_the_governance_tick_settles_a_thousand_lost_runs_in_a_constant_number_of_statements(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=3)
    _running(schedule, 20, now, prefix="small")
    with CaptureQueriesContext(connection) as small:
        first = governance.stuck_runs(now=now + timedelta(seconds=61))
    Run.objects.filter(status=S.QUEUED).delete()
    _running(schedule, 200, now, prefix="big")
    with CaptureQueriesContext(connection) as big:
        second = governance.stuck_runs(now=now + timedelta(seconds=61))
    assert (len(first["requeued"]), len(second["requeued"])) == (20, 200)
    assert len(small) == len(big)


def test_without_bulk_update_support_each_lost_run_gets_its_own_compare_and_set(make_schedule, now, monkeypatch):
    monkeypatch.setattr(bulk, "supported", lambda: False)
    schedule = make_schedule("noop", retry_max_attempts=3)
    runs = _running(schedule, 3, now)
    Run.objects.filter(pk=runs[0].pk).update(heartbeat_at=now + timedelta(seconds=65))
    assert runs_lost(runs=runs, now=now + timedelta(seconds=66)) == {"requeued": [runs[1].pk, runs[2].pk], "failed": []}
    assert Run.objects.get(pk=runs[0].pk).status == S.RUNNING
