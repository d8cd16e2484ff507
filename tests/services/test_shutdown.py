"""A cluster's stop in the database (services/cluster/shutdown.py): every re-queue is an end of kind SHUTDOWN written
by the one end rule, audited, and spends no attempt; a person's cancel on the row still stands."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core.ends import EndKind
from scheduler.models import AuditEntry, Run, RunStatus
from scheduler.services.cluster.shutdown import (
    release_unstarted,
    runs_of_workers,
    runs_requeue_after_shutdown,
    runs_stop_for_shutdown,
)
from scheduler.services.runs.end import Ending, run_end
from scheduler.services.runs.queue import run_build
from scheduler.services.runs.stop import run_cancel

pytestmark = pytest.mark.django_db
S = RunStatus
WORKER = "c1@host:41"


def _run(schedule, now, key: str, *, started: bool, worker: str = WORKER, attempt: int = 2) -> Run:
    run = run_build(schedule=schedule, trigger_kind="manual", trigger_key=key, now=now)
    run.status, run.attempt, run.admitted_at = S.RUNNING, attempt, now
    run.dispatch_token, run.worker_id = f"tok-{key}", worker
    if started:
        run.started_at = run.heartbeat_at = now
    run.save()
    return Run.objects.select_related("schedule").get(pk=run.pk)


def _actions(run: Run) -> list[tuple[str, str]]:
    entries = AuditEntry.objects.filter(target_type="run", target_id=str(run.pk)).order_by("id")
    return list(entries.values_list("action", "actor"))


@pytest.fixture
def schedule(make_schedule):
    return make_schedule("nightly", retry_max_attempts=3)


def test_admitted_runs_no_worker_began_go_back_to_the_queue_audited_and_the_attempt_not_spent(schedule, now):
    unstarted = _run(schedule, now, "a", started=False, worker="loops@host:1:abc")
    started = _run(schedule, now, "b", started=True)
    assert release_unstarted(holder_prefix=["loops@host:1:abc"], now=now) == 1
    unstarted.refresh_from_db()
    assert (unstarted.status, unstarted.attempt, unstarted.dispatch_token) == (S.QUEUED, 2, "")
    assert unstarted.reason.startswith("the cluster stopped before a worker began it")
    assert unstarted.reason.endswith("re-queued (attempt 2/3 not spent)")
    assert _actions(unstarted) == [("run.requeue.shutdown", "cluster")]
    assert Run.objects.get(pk=started.pk).status == S.RUNNING, "a run a worker began is its worker's to end"


def test_the_runs_of_a_clusters_workers_are_asked_to_stop_and_a_persons_cancel_stands(schedule, now):
    mine = _run(schedule, now, "a", started=True)
    cancelled = _run(schedule, now, "b", started=True)
    other = _run(schedule, now, "c", started=True, worker="c2@host:99")
    assert run_cancel(run=cancelled, actor="tests", reason="not today", now=now)
    runs = runs_of_workers({WORKER})
    assert sorted(r.pk for r in runs) == [mine.pk, cancelled.pk]
    assert runs_stop_for_shutdown(runs, now=now) == 1
    mine.refresh_from_db()
    assert (mine.status, mine.stop_kind, mine.stop_reason) == (S.RUNNING, "shutdown", "the cluster stopped")
    assert ("run.stop.shutdown", "cluster") in _actions(mine)
    assert Run.objects.get(pk=cancelled.pk).stop_kind == "cancel", "a shutdown never replaces a person's cancel"
    assert Run.objects.get(pk=other.pk).stop_kind == "", "another cluster's run is not touched"


def test_the_end_its_worker_writes_requeues_the_run_without_spending_its_attempt(schedule, now):
    run = _run(schedule, now, "a", started=True)
    runs_stop_for_shutdown([run], now=now)
    run.refresh_from_db()
    later = now + timedelta(seconds=3)
    assert run_end(Ending(run=run, now=later, kind=EndKind.SHUTDOWN, token=run.dispatch_token))
    run.refresh_from_db()
    assert (run.status, run.attempt, run.started_at, run.worker_id, run.stop_kind) == (S.QUEUED, 2, None, "", "")
    assert run.reason == "the cluster stopped; re-queued (attempt 2/3 not spent)"
    assert _actions(run)[-1] == ("run.requeue.shutdown", "worker")


def test_runs_whose_workers_were_ended_are_requeued_by_the_cluster_and_a_cancel_still_ends_cancelled(schedule, now):
    stopped = _run(schedule, now, "a", started=True)
    cancelled = _run(schedule, now, "b", started=True)
    runs_stop_for_shutdown([stopped], now=now)
    run_cancel(run=cancelled, actor="tests", reason="not today", now=now)
    assert runs_requeue_after_shutdown([stopped, cancelled], now=now + timedelta(seconds=8)) == 2
    stopped.refresh_from_db()
    cancelled.refresh_from_db()
    assert (stopped.status, stopped.attempt) == (S.QUEUED, 2)
    assert _actions(stopped)[-1] == ("run.requeue.shutdown", "cluster")
    assert (cancelled.status, cancelled.reason) == (S.CANCELLED, "not today")
    assert runs_requeue_after_shutdown([stopped], now=now) == 0, "a run no longer RUNNING is left alone"
