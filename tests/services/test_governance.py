"""The governance loop's jobs, each driven with injected time, and the tick record."""
from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest

from scheduler.models import AuditEntry, GovernanceTick, Run, RunStatus, Schedule
from scheduler.selectors import governance_health
from scheduler.services.cluster import governance
from scheduler.services.cluster.execution import execute_run
from scheduler.services.cluster.governance import governance_tick
from scheduler.services.history.prune import prune_tick
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import claim_then_go_silent
from tests.services.semantics_helpers import tick as admit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quiet_settings(settings):
    settings.ETL_STUCK_SECONDS = 60
    settings.ETL_GOVERNANCE_INTERVAL = 15
    settings.ETL_ALERTS_SYNC = True


def _started_then_lost(schedule, now, **params):
    """A run a worker claimed and then died on: RUNNING, started, heartbeat stops at `now`."""
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now, params=params or None)
    (run_id, token), = admit(now)
    claim_then_go_silent(run_id, token, now)
    run.refresh_from_db()
    return run, token


def test_a_run_whose_worker_is_lost_is_requeued_while_attempts_remain_and_runs_once(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=2)
    run, old_token = _started_then_lost(schedule, now)

    assert governance.stuck_runs(now=now + timedelta(seconds=59)) == {"requeued": [], "failed": [], "redispatched": []}
    result = governance.stuck_runs(now=now + timedelta(seconds=61))
    assert result["requeued"] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.attempt == 2 and "worker lost" in run.reason
    assert AuditEntry.objects.filter(action="run.worker_lost.requeued", target_id=str(run.pk)).exists()

    # the dead worker's message is stale; the re-queued run executes once, on a new token
    later = now + timedelta(seconds=62)
    (run_id, token), = admit(later)
    assert token != old_token and execute_run(run_id, old_token, clock=lambda: later) == "stale"
    assert execute_run(run_id, token, clock=lambda: later) == RunStatus.SUCCEEDED
    assert Run.objects.filter(schedule=schedule).count() == 1


def test_a_lost_run_on_its_last_attempt_fails_with_worker_lost(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=1)
    run, _ = _started_then_lost(schedule, now)
    assert governance.stuck_runs(now=now + timedelta(seconds=61))["failed"] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.reason.startswith("worker lost")


def test_a_run_with_a_live_heartbeat_is_left_alone(make_schedule, now):
    schedule = make_schedule("noop")
    run, _token = _started_then_lost(schedule, now)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=now + timedelta(seconds=50))
    assert governance.stuck_runs(now=now + timedelta(seconds=100))["requeued"] == []
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_an_admitted_run_no_worker_picked_up_is_sent_again_with_a_new_token(make_schedule, now):
    schedule = make_schedule("noop")
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    (run_id, lost_token), = admit(now)  # the broker loses this message
    resent = []
    with mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution",
        side_effect=lambda rid, tok: resent.append((rid, tok)),
    ):
        assert governance.stuck_runs(now=now + timedelta(seconds=61))["redispatched"] == [run_id]
    (same_id, new_token), = resent
    assert same_id == run_id and new_token != lost_token
    assert execute_run(run_id, lost_token, clock=lambda: now) == "stale"
    assert execute_run(run_id, new_token, clock=lambda: now) == RunStatus.SUCCEEDED
    assert AuditEntry.objects.filter(action="run.redispatch").count() == 1


def test_an_open_breaker_goes_half_open_when_its_cooldown_ends(make_schedule, now):
    schedule = make_schedule("noop", breaker_cooldown_seconds=300)
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status="open", breaker_failures=5, breaker_opened_at=now,
                                                   breaker_current_cooldown_seconds=300)
    assert governance_tick(now=now + timedelta(seconds=299), holder="c1").actions["half_open"] == []
    tick = governance_tick(now=now + timedelta(seconds=301), holder="c1")
    assert tick.actions["half_open"] == [schedule.pk]
    assert Schedule.objects.get(pk=schedule.pk).breaker_status == "half_open"


def test_a_waiting_run_past_its_max_wait_fails_with_dependency_timeout(make_schedule, now):
    make_schedule("up")
    down = make_schedule("down", depends_on=["up"], max_wait_seconds=120)
    run = run_trigger_manual(schedule=down, actor="tests", now=now)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING, reason="waiting for up")
    assert governance_tick(now=now + timedelta(seconds=120), holder="c1").actions["dependency_timeouts"] == []
    tick = governance_tick(now=now + timedelta(seconds=121), holder="c1")
    assert tick.actions["dependency_timeouts"] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.reason.startswith("dependency timeout: waited more than 120 s")


def test_every_tick_is_stored_with_what_it_did(make_schedule, now):
    tick = governance_tick(now=now, holder="c1@host")
    stored = GovernanceTick.objects.get(pk=tick.pk)
    assert stored.started_at == now and stored.holder == "c1@host" and stored.finished_at and not stored.error
    assert set(stored.actions) >= {"dependency_timeouts", "requeued", "failed", "redispatched", "half_open", "queue",
                                   "alerts_resent", "pruned"}


def test_a_failing_job_is_recorded_and_the_other_jobs_still_run(make_schedule, now):
    schedule = make_schedule("noop")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status="open", breaker_opened_at=now - timedelta(hours=1),
                                                   breaker_current_cooldown_seconds=60)
    with mock.patch.object(governance, "dependency_timeouts", side_effect=RuntimeError("boom")):
        tick = governance_tick(now=now, holder="c1")
    assert "dependency_timeouts: RuntimeError: boom" in tick.error
    assert tick.actions["half_open"] == [schedule.pk]


def test_old_webhook_signatures_are_pruned_and_old_ticks_left_to_the_prune_loop(now):
    GovernanceTick.objects.create(started_at=now - timedelta(days=8), holder="old")
    tick = governance_tick(now=now, holder="c1")
    assert tick.actions["pruned"] == {"webhook_deliveries": 0}
    prune_tick(now=now)  # retention (ETL_RETENTION_TICKS_DAYS, 7 days) owns the ticks
    assert not GovernanceTick.objects.filter(holder="old").exists()


def test_the_health_selector_reports_a_late_loop(now):
    assert governance_health(now)["late"] is True  # never ran
    governance_tick(now=now, holder="c1")
    assert governance_health(now + timedelta(seconds=20))["late"] is False
    assert governance_health(now + timedelta(seconds=60))["late"] is True
