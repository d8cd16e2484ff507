"""Batches: one statement admits a tick's runs; a deep queue goes out several runs a message; a worker
finishes a batch's runs together, each in its own savepoint, with one downstream lookup per schedule."""
from __future__ import annotations

import re
import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.core import Pipeline
from scheduler.models import Run, RunLogLine, RunStatus, Schedule, WorkloadClass
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.admission import dispatch
from scheduler.services.cluster import batch
from scheduler.services.runs import end as finish
from scheduler.services.admission.dispatch import admit_runs, hand_off, message_sizes
from scheduler.services.cluster.batch import execute_runs
from scheduler.services.cluster.heartbeats import HeartbeatPump
from scheduler.services.runs.end import Ending, runs_finish
from scheduler.services.runs.stop import run_cancel
from scheduler.services.cluster.governance import stuck_runs
from scheduler.services.runs.queue import run_build
from tests.services.semantics_helpers import tick

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _queued(schedule, count, now):
    runs = [
        run_build(schedule=schedule, trigger_kind="manual", trigger_key=f"m{i}", now=now + timedelta(microseconds=i))
        for i in range(count)
    ]
    Run.objects.bulk_create(runs)
    return list(Run.objects.filter(schedule=schedule).order_by("id"))


def _admitted(schedule, count, now):
    """`count` runs of `schedule` admitted by one tick: [(run id, token)]."""
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=max(count, 4))
    _queued(schedule, count, now)
    return tick(now)


def _run_updates(queries) -> list[str]:
    return [q["sql"] for q in queries if re.match(r'UPDATE "?scheduler_run"? ', q["sql"])]


# --- admission ------------------------------------------------------------------------------

def test_one_statement_admits_a_ticks_runs(make_schedule, now):
    schedule = make_schedule("many")
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=10)
    _queued(schedule, 12, now)
    with mock.patch.object(dispatch, "hand_off") as handed, CaptureQueriesContext(connection) as queries:
        admitted = admit_runs(now=now, holder="test")
    assert len(admitted) == 10, "the class limit holds"
    assert len(_run_updates(queries)) == 1, _run_updates(queries)
    runs = list(Run.objects.filter(pk__in=admitted))
    assert {r.status for r in runs} == {S.RUNNING} and {r.admitted_at for r in runs} == {now}
    assert len({r.dispatch_token for r in runs}) == 10, "each run has its own token"
    # priority / FIFO order: the ten oldest, handed over in that order with their tokens
    assert admitted == [r.pk for r in Run.objects.filter(schedule=schedule).order_by("queued_at", "id")[:10]]
    pairs = handed.call_args.args[0]
    assert pairs == [(r.pk, r.dispatch_token) for r in sorted(runs, key=lambda r: r.pk)]


def test_a_run_cancelled_between_the_read_and_the_admission_is_left_out(make_schedule, now):
    schedule = make_schedule("many")
    runs = _queued(schedule, 3, now)
    victim = runs[1]
    real_start = dispatch._start

    def cancel_then_start(chosen, **kwargs):
        run_cancel(run=Run.objects.get(pk=victim.pk), actor="tests")
        return real_start(chosen, **kwargs)

    with mock.patch.object(dispatch, "_start", side_effect=cancel_then_start), mock.patch.object(dispatch, "hand_off"):
        admitted = admit_runs(now=now, holder="test")
    assert admitted == [runs[0].pk, runs[2].pk]
    assert Run.objects.get(pk=victim.pk).status == S.CANCELLED


def test_a_rate_limit_counts_the_runs_chosen_earlier_in_the_same_tick(make_schedule, now):
    schedule = make_schedule("limited", max_runs_per_minute=2)
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=10)
    _queued(schedule, 6, now)
    assert len(tick(now)) == 2


# --- the hand-off -----------------------------------------------------------------------------

def test_a_lone_run_goes_out_in_a_message_of_its_own():
    assert message_sizes(1, workers=2, most=16) == 1
    assert message_sizes(2, workers=2, most=16) == 1  # no more runs than workers: no batching


def test_a_deep_queue_goes_out_several_runs_a_message_up_to_the_cap():
    assert message_sizes(3, workers=2, most=16) == 2
    assert message_sizes(10, workers=2, most=16) == 5
    assert message_sizes(100, workers=2, most=16) == 16
    assert message_sizes(100, workers=2, most=1) == 1


def test_the_hand_off_reuses_one_broker_client(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": 2}
    pairs = [(i, f"t-{i}") for i in range(1, 6)]
    with mock.patch.object(dispatch, "async_task") as sent, mock.patch.object(dispatch, "get_broker") as get:
        dispatch._broker = None
        hand_off(pairs)
        hand_off(pairs[:1])
    assert get.call_count == 1
    funcs = [(c.args[0], c.args[1:]) for c in sent.call_args_list]
    assert funcs == [("scheduler.tasks.execute_runs", (pairs[:3],)), ("scheduler.tasks.execute_runs", (pairs[3:],)),
                     ("scheduler.tasks.execute_run", (1, "t-1"))]
    assert {c.kwargs["broker"] for c in sent.call_args_list} == {get.return_value}
    dispatch._broker = None


# --- a worker's batch ---------------------------------------------------------------------------

def test_a_worker_runs_a_batch_one_after_another_and_finishes_it_together(make_schedule, now):
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 5, now)
    with CaptureQueriesContext(connection) as queries:
        out = execute_runs(pairs, clock=lambda: now)
    assert out == {rid: S.SUCCEEDED for rid, _ in pairs}
    assert set(Run.objects.filter(schedule=schedule).values_list("status", flat=True)) == {S.SUCCEEDED}
    updates = _run_updates(queries)
    claims = [sql for sql in updates if '"started_at"' in sql.split("WHERE")[0]]
    assert len(claims) == len(pairs), "each run is claimed as it begins, not before"
    # every run has its log, written once the batch's ends were
    for rid, _ in pairs:
        assert RunLogLine.objects.filter(run_id=rid, message__startswith="finished SUCCEEDED").exists()


def test_a_batch_skips_a_run_cancelled_before_the_worker_took_it(make_schedule, now):
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 4, now)
    run_cancel(run=Run.objects.get(pk=pairs[2][0]), actor="tests")
    out = execute_runs(pairs, clock=lambda: now)
    assert out[pairs[2][0]] == "stale"
    assert [out[rid] for rid, _ in pairs if rid != pairs[2][0]] == [S.SUCCEEDED] * 3
    assert execute_runs(pairs, clock=lambda: now) == {rid: "stale" for rid, _ in pairs}, (
        "a second delivery runs nothing"
    )


def test_one_runs_failing_completion_does_not_roll_back_another(make_schedule, now):
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 3, now)
    Schedule.objects.filter(pk=schedule.pk).update(breaker_failures=1)  # each success has a count to reset
    bad = pairs[1][0]
    always_per_run = mock.patch.object(finish, "_bare", return_value=False)  # each end on its own path
    real = finish.breaker_on_result

    def breaker(*, run, **kwargs):
        if run.pk == bad:
            raise RuntimeError("the breaker row is unreadable")
        return real(run=run, **kwargs)

    with mock.patch.object(finish, "breaker_on_result", side_effect=breaker), always_per_run:
        out = execute_runs(pairs, clock=lambda: now)
    assert out == {pairs[0][0]: S.SUCCEEDED, bad: "error", pairs[2][0]: S.SUCCEEDED}
    statuses = dict(Run.objects.filter(schedule=schedule).values_list("id", "status"))
    assert statuses == {pairs[0][0]: S.SUCCEEDED, bad: S.RUNNING, pairs[2][0]: S.SUCCEEDED}
    # left RUNNING with a stale heartbeat: governance takes it from here, as for a lost worker
    assert bad not in HeartbeatPump.get().active


def _claimed(schedule, count, now):
    pairs = _admitted(schedule, count, now)
    Run.objects.filter(pk__in=[rid for rid, _ in pairs]).update(started_at=now)
    return list(Run.objects.filter(pk__in=[rid for rid, _ in pairs]).select_related("schedule").order_by("id"))


def test_successes_with_nothing_to_follow_end_in_one_statement(make_schedule, now):
    runs = _claimed(make_schedule("many"), 6, now)
    run_cancel(run=runs[3], actor="tests")  # asked to stop: its worker's success must not count
    # the worker's copy, as it read the run before the cancel
    runs[3].status, runs[3].stop_kind, runs[3].stop_reason, runs[3].stop_requested_at = S.RUNNING, "", "", None
    endings = [Ending(run=r, status=S.SUCCEEDED, now=now + timedelta(seconds=i), token=r.dispatch_token,
                      fields={"heartbeat_at": now, "rows_loaded": i}) for i, r in enumerate(runs)]
    with CaptureQueriesContext(connection) as queries:
        out = runs_finish(endings=endings)
    # one statement for the five successes; the run asked to stop goes its own way (its CAS misses, the stop's
    # outcome is written)
    updates = _run_updates(queries)
    assert len(updates) == 3 and sum("AS t SET status = 'SUCCEEDED'" in sql for sql in updates) == 1
    assert out == {r.pk: (S.CANCELLED if i == 3 else S.SUCCEEDED) for i, r in enumerate(runs)}
    stored = {r.pk: r for r in Run.objects.filter(pk__in=[r.pk for r in runs])}
    for i, r in enumerate(runs):
        if i == 3:
            assert stored[r.pk].status == S.CANCELLED
            continue
        assert (stored[r.pk].status, stored[r.pk].finished_at, stored[r.pk].rows_loaded) == (
            S.SUCCEEDED, now + timedelta(seconds=i), i)


def test_runs_finish_applies_each_end_in_its_own_savepoint(make_schedule, now):
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 2, now)
    Run.objects.filter(pk__in=[rid for rid, _ in pairs]).update(started_at=now)
    runs = list(Run.objects.filter(pk__in=[rid for rid, _ in pairs]).select_related("schedule").order_by("id"))
    endings = [Ending(run=runs[0], status="NO_SUCH_STATUS", now=now, token=runs[0].dispatch_token),
               Ending(run=runs[1], status=S.FAILED, now=now, reason="boom", token=runs[1].dispatch_token)]
    assert runs_finish(endings=endings) == {runs[0].pk: "error", runs[1].pk: S.FAILED}
    assert Run.objects.get(pk=runs[0].pk).status == S.RUNNING
    assert Run.objects.get(pk=runs[1].pk).status == S.FAILED


def _batch_of_upstream_runs(make_schedule, now, count, name):
    up = make_schedule(f"up-{name}")
    make_schedule(f"down-{name}", trigger_kind="upstream", depends_on=[up.name])
    pairs = _admitted(up, count, now)
    Run.objects.filter(pk__in=[rid for rid, _ in pairs]).update(started_at=now)
    runs = list(Run.objects.filter(pk__in=[rid for rid, _ in pairs]).select_related("schedule"))
    return [Ending(run=r, status=S.SUCCEEDED, now=now, token=r.dispatch_token) for r in runs]


def test_the_downstream_lookup_count_is_constant_in_batch_size(make_schedule, now):
    def lookups(endings) -> int:
        with CaptureQueriesContext(connection) as queries:
            out = runs_finish(endings=endings)
        assert set(out.values()) == {S.SUCCEEDED}
        # the downstream lookup: which schedules depend on these (the child's own upstreams are its verdict's)
        return sum('"scheduler_schedule_depends_on"."to_schedule_id" IN' in q["sql"]
                   or '"scheduler_schedule_depends_on"."to_schedule_id" =' in q["sql"] for q in queries)

    small = lookups(_batch_of_upstream_runs(make_schedule, now, 2, "a"))
    Run.objects.all().delete()
    large = lookups(_batch_of_upstream_runs(make_schedule, now, 8, "b"))
    assert small == large == 1
    # and propagation did its work as before: one downstream run, which the later upstream runs joined
    assert Run.objects.filter(schedule__name="down-b", status=S.QUEUED).count() == 1


def test_a_batch_beats_once_for_all_its_runs(make_schedule, now):
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 3, now)
    pump = HeartbeatPump(interval=60)
    for rid, token in pairs:
        pump.register(rid, token)
    later = now + timedelta(seconds=5)
    with CaptureQueriesContext(connection) as queries:
        assert pump.beat(later) == 3
    assert len(_run_updates(queries)) == 1
    assert set(Run.objects.filter(schedule=schedule).values_list("heartbeat_at", flat=True)) == {later}


def test_a_batch_whose_ends_cannot_be_written_stops_and_leaves_its_runs_to_governance(make_schedule, now, settings):
    settings.ETL_BATCH_FLUSH_SECONDS = 0  # write after every run
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 3, now)
    with mock.patch("scheduler.services.cluster.batch.runs_end", side_effect=RuntimeError("database gone")), \
            pytest.raises(RuntimeError):
        execute_runs(pairs, clock=lambda: now)
    # nothing more ran after the failed write, and no run keeps a heartbeat: governance re-queues them all
    assert set(Run.objects.filter(schedule=schedule).values_list("status", flat=True)) == {S.RUNNING}
    assert not RunLogLine.objects.filter(run_id=pairs[2][0]).exists()
    assert not set(HeartbeatPump.get().active) & {rid for rid, _ in pairs}


def test_a_batch_past_its_budget_sends_the_runs_it_did_not_begin_again(make_schedule, now, settings):
    """A batch never runs into django-q2's timeout: after the budget, the rest go back to the broker unclaimed,
    costing no attempt, and the next delivery runs them."""
    settings.ETL_BATCH_BUDGET_SECONDS = 0  # every run after the first is past the budget
    schedule = make_schedule("many")
    pairs = _admitted(schedule, 4, now)
    sent: list[tuple[int, str]] = []
    with (
        mock.patch("scheduler.services.admission.dispatch.enqueue_executions", side_effect=sent.extend),
        mock.patch(
            "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda *pair: sent.append(pair)
        ),
    ):
        out = execute_runs(pairs, clock=lambda: now)
    assert out == {pairs[0][0]: S.SUCCEEDED, **{rid: "stale" for rid, _ in pairs[1:]}}
    assert sorted(sent) == sorted(pairs[1:]), "the rest are sent again, with the tokens they hold"
    rest = Run.objects.filter(pk__in=[rid for rid, _ in pairs[1:]])
    assert {(r.status, r.started_at, r.attempt) for r in rest} == {(S.RUNNING, None, 1)}, "never claimed"
    assert not set(HeartbeatPump.get().active) & {rid for rid, _ in pairs}
    settings.ETL_BATCH_BUDGET_SECONDS = 60
    assert execute_runs(pairs[1:], clock=lambda: now) == {rid: S.SUCCEEDED for rid, _ in pairs[1:]}


class _Neighbour:
    """A long second run of a batch: while it runs, `during` looks at the batch's first run.

    It waits for the batch's first write of finished ends (an event the test sets when `_flush` returns, in
    whatever thread) rather than for a time: without the promise that write comes only after this run ends,
    and the wait gives up (a safety net, not a measure) with the first run still RUNNING.
    """

    def __init__(self, during):
        self.during = during
        self.written = threading.Event()
        self.flush_threads: list[str] = []

    def extract(self):
        self.written.wait(timeout=10)
        self.during()
        return []


def _batch_with_a_long_neighbour(make_schedule, now, during, *, settings):
    """A batch of a quick run then a long one; returns (first run id, second run id, outcome, neighbour, timers)."""
    settings.ETL_BATCH_FLUSH_SECONDS = 0.05
    neighbour = _Neighbour(during)
    real_flush, timers = batch._flush, []

    def flush(pending, pump):
        out = real_flush(pending, pump)
        neighbour.flush_threads.append(threading.current_thread().name)
        neighbour.written.set()
        return out

    class RecordedTimer(threading.Timer):
        def __init__(self, interval, function):
            timers.append(interval)
            super().__init__(interval, function)

    registry.register_pipeline("test.long_neighbour", lambda ctx: Pipeline(neighbour, None, NoopSink()), replace=True)
    try:
        quick = make_schedule("quick")
        slow = make_schedule("slow", target_id="test.long_neighbour")
        WorkloadClass.objects.filter(name="standard").update(concurrency_limit=4)
        first = run_build(schedule=quick, trigger_kind="manual", trigger_key="a", now=now)
        second = run_build(schedule=slow, trigger_kind="manual", trigger_key="b", now=now + timedelta(microseconds=1))
        Run.objects.bulk_create([first, second])
        pairs = tick(now)
        assert [rid for rid, _ in pairs] == sorted(rid for rid, _ in pairs), "the quick run goes first"
        with mock.patch.object(batch, "_flush", side_effect=flush), \
                mock.patch.object(batch.threading, "Timer", RecordedTimer):
            out = execute_runs(pairs, clock=lambda: now)
    finally:
        registry._pipelines.pop("test.long_neighbour", None)
    return pairs[0][0], pairs[1][0], out, neighbour, timers


def test_a_finished_runs_end_is_written_within_the_flush_interval_while_its_neighbour_runs(make_schedule, now,
                                                                                          settings):
    """ETL_BATCH_FLUSH_SECONDS is a promise: run 1 of a batch is SUCCEEDED in the database while run 2 still runs,
    written by the batch's timer, which was set for at most the interval."""
    seen: dict = {}

    def during():
        # what a page, a downstream's verdict or governance reads while run 2 still runs
        seen["first"] = Run.objects.filter(schedule__name="quick").values_list("status", "finished_at").get()

    first, _second, out, neighbour, timers = _batch_with_a_long_neighbour(make_schedule, now, during,
                                                                         settings=settings)
    assert seen["first"] == (S.SUCCEEDED, now), "committed while its neighbour ran"
    assert neighbour.flush_threads[0] != threading.current_thread().name, "the timer wrote it, not the next end"
    assert timers and max(timers) <= settings.ETL_BATCH_FLUSH_SECONDS
    assert set(out.values()) == {S.SUCCEEDED} and out[first] == S.SUCCEEDED


def test_a_worker_lost_while_the_neighbour_runs_does_not_run_the_finished_run_again(make_schedule, now, settings):
    """The worker dies while run 2 runs, after run 1 finished: governance re-queues run 2 only."""
    lost: dict = {}

    def during():
        # the worker falls silent here: governance looks later than any heartbeat (the pump beats in real time)
        lost.update(stuck_runs(now=timezone.now() + timedelta(hours=1)))

    first, second, _out, _neighbour, _timers = _batch_with_a_long_neighbour(make_schedule, now, during,
                                                                           settings=settings)
    assert lost["requeued"] == [second], lost
    stored = Run.objects.get(pk=first)
    assert (stored.status, stored.attempt) == (S.SUCCEEDED, 1), "its end stands; it is not run again"
    assert list(Run.objects.filter(status__in=[S.QUEUED, S.RUNNING]).values_list("id", flat=True)) == [second]
