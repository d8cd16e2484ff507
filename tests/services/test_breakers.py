"""Circuit breaker: opens after the threshold, blocks, admits exactly one test run, closes or backs off."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler import signals
from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus
from scheduler.services.runs.breakers import breaker_cooldowns, breaker_reset
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture
def changes():
    seen = []

    def handler(sender, schedule, old, new, reason, **kw):
        seen.append((schedule.name, old, new))

    signals.circuit_breaker_changed.connect(handler)
    yield seen
    signals.circuit_breaker_changed.disconnect(handler)


@pytest.fixture
def flaky(make_schedule):
    return make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1, breaker_threshold=2,
                         breaker_cooldown_seconds=60, breaker_max_cooldown_seconds=100)


def _fail(schedule, at):
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=at)
    tick_and_execute(at)
    run.refresh_from_db()
    return run


def _open(schedule, now):
    _fail(schedule, now)
    _fail(schedule, now + timedelta(seconds=1))
    schedule.refresh_from_db()
    return now + timedelta(seconds=1)


def test_it_opens_after_threshold_consecutive_failures_and_audits_and_signals(flaky, now, changes):
    _fail(flaky, now)
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.CLOSED and flaky.breaker_failures == 1
    _fail(flaky, now + timedelta(seconds=1))
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.OPEN and flaky.breaker_failures == 2
    assert changes == [("flaky", "closed", "open")]
    assert AuditEntry.objects.filter(action="breaker.open", target_id=str(flaky.pk)).count() == 1


def test_while_open_a_trigger_becomes_a_blocked_run_saying_circuit_open(flaky, now):
    opened = _open(flaky, now)
    run = run_trigger_manual(schedule=flaky, actor="tests", now=opened + timedelta(seconds=10))
    assert tick(opened + timedelta(seconds=10)) == []
    run.refresh_from_db()
    assert run.status == S.BLOCKED and run.reason == "circuit open"


def test_after_cooldown_exactly_one_of_several_queued_runs_is_admitted(flaky, now):
    opened = _open(flaky, now)
    later = opened + timedelta(seconds=61)
    runs = [run_trigger_manual(schedule=flaky, actor="tests", now=later) for _ in range(4)]
    sent = tick(later)
    assert len(sent) == 1
    statuses = sorted(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True))
    assert statuses == [S.BLOCKED, S.BLOCKED, S.BLOCKED, S.RUNNING]
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.HALF_OPEN and flaky.breaker_trial_run_id == sent[0][0]


def test_two_dispatchers_after_cooldown_admit_one_test_run_between_them(flaky, now):
    opened = _open(flaky, now)
    later = opened + timedelta(seconds=61)
    run_trigger_manual(schedule=flaky, actor="tests", now=later)
    first = tick(later, holder="dispatcher-1")
    run_trigger_manual(schedule=flaky, actor="tests", now=later)
    second = tick(later, holder="dispatcher-2")
    assert len(first) + len(second) == 1
    assert Run.objects.filter(schedule=flaky, status=S.RUNNING).count() == 1


def test_a_successful_test_run_closes_the_breaker_and_zeroes_the_count(flaky, now, changes):
    opened = _open(flaky, now)
    later = opened + timedelta(seconds=61)
    run = run_trigger_manual(schedule=flaky, actor="tests", now=later)
    tick_and_execute(later)
    run.refresh_from_db()
    flaky.refresh_from_db()
    assert run.status == S.SUCCEEDED
    assert (flaky.breaker_status, flaky.breaker_failures, flaky.breaker_trial_run_id) == (BreakerStatus.CLOSED, 0, None)
    assert changes[-2:] == [("flaky", "open", "half_open"), ("flaky", "half_open", "closed")]


def test_a_failed_test_run_reopens_with_the_cooldown_doubled_up_to_the_cap(flaky, now):
    opened = _open(flaky, now)
    assert flaky.breaker_current_cooldown_seconds == 60
    trial_at = opened + timedelta(seconds=61)
    _fail(flaky, trial_at)
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.OPEN
    assert flaky.breaker_current_cooldown_seconds == 100  # 120 capped at 100
    assert flaky.breaker_opened_at == trial_at
    # still open 99 s later, test run allowed after 100 s
    blocked = run_trigger_manual(schedule=flaky, actor="tests", now=trial_at + timedelta(seconds=99))
    assert tick(trial_at + timedelta(seconds=99)) == []
    blocked.refresh_from_db()
    assert blocked.status == S.BLOCKED
    run_trigger_manual(schedule=flaky, actor="tests", now=trial_at + timedelta(seconds=100))
    assert len(tick(trial_at + timedelta(seconds=100))) == 1


def test_governance_moves_an_open_breaker_to_half_open_after_the_cooldown(flaky, now, changes):
    opened = _open(flaky, now)
    assert breaker_cooldowns(now=opened + timedelta(seconds=59)) == []
    assert breaker_cooldowns(now=opened + timedelta(seconds=60)) == [flaky.pk]
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.HALF_OPEN
    assert AuditEntry.objects.filter(action="breaker.half_open", actor="governance").count() == 1


def test_a_cancelled_test_run_lets_the_next_trigger_be_the_test_run(flaky, now):
    from scheduler.services.runs.end import run_cancel

    opened = _open(flaky, now)
    later = opened + timedelta(seconds=61)
    run_trigger_manual(schedule=flaky, actor="tests", now=later)
    ((trial_id, _),) = tick(later)
    run_cancel(run=Run.objects.get(pk=trial_id), actor="tests", reason="wrong params", now=later)
    run_trigger_manual(schedule=flaky, actor="tests", now=later)
    assert len(tick(later)) == 1


def test_a_reset_closes_the_breaker_with_one_audit_entry_and_one_signal(flaky, now, changes):
    _open(flaky, now)
    changes.clear()
    breaker_reset(schedule=flaky, actor="user:olivia", reason="source fixed", now=now)
    assert (flaky.breaker_status, flaky.breaker_failures) == (BreakerStatus.CLOSED, 0)
    (entry,) = AuditEntry.objects.filter(action="breaker.reset")
    assert entry.actor == "olivia" and entry.reason == "source fixed"
    assert entry.before["status"] == "open" and entry.after["status"] == "closed"
    assert changes == [("flaky", "open", "closed")]
    run = run_trigger_manual(schedule=flaky, actor="tests", now=now)
    assert [rid for rid, _ in tick(now)] == [run.pk]
