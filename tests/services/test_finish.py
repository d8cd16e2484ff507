"""The end of a run (scheduler/services/runs/end.py): breaker test runs, lost workers, one retry budget."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.cluster import governance
from scheduler.services.runs.breakers import breaker_cooldowns
from scheduler.services.common.errors import ServiceError
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.transitions import run_refused
from scheduler.services.runs.end import run_cancel, run_finish, run_lost
from scheduler.services.runs.queue import run_enqueue, run_transition, run_trigger_manual
from tests.services.semantics_helpers import claim_then_go_silent, tick

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture(autouse=True)
def quiet_settings(settings):
    settings.ETL_STUCK_SECONDS = 60
    settings.ETL_ALERTS_SYNC = True


@pytest.fixture
def flaky(make_schedule):
    return make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=2, breaker_threshold=2,
                         breaker_cooldown_seconds=60, breaker_max_cooldown_seconds=600)


def _fail_once(schedule, at):
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=at)
    for run_id, token in tick(at):
        execute_run(run_id, token, clock=lambda: at)
    run.refresh_from_db()
    assert run.status == S.FAILED
    return run


# --- the breaker's test run ----------------------------------------------------

def test_a_half_open_test_run_requeued_after_its_worker_died_stays_the_test_run(flaky, now):
    _fail_once(flaky, now)
    _fail_once(flaky, now + timedelta(seconds=1))
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.OPEN
    later = now + timedelta(seconds=62)
    trial = run_trigger_manual(schedule=flaky, actor="tests", now=later)
    ((trial_id, token),) = tick(later)
    assert trial_id == trial.pk
    claim_then_go_silent(trial_id, token, later)

    lost_at = later + timedelta(seconds=61)
    assert governance.stuck_runs(now=lost_at)["requeued"] == [trial.pk]
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.HALF_OPEN and flaky.breaker_trial_run_id == trial.pk

    # another trigger arrives meanwhile: it is the one refused, not the test run
    other = run_trigger_manual(schedule=flaky, actor="tests", now=lost_at)
    sent = tick(lost_at)
    assert [rid for rid, _ in sent] == [trial.pk]
    trial.refresh_from_db()
    other.refresh_from_db()
    assert trial.status == S.RUNNING and trial.attempt == 2
    assert other.status == S.BLOCKED and other.reason == "circuit half-open: test run in progress"

    # its success closes the breaker
    assert execute_run(trial.pk, sent[0][1], clock=lambda: lost_at) == S.SUCCEEDED
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.CLOSED and flaky.breaker_trial_run_id is None


def test_a_failure_admitted_before_the_breaker_opened_does_not_count_as_the_test_run(flaky, now):
    early = run_trigger_manual(schedule=flaky, actor="tests", params={"fail": True}, now=now)
    ((early_id, early_token),) = tick(now)  # admitted while closed; its worker is slow
    _fail_once(flaky, now + timedelta(seconds=1))
    opened_at = now + timedelta(seconds=2)
    _fail_once(flaky, opened_at)
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.OPEN and flaky.breaker_current_cooldown_seconds == 60
    half_at = opened_at + timedelta(seconds=60)
    assert breaker_cooldowns(now=half_at) == [flaky.pk]

    # the slow run fails while the breaker is half-open and no test run exists yet
    late = half_at + timedelta(seconds=5)
    assert execute_run(early_id, early_token, clock=lambda: late) == S.FAILED
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.HALF_OPEN  # not re-opened
    assert flaky.breaker_current_cooldown_seconds == 60  # not doubled
    assert flaky.breaker_opened_at == opened_at and flaky.breaker_trial_run_id is None
    assert not AuditEntry.objects.filter(action="breaker.open", at=late).exists()

    # the next trigger is the test run
    trial = run_trigger_manual(schedule=flaky, actor="tests", now=late)
    assert [rid for rid, _ in tick(late)] == [trial.pk]
    flaky.refresh_from_db()
    assert flaky.breaker_trial_run_id == trial.pk
    assert early.pk != trial.pk


# --- lost workers -------------------------------------------------------------

def test_governance_requeues_a_lost_run_only_if_its_heartbeat_is_still_stale_in_the_same_cas(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=3)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    judged = claim_then_go_silent(run_id, token, now)  # what governance read: heartbeat at `now`, stale a minute later

    # the worker's heartbeat resumes between governance's read and its write
    Run.objects.filter(pk=run_id).update(heartbeat_at=now + timedelta(seconds=65))
    assert run_lost(run=judged, now=now + timedelta(seconds=66), why="worker lost") == "changed"

    run = Run.objects.get(pk=run_id)
    assert run.status == S.RUNNING and run.dispatch_token == token and run.attempt == 1
    assert not AuditEntry.objects.filter(action__startswith="run.worker_lost").exists()
    # the live worker still owns its run and finishes it: one execution, no duplicate
    assert run_finish(run=run, status=S.SUCCEEDED, now=now + timedelta(seconds=70), token=token)
    assert Run.objects.filter(schedule=schedule).count() == 1


def test_a_lost_run_whose_worker_spent_a_retry_in_between_is_left_to_its_worker(make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=3)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    judged = claim_then_go_silent(run_id, token, now)
    Run.objects.filter(pk=run_id).update(attempt=2)  # an in-process retry, counted by the worker
    assert run_lost(run=judged, now=now + timedelta(seconds=61), why="worker lost") == "changed"
    assert Run.objects.get(pk=run_id).status == S.RUNNING


# --- one retry budget ----------------------------------------------------------

class Killed(BaseException):
    """The worker process dies (not an Exception: nothing in-process retries it)."""


class ScriptedSource:
    """Each extract does the next step of a script: 'fail', 'kill' or 'ok'."""

    def __init__(self, log: list, script: list[str]):
        self.log, self.script = log, script

    def extract(self):
        step = self.script[len(self.log)] if len(self.log) < len(self.script) else "ok"
        self.log.append(step)
        if step == "fail":
            raise RuntimeError("source down")
        if step == "kill":
            raise Killed()
        return [{"id": 1}]


@pytest.fixture
def scripted():
    state = {"log": [], "script": [], "policy": None}

    def factory(ctx):
        return Pipeline(ScriptedSource(state["log"], state["script"]), IdentityTransform(), NoopSink(),
                        policy=state["policy"], sleep=lambda s: None)

    registry.register_pipeline("test.scripted", factory, replace=True)
    yield state
    registry._pipelines.pop("test.scripted", None)


def test_one_retry_budget_counts_in_process_retries_and_lost_worker_requeues(make_schedule, now, scripted):
    schedule = make_schedule("budget", target_id="test.scripted", retry_max_attempts=3, retry_initial_delay=0)
    # attempt 1 fails and is retried in process; attempt 2 dies with its worker
    scripted["script"] = ["fail", "kill", "fail", "fail", "fail", "fail"]
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    with pytest.raises(Killed):
        execute_run(run_id, token, clock=lambda: now)
    run.refresh_from_db()
    assert run.status == S.RUNNING and run.attempt == 2  # the in-process retry was counted on the run

    later = now + timedelta(seconds=120)
    assert governance.stuck_runs(now=later)["requeued"] == [run.pk]
    run.refresh_from_db()
    assert run.attempt == 3
    ((_, token2),) = tick(later)
    assert execute_run(run.pk, token2, clock=lambda: later) == S.FAILED
    # 3 executions in total (fail, kill, fail), never 3 in-process tries per re-queue
    assert scripted["log"] == ["fail", "kill", "fail"]
    run.refresh_from_db()
    assert run.attempt == 3 and run.max_attempts == 3


def test_a_run_executes_at_most_max_attempts_times_in_process(make_schedule, now, scripted):
    schedule = make_schedule("budget", target_id="test.scripted", retry_max_attempts=3, retry_initial_delay=0)
    scripted["script"] = ["fail"] * 10
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    assert execute_run(run_id, token, clock=lambda: now) == S.FAILED
    assert len(scripted["log"]) == 3
    assert governance.stuck_runs(now=now + timedelta(hours=1)) == {"requeued": [], "failed": [], "redispatched": []}


def test_a_pipelines_declared_retry_policy_is_kept_within_the_schedules_budget(make_schedule, now, scripted):
    schedule = make_schedule("budget", target_id="test.scripted", retry_max_attempts=3, retry_initial_delay=0)
    scripted["script"] = ["fail"] * 10
    # the pipeline says "never retry in process": kept, though the schedule allows 3
    scripted["policy"] = RetryPolicy(max_attempts=1, initial_delay=0)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    assert execute_run(run_id, token, clock=lambda: now) == S.FAILED
    assert len(scripted["log"]) == 1

    # the pipeline asks for 5 tries: the schedule's budget of 3 caps it
    scripted["log"].clear()
    scripted["policy"] = RetryPolicy(max_attempts=5, initial_delay=0)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    assert execute_run(run_id, token, clock=lambda: now) == S.FAILED
    assert len(scripted["log"]) == 3


# --- one owner ----------------------------------------------------------------------

def test_a_final_status_is_refused_outside_the_finish_module(make_schedule, now):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    with pytest.raises(ServiceError, match="scheduler.services.runs.end"):
        run_transition(run, new=S.FAILED, now=now)
    with pytest.raises(ServiceError, match="run_refused"):
        run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key="x", status=S.SKIPPED, now=now)
    assert Run.objects.get(pk=run.pk).status == S.QUEUED


def test_a_refused_trigger_is_recorded_once_as_a_final_run_with_its_reason(make_schedule, now):
    schedule = make_schedule("noop")
    seen = []
    from scheduler import signals

    handler = lambda sender, run, **kw: seen.append(run.pk)  # noqa: E731
    signals.run_completed.connect(handler)
    try:
        run = run_refused(schedule=schedule, status=S.SKIPPED, reason="overlap: previous run still running",
                          trigger_kind="cron", trigger_key="cron:1", now=now)
        again = run_refused(schedule=schedule, status=S.SKIPPED, reason="again", trigger_kind="cron",
                            trigger_key="cron:1", now=now)
    finally:
        signals.run_completed.disconnect(handler)
    assert again is None and seen == [run.pk]
    run.refresh_from_db()
    assert run.status == S.SKIPPED and run.reason == "overlap: previous run still running" and run.finished_at == now
    with pytest.raises(ServiceError, match="status"):
        run_refused(schedule=schedule, status=S.FAILED, reason="x", trigger_kind="cron", trigger_key="cron:2", now=now)


def test_cancelling_a_run_is_audited_and_a_final_run_cannot_be_cancelled(make_schedule, now):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    assert run_cancel(run=run, actor="user:olivia", reason="wrong params", now=now)
    (entry,) = AuditEntry.objects.filter(action="run.cancel", target_id=str(run.pk))
    assert entry.actor == "olivia" and entry.after == {"status": S.CANCELLED}
    with pytest.raises(ServiceError, match="already CANCELLED"):
        run_cancel(run=run, actor="user:olivia", now=now)
