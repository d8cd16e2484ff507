"""Stopping a running run: the request, the slot it keeps, the end that only the stop may write, timeouts."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest

from scheduler.core import stop
from scheduler.models import AuditEntry, Run, RunStatus, StopKind, WorkloadClass
from scheduler.pipelines import registry
from scheduler.services.cluster import heartbeats
from scheduler.services.worker import supervisor
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.cluster.heartbeats import HeartbeatPump
from scheduler.core.ends import EndKind
from scheduler.services.runs.end import Ending, run_end, run_finish, runs_finish
from scheduler.services.runs.lost import run_stop_settled
from scheduler.services.runs.stop import run_cancel, run_stop_request
from scheduler.services.cluster.governance import stopped_runs_of_dead_workers, stuck_runs
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.models import WatermarkState as WatermarkRow
from scheduler.services.runs.watermarks import watermark_config, watermark_state

S = RunStatus


def _admitted(schedule, now, **params):
    run = run_trigger_manual(schedule=schedule, actor="tests", params=params or None, now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    assert run.status == S.RUNNING
    return run


def _started(schedule, now):
    """Admitted and claimed by a worker (started_at set), as a worker's claim leaves it."""
    run = _admitted(schedule, now)
    Run.objects.filter(pk=run.pk).update(started_at=now, heartbeat_at=now, worker_id="etl@nowhere:1")
    run.refresh_from_db()
    return run


@pytest.fixture
def pipeline_of():
    """pipeline_of(id, factory): register a pipeline for one test."""
    added = []

    def register(pipeline_id, factory):
        registry.register_pipeline(pipeline_id, factory, replace=True)
        added.append(pipeline_id)

    yield register
    for pipeline_id in added:
        registry._pipelines.pop(pipeline_id, None)


# --- the request ----------------------------------------------------------------------

@pytest.mark.django_db
def test_a_run_no_worker_has_begun_is_cancelled_at_once(make_schedule, now):
    run = _admitted(make_schedule("s1"), now)
    assert run_cancel(run=run, actor="tests", reason="not today", now=now)
    run.refresh_from_db()
    assert run.status == S.CANCELLED and run.stop_requested_at is None


@pytest.mark.django_db
def test_a_begun_run_is_asked_to_stop_and_shows_stopping_until_its_work_ends(make_schedule, now):
    run = _started(make_schedule("s1"), now)
    assert run_cancel(run=run, actor="tests", reason="wrong params", now=now)
    run.refresh_from_db()
    assert run.status == S.RUNNING
    assert run.stopping and run.shown_status == "STOPPING"
    assert (run.stop_kind, run.stop_reason, run.stop_requested_at) == (StopKind.CANCEL, "wrong params", now)
    assert AuditEntry.objects.filter(action="run.stop.cancel", target_id=str(run.pk)).count() == 1
    # asking again changes nothing; terminate escalates a cancel in its grace period
    assert not run_cancel(run=run, actor="tests", reason="again", now=now)
    assert run_cancel(run=run, actor="tests", reason="kill it", now=now, force=True)
    run.refresh_from_db()
    assert run.stop_kind == StopKind.TERMINATE


@pytest.mark.django_db
def test_between_beats_the_pump_hands_a_cancel_to_the_runs_code_without_a_heartbeat(make_schedule, now):
    run = _started(make_schedule("s1"), now)
    pump = HeartbeatPump(interval=60)
    pump.register(run.pk, run.dispatch_token)
    with supervisor.watch(run.pk, run.dispatch_token, timeout=None) as control:
        pump.stops(now + timedelta(seconds=1))
        assert control.requested is None  # nothing asked yet
        assert run_cancel(run=run, actor="tests", reason="wrong params", now=now)
        pump.stops(now + timedelta(seconds=2))
        assert control.stop.cancelled() and control.requested.reason == "wrong params"
    run.refresh_from_db()
    assert run.heartbeat_at == now  # a read of the stop requests is not a heartbeat


def test_the_pump_reads_stop_requests_between_its_beats(monkeypatch):
    monkeypatch.setattr(heartbeats, "STOP_POLL_SECONDS", 0.01)
    pump = HeartbeatPump(interval=3600)  # no beat due for an hour
    calls = []
    monkeypatch.setattr(pump, "beat", lambda now: calls.append("beat"))
    monkeypatch.setattr(pump, "stops", lambda now: calls.append("stops"))
    pump.register(1, "t")
    pump.start()
    try:
        deadline = time.monotonic() + 30  # a guard against a hang, not a timing assertion
        while calls.count("stops") < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        pump.wake.set()
        pump.join(timeout=10)
    assert calls.count("stops") >= 3 and "beat" not in calls


@pytest.mark.django_db
def test_a_stopping_run_keeps_its_class_slot(make_schedule, now):
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=1)
    first = _started(make_schedule("s1"), now)
    run_cancel(run=first, actor="tests", now=now)
    second = run_trigger_manual(schedule=make_schedule("s2"), actor="tests", now=now)
    assert admit_runs(now=now, holder="t") == []
    second.refresh_from_db()
    assert second.status == S.QUEUED
    run_stop_settled(run=Run.objects.get(pk=first.pk), now=now, why="its work ended")
    assert admit_runs(now=now, holder="t") == [second.pk]


# --- the end of a run asked to stop ----------------------------------------------------

@pytest.mark.django_db
def test_a_workers_success_after_a_cancel_is_written_as_cancelled_and_the_mark_stays(make_schedule, now):
    schedule = make_schedule("s1", watermark_config={"type": "integer", "column": "id", "initial": 10})
    run = _started(schedule, now)
    run_cancel(run=run, actor="tests", now=now)
    # the worker did not hear of it yet and reports its success
    assert run_finish(run=run, status=S.SUCCEEDED, now=now, token=run.dispatch_token, fields={"rows_loaded": 5})
    run.refresh_from_db()
    assert run.status == S.CANCELLED and run.rows_loaded is None
    assert watermark_state(schedule, watermark_config(schedule)).value in (None, 10)


@pytest.mark.django_db
def test_a_batch_success_of_a_run_asked_to_stop_is_cancelled_and_its_neighbours_succeed(make_schedule, now):
    a, b = _started(make_schedule("s1"), now), _started(make_schedule("s2"), now)
    run_cancel(run=Run.objects.get(pk=b.pk), actor="tests", now=now)
    out = runs_finish(endings=[Ending(run=r, status=S.SUCCEEDED, now=now, token=r.dispatch_token,
                                      fields={"heartbeat_at": now}) for r in (a, b)])
    assert out == {a.pk: S.SUCCEEDED, b.pk: S.CANCELLED}


@pytest.mark.django_db
def test_a_timed_out_attempt_is_queued_again_while_attempts_last_then_fails(make_schedule, now):
    schedule = make_schedule("s1", retry_max_attempts=2, retry_initial_delay=5)
    run = _started(schedule, now)
    run_stop_request(run=run, kind=StopKind.TIMEOUT, reason="timed out after 30 s", now=now)
    assert run_end(Ending(run=run, now=now, kind=EndKind.TIMEOUT, reason="timed out after 30 s",
                          token=run.dispatch_token))
    run.refresh_from_db()
    assert (run.status, run.attempt, run.stop_requested_at) == (S.QUEUED, 2, None)
    assert run.not_before == now + timedelta(seconds=5)
    assert run.reason.startswith("timed out after 30 s; re-queued (attempt 2/2")
    later = now + timedelta(seconds=6)
    admit_runs(now=later, holder="t")
    run.refresh_from_db()
    Run.objects.filter(pk=run.pk).update(started_at=later)
    run.refresh_from_db()
    assert run_end(Ending(run=run, now=later, kind=EndKind.TIMEOUT, reason="timed out after 30 s",
                          token=run.dispatch_token))
    run.refresh_from_db()
    assert (run.status, run.reason) == (S.FAILED, "timed out after 30 s")


@pytest.mark.django_db
def test_a_timed_out_run_counts_as_a_failure_for_the_breaker(make_schedule, now):
    schedule = make_schedule("s1", retry_max_attempts=1, breaker_threshold=1)
    run = _started(schedule, now)
    run_end(Ending(run=run, now=now, kind=EndKind.TIMEOUT, reason="timed out after 3 s", token=run.dispatch_token))
    schedule.refresh_from_db()
    assert schedule.breaker_status == "open"


@pytest.mark.django_db
def test_governance_settles_a_silent_stopping_run_with_the_stop_never_a_requeue(make_schedule, now):
    run = _started(make_schedule("s1", retry_max_attempts=3), now)
    run_cancel(run=run, actor="tests", now=now)
    out = stuck_runs(now=now + timedelta(seconds=120))
    run.refresh_from_db()
    assert out["stopped"] == [run.pk] and out["requeued"] == []
    assert run.status == S.CANCELLED


@pytest.mark.django_db
def test_the_reaper_settles_a_stopping_run_whose_worker_process_ended(make_schedule, now):
    import socket

    run = _started(make_schedule("s1"), now)
    Run.objects.filter(pk=run.pk).update(worker_id=f"etl@{socket.gethostname()}:4242")
    run_cancel(run=Run.objects.get(pk=run.pk), actor="tests", now=now)
    host = socket.gethostname()
    assert stopped_runs_of_dead_workers(now=now, host=host, alive=lambda pid: True) == []
    assert stopped_runs_of_dead_workers(now=now, host=host, alive=lambda pid: pid != 4242) == [run.pk]
    run.refresh_from_db()
    assert run.status == S.CANCELLED
    assert AuditEntry.objects.filter(action="run.stop.settled", target_id=str(run.pk)).exists()


# --- in the worker ----------------------------------------------------------------------

class _Rows:
    def __init__(self, before_check):
        self.before_check = before_check

    def extract(self):
        self.before_check()
        stop.check()
        yield {"id": 1}


class _Sink:
    loaded: list = []

    def load(self, rows):
        _Sink.loaded.extend(rows)
        return len(rows)


@pytest.mark.django_db
def test_a_cooperative_pipeline_stops_on_the_request_and_nothing_it_loads_counts(make_schedule, now, pipeline_of):
    from scheduler.core import Pipeline

    def factory(ctx):
        ask = lambda: supervisor.Supervisor.get().request(ctx.run_id, StopKind.CANCEL, "operator said so")  # noqa: E731
        return Pipeline(_Rows(ask), None, _Sink())

    pipeline_of("test.stops", factory)
    _Sink.loaded = []
    run = _admitted(make_schedule("s1", target_id="test.stops"), now)
    assert execute_run(run.pk, run.dispatch_token, clock=lambda: now) == S.CANCELLED
    run.refresh_from_db()
    assert (run.status, run.reason) == (S.CANCELLED, "operator said so")
    assert _Sink.loaded == []


@pytest.mark.django_db
def test_a_pipeline_past_its_timeout_fails_timed_out(make_schedule, now, pipeline_of):
    from scheduler.core import Pipeline

    def factory(ctx):
        token = stop.current()
        # the run's clock says its timeout has passed: the next check stops it
        return Pipeline(_Rows(lambda: setattr(token, "started", token.started - 3600)), None, _Sink())

    pipeline_of("test.slow", factory)
    run = _admitted(make_schedule("s1", target_id="test.slow", timeout_seconds=60, retry_max_attempts=1), now)
    assert execute_run(run.pk, run.dispatch_token, clock=lambda: now) == S.FAILED
    run.refresh_from_db()
    assert run.reason == "timed out after 60 s"


@pytest.mark.django_db
def test_an_error_outside_the_pipeline_fails_the_run_at_once_with_the_real_error(make_schedule, now):
    schedule = make_schedule("s1", watermark_config={
        "type": "datetime", "column": "updated_at", "initial": "2026-01-01T00:00:00+00:00", "max_window": 86400})
    # a mark of 9999-12-31 23:00 (every door refuses it now; a row written before that rule): its window's high
    # end (mark + max_window) is past the last datetime
    WatermarkRow.objects.update_or_create(schedule=schedule, defaults={"value": "9999-12-31T23:00:00+00:00"})
    run = _admitted(schedule, now)
    assert execute_run(run.pk, run.dispatch_token, clock=lambda: now) == S.FAILED
    run.refresh_from_db()
    assert run.attempt == 1  # failed on its first attempt: never "worker lost"
    assert run.reason.startswith("OverflowError")
    assert "compute_window" in run.error


@pytest.mark.django_db
def test_a_run_behind_a_stopping_one_says_it_waits_for_the_stop(make_schedule, now):
    from scheduler.services.admission.waits import explain_wait

    schedule = make_schedule("s1", overlap_policy="cancel_other")
    first = _started(schedule, now)
    run_cancel(run=first, actor="tests", now=now)
    second = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    second.refresh_from_db()
    assert second.status == S.QUEUED
    assert explain_wait(second, now) == (f"previous run {first.pk} of this schedule is stopping (cancel); "
                                         "this one starts once its work has ended")
