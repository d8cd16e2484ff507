"""A run's end as one rule (issue 34): the six cases an outside review reproduced, each with its race made at a
chosen point, on the service path the worker, governance and a person use."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.conf import settings

from scheduler.core.ends import EndKind
from scheduler.models import AuditEntry, Run, RunStatus, RunUpstream, Schedule, StopKind, TriggerKind
from scheduler.pipelines import registry
from scheduler.services.admission import firing
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster import execution
from scheduler.services.cluster.execution import execute_run
from scheduler.services.cluster.governance import stuck_runs
from scheduler.services.cluster.heartbeats import HeartbeatPump
from scheduler.services.history.prune import history_prune
from scheduler.services.runs.end import Ending, run_end
from scheduler.services.runs.queue import run_enqueue, run_trigger_manual
from scheduler.services.runs.rerun import run_rerun
from scheduler.services.runs.stop import run_cancel, run_stop_request
from scheduler.services.runs.watermarks import watermark_state
from scheduler.services.worker import supervisor
from tests.services.semantics_helpers import counting_factory, tick

S = RunStatus


def _started(schedule, now):
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    Run.objects.filter(pk=run.pk).update(started_at=now, heartbeat_at=now, worker_id="etl@nowhere:1")
    return Run.objects.select_related("schedule").get(pk=run.pk)


def _worker_copy(run):
    """The run as its worker read it at its claim: no stop request yet."""
    return Run.objects.select_related("schedule").get(pk=run.pk)


# --- 1. a person's cancel is never erased by a timeout that was still local ----------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("attempts", [3, 1])
def test_a_persons_cancel_is_not_erased_by_a_timeout_that_was_still_local(make_schedule, now, attempts):
    schedule = make_schedule("s1", retry_max_attempts=attempts, breaker_threshold=1)
    run = _started(schedule, now)
    worker = _worker_copy(run)
    # the supervisor has found the timeout; before the pump writes it (up to a poll later), a person cancels
    assert run_cancel(run=run, actor="olivia", reason="wrong params", now=now)
    assert not run_stop_request(run=_worker_copy(run), kind=StopKind.TIMEOUT, reason="timed out after 30 s", now=now)
    # the worker's code stopped on its timeout and it reports that end
    assert run_end(Ending(run=worker, now=now, kind=EndKind.TIMEOUT, reason="timed out after 30 s",
                          token=worker.dispatch_token))
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.attempt, stored.reason) == (S.CANCELLED, 1, "wrong params")
    assert not AuditEntry.objects.filter(action="run.retry").exists()
    assert Schedule.objects.get(pk=schedule.pk).breaker_status == "closed"  # a cancel is not a failure


# --- 2. cancel_other and a person's cancel stop a run stopping on its timeout ----------------------------------

@pytest.mark.django_db
def test_a_persons_cancel_replaces_a_pending_timeout(make_schedule, now):
    run = _started(make_schedule("s1", retry_max_attempts=3), now)
    worker = _worker_copy(run)
    assert run_stop_request(run=run, kind=StopKind.TIMEOUT, reason="timed out after 30 s", now=now)
    assert run_cancel(run=run, actor="olivia", now=now)  # not "already stopping"
    assert Run.objects.get(pk=run.pk).stop_kind == StopKind.CANCEL
    assert run_end(Ending(run=worker, now=now, kind=EndKind.TIMEOUT, reason="timed out after 30 s",
                          token=worker.dispatch_token))
    assert Run.objects.get(pk=run.pk).status == S.CANCELLED


@pytest.mark.django_db
def test_cancel_other_stops_a_timed_out_run_which_never_queues_ahead_of_its_replacement(make_schedule, now):
    schedule = make_schedule("s1", retry_max_attempts=3, overlap_policy="cancel_other")
    old = _started(schedule, now)
    worker = _worker_copy(old)
    assert run_stop_request(run=old, kind=StopKind.TIMEOUT, reason="timed out after 30 s", now=now)
    firing._cancel_active([old.pk], reason="replaced by the fire at 12:05", now=now)
    assert Run.objects.get(pk=old.pk).stop_kind == StopKind.CANCEL_OTHER
    newer = run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(minutes=5))
    assert run_end(Ending(run=worker, now=now, kind=EndKind.TIMEOUT, reason="timed out after 30 s",
                          token=worker.dispatch_token))
    old.refresh_from_db()
    assert (old.status, old.reason) == (S.CANCELLED, "replaced by the fire at 12:05")
    assert list(Run.objects.filter(schedule=schedule, status=S.QUEUED).values_list("pk", flat=True)) == [newer.pk]


@pytest.mark.django_db
def test_a_weaker_request_never_replaces_a_stronger_one(make_schedule, now):
    run = _started(make_schedule("s1"), now)
    assert run_stop_request(run=run, kind=StopKind.CANCEL, reason="by olivia", now=now)
    assert not run_stop_request(run=run, kind=StopKind.TIMEOUT, reason="timed out", now=now)
    assert not run_stop_request(run=run, kind=StopKind.CANCEL_OTHER, reason="replaced", now=now)
    assert run_stop_request(run=run, kind=StopKind.TERMINATE, reason="kill now", now=now)
    assert Run.objects.get(pk=run.pk).stop_kind == StopKind.TERMINATE


# --- 3. a beat proves contact only when it touched the run ------------------------------------------------------

@pytest.fixture
def counted():
    calls: dict = {}
    registry.register_pipeline("test.counted", counting_factory(calls), replace=True)
    yield calls
    registry._pipelines.pop("test.counted", None)


@pytest.mark.django_db(transaction=True)
def test_a_worker_stalled_after_its_claim_never_runs_code_governance_gave_away(make_schedule, counted):
    schedule = make_schedule("s1", target_id="test.counted", retry_max_attempts=3)
    run = run_trigger_manual(schedule=schedule, actor="tests")
    admit_runs(now=run.queued_at, holder="t")
    run.refresh_from_db()
    real = execution._execute_claimed

    def stalled(claimed, token, **kwargs):
        # the worker stalls here, after its claim and before the code: governance finds it silent and re-queues the
        # run; then the worker's pump beats, and the beat touches nothing
        later = claimed.started_at + timedelta(seconds=settings.ETL_STUCK_SECONDS + 1)
        assert stuck_runs(now=later)["requeued"] == [claimed.pk]
        HeartbeatPump.get().beat(later)
        return real(claimed, token, **kwargs)

    with mock.patch.object(execution, "_execute_claimed", stalled):
        assert execute_run(run.pk, run.dispatch_token) == "fenced"
    assert counted.get("extracts", 0) == 0  # the code never began
    run.refresh_from_db()
    assert (run.status, run.attempt) == (S.QUEUED, 2)


@pytest.mark.django_db
def test_a_beat_that_touches_none_of_a_workers_runs_stops_their_code_at_once(make_schedule, now, request):
    run = _started(make_schedule("s1"), now)
    pump = HeartbeatPump(interval=60)  # not started: the test beats it
    pump.register(run.pk, run.dispatch_token)
    Run.objects.filter(pk=run.pk).update(dispatch_token="another-worker")  # governance gave it away
    with supervisor.watch(run.pk, run.dispatch_token, timeout=None) as control:
        watchdog = supervisor.Supervisor.get()
        heard = watchdog.last_beat_ok
        pump.beat(now)
        assert control.requested is not None and control.requested.kind == "fence"
        assert watchdog.last_beat_ok == heard  # a beat that touched nothing proves no contact


# --- 4. the upstream a WAITING run stands for is recorded as it starts to wait, and a prune keeps it ---------

@pytest.mark.django_db
def test_a_prune_keeps_the_upstream_run_a_waiting_run_stands_for(make_schedule, now):
    a, c = make_schedule("a"), make_schedule("c")
    d = make_schedule("d", depends_on=["a", "c"])
    old = now - timedelta(days=200)

    def done(schedule, key, at):
        return Run.objects.create(schedule=schedule, trigger_key=key, trigger_kind=TriggerKind.MANUAL,
                                  workload_class=schedule.workload_class, status=S.SUCCEEDED, queued_at=at,
                                  finished_at=at, logical_time=at)

    a1 = done(a, "a1", old)
    done(a, "a2", now + timedelta(hours=1))  # a's latest run and success: d's run does not stand for it
    waiting = run_enqueue(schedule=d, trigger_kind=TriggerKind.MANUAL, trigger_key="d1",
                          logical_time=old + timedelta(minutes=1), now=now)
    tick(now)
    waiting.refresh_from_db()
    assert waiting.status == S.WAITING
    assert RunUpstream.objects.filter(run=waiting, upstream_run=a1).exists()
    history_prune(now=now)
    assert Run.objects.filter(pk=a1.pk).exists()
    done(c, "c1", old + timedelta(minutes=1))
    tick(now)
    waiting.refresh_from_db()
    assert waiting.status == S.RUNNING, waiting.reason


# --- 5. and 6. windows read back: a retried capped window, a re-run of an old one ------------------------------

DAY1 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def behind(make_schedule, counted):
    """A schedule three daily slices behind (max_window one day)."""
    return make_schedule("behind", target_id="test.counted", retry_max_attempts=3, watermark_config={
        "type": "datetime", "column": "ts", "initial": DAY1.isoformat(), "max_window": 86400})


@pytest.mark.django_db(transaction=True)
def test_a_capped_window_retried_on_attempt_two_still_queues_its_next_slice(behind):
    now = DAY1 + timedelta(days=3)
    run = run_trigger_manual(schedule=behind, actor="tests", now=now)
    # attempt 1 computed and stored its capped window, then its worker was lost: attempt 2 reads it back
    Run.objects.filter(pk=run.pk).update(attempt=2, window_low=DAY1.isoformat(),
                                         window_high=(DAY1 + timedelta(days=1)).isoformat())
    [(run_id, token)] = tick(now)
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution"), \
            mock.patch("scheduler.services.admission.dispatch.enqueue_executions"):
        assert execute_run(run_id, token, clock=lambda: now) == S.SUCCEEDED
    # its next slices followed (this worker runs them, as catchup.py does): the mark caught up to now
    assert watermark_state(behind).value == now
    slices = list(Run.objects.filter(schedule=behind).order_by("id").values_list("status", "window_low"))
    assert slices == [(S.SUCCEEDED, (DAY1 + timedelta(days=day)).isoformat()) for day in range(3)]


@pytest.mark.django_db(transaction=True)
def test_a_rerun_of_an_old_window_reports_no_watermark_move(behind):
    now = DAY1 + timedelta(days=1)
    first = run_trigger_manual(schedule=behind, actor="tests", now=now)
    [(run_id, token)] = tick(now)
    assert execute_run(run_id, token, clock=lambda: now) == S.SUCCEEDED
    later = now + timedelta(days=1)
    second = run_trigger_manual(schedule=behind, actor="tests", now=later)
    [(run_id, token)] = tick(later)
    assert execute_run(run_id, token, clock=lambda: later) == S.SUCCEEDED
    mark = watermark_state(behind).value
    again = run_rerun(run=Run.objects.get(pk=first.pk), actor="olivia", reason="reload day 1", now=later)
    [(run_id, token)] = tick(later)
    assert execute_run(run_id, token, clock=lambda: later) == S.SUCCEEDED
    again.refresh_from_db()
    assert again.reason == "" and again.watermark_after == ""
    assert watermark_state(behind).value == mark
    assert not AuditEntry.objects.filter(action="watermark.advance_refused").exists()
    assert second.pk != again.pk
