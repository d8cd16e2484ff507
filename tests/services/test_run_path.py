"""The path a run takes, without a cluster: trigger -> queue -> gate -> execute -> ledger."""
from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest

from scheduler import signals
from scheduler.models import AuditEntry, Run, RunStatus, WatermarkHistory
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db(transaction=True)


def _admit_and_execute(now):
    """Admit every queued run and execute it inline instead of through the broker."""
    sent = []
    with mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda rid, tok: sent.append((rid, tok))
    ):
        dispatch_tick(now=now, holder="test")
    for run_id, token in sent:
        execute_run(run_id, token, clock=lambda: now)
    return [rid for rid, _ in sent]


def test_a_manual_trigger_becomes_a_succeeded_run_with_rows_and_times(make_schedule, now):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="user:alice", params={"n": 3}, now=now)
    assert run.status == RunStatus.QUEUED and run.triggered_by == "alice"
    assert AuditEntry.objects.filter(action="run.trigger", actor="alice").count() == 1

    assert _admit_and_execute(now) == [run.pk]

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.started_at == now and run.finished_at == now
    assert run.params == {"n": 3}


def test_signals_are_sent_after_commit_for_start_and_completion(make_schedule, now):
    schedule = make_schedule("noop")
    seen = []
    started = lambda sender, run, **kw: seen.append(("started", run.pk))  # noqa: E731
    completed = lambda sender, run, **kw: seen.append(("completed", run.pk))  # noqa: E731
    signals.run_started.connect(started)
    signals.run_completed.connect(completed)
    try:
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        _admit_and_execute(now)
    finally:
        signals.run_started.disconnect(started)
        signals.run_completed.disconnect(completed)
    assert seen == [("started", run.pk), ("completed", run.pk)]


def test_a_failing_pipeline_records_the_error_and_does_not_move_the_watermark(make_schedule, now):
    schedule = make_schedule(
        "flaky", target_id="demo.flaky", retry_max_attempts=1,
        watermark_config={"type": "datetime", "column": "ts", "initial": "2026-03-01T00:00:00+00:00"},
    )
    failed = []
    handler = lambda sender, run, final, **kw: failed.append((run.pk, final))  # noqa: E731
    signals.run_failed.connect(handler)
    try:
        run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=now)
        _admit_and_execute(now)
    finally:
        signals.run_failed.disconnect(handler)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error and run.reason
    assert failed == [(run.pk, True)]
    assert not WatermarkHistory.objects.filter(schedule=schedule).exists()


def test_a_stale_broker_message_does_not_run_the_pipeline_twice(make_schedule, now):
    schedule = make_schedule("noop")
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    sent = []
    with mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda rid, tok: sent.append((rid, tok))
    ):
        dispatch_tick(now=now, holder="test")
    (run_id, token), = sent
    assert execute_run(run_id, token, clock=lambda: now) == RunStatus.SUCCEEDED
    assert execute_run(run_id, token, clock=lambda: now) == "stale"
    assert execute_run(run_id, "other-token", clock=lambda: now) == "stale"


def test_an_interval_schedule_fires_once_per_due_time_and_moves_next_fire(make_schedule, now):
    schedule = make_schedule("tick", trigger_kind="interval", trigger_config={"seconds": 60})
    schedule.refresh_from_db()
    first = schedule.next_fire_at
    assert first is not None and first > now - timedelta(days=3650)
    from scheduler.services.admission.firing import fire_due_schedules

    assert fire_due_schedules(now=first) == 1
    assert fire_due_schedules(now=first) == 0  # the same due time never fires twice
    schedule.refresh_from_db()
    assert schedule.next_fire_at == first + timedelta(seconds=60)
    assert Run.objects.filter(schedule=schedule).count() == 1
