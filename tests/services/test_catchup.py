"""Catching up: the worker that ran a capped window or a backfill window admits the next one and runs it
(catchup.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler.models import BackfillStatus, BreakerStatus, Run, RunStatus, Schedule, WorkloadClass
from scheduler.pipelines import registry
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.admission.dispatch import admit_slice
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_enqueue, run_trigger_manual
from scheduler.services.runs.watermarks import watermark_state
from tests.services.semantics_helpers import counting_factory, tick

# outside a caller's transaction, as a worker runs: only then does a worker admit and run the next slice itself
pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime(2026, 2, 1, tzinfo=UTC)
DAY1 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def catching_up(make_schedule):
    """A schedule three daily slices behind (max_window one day, until the fourth day); what each run read."""
    counter: dict = {}
    registry.register_pipeline("test.catchup", counting_factory(counter), replace=True)
    schedule = make_schedule("behind", target_id="test.catchup", watermark_config={
        "type": "datetime", "column": "ts", "initial": DAY1.isoformat(), "max_window": 86400,
        "until": (DAY1 + timedelta(days=3)).isoformat()})
    yield schedule, counter
    registry._pipelines.pop("test.catchup", None)


def _broker():
    """What goes to the broker instead of being run here."""
    sent: list = []
    return sent, mock.patch.multiple(
        "scheduler.services.admission.dispatch",
        enqueue_execution=lambda rid, tok: sent.append(rid),
        enqueue_executions=lambda pairs: sent.extend(rid for rid, _ in pairs),
    )


def _first_slice(schedule) -> tuple[int, Run, list]:
    """Trigger the catch-up, run its first slice in this worker; (its id, the next slice's run, what was sent)."""
    run_trigger_manual(schedule=schedule, actor="tests", now=NOW)
    [(first, token)] = tick(NOW)
    sent, patch = _broker()
    with patch:
        execute_run(first, token, clock=lambda: NOW)
    return first, Run.objects.filter(schedule=schedule).exclude(pk=first).get(), sent


def test_one_message_runs_every_slice_of_a_catch_up_in_order_without_the_broker(catching_up):
    schedule, counter = catching_up
    run_trigger_manual(schedule=schedule, actor="tests", now=NOW)
    [(first, token)] = tick(NOW)
    sent, patch = _broker()
    with patch:
        assert execute_run(first, token, clock=lambda: NOW) == RunStatus.SUCCEEDED
    assert sent == []
    runs = list(Run.objects.filter(schedule=schedule).order_by("id"))
    # the slice after the third finds the mark at `until` and is skipped, as a broker-sent one would be
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3 + [RunStatus.SKIPPED]
    assert [(w.low, w.high) for w in counter["windows"]] == [
        (DAY1 + timedelta(days=d), DAY1 + timedelta(days=d + 1)) for d in range(3)]
    assert watermark_state(schedule).value == DAY1 + timedelta(days=3)
    assert [r.attempt for r in runs] == [1, 1, 1, 1]


def test_past_the_budget_the_next_slice_goes_to_the_broker(catching_up, settings):
    settings.ETL_BATCH_BUDGET_SECONDS = 0
    schedule, counter = catching_up
    first, second, sent = _first_slice(schedule)
    assert sent == [second.pk], "admitted, then handed to the broker"
    assert second.status == RunStatus.RUNNING and second.started_at is None
    assert len(counter["windows"]) == 1


def test_the_next_slice_still_passes_the_gate_a_full_class_keeps_it_queued(catching_up, make_schedule):
    schedule, counter = catching_up
    WorkloadClass.objects.filter(pk=schedule.workload_class_id).update(concurrency_limit=1)
    run_trigger_manual(schedule=schedule, actor="tests", now=NOW)
    [(first, token)] = tick(NOW)
    other = make_schedule("other", target_id="test.catchup")
    busy = run_trigger_manual(schedule=other, actor="tests", now=NOW)
    # the other run takes the class's one slot while the first slice runs
    Run.objects.filter(pk=busy.pk).update(status=RunStatus.RUNNING, admitted_at=NOW, heartbeat_at=NOW)
    sent, patch = _broker()
    with patch:
        execute_run(first, token, clock=lambda: NOW)
    second = Run.objects.filter(schedule=schedule).exclude(pk=first).get()
    assert second.status == RunStatus.QUEUED and sent == []
    assert len(counter["windows"]) == 1


def test_one_message_runs_a_backfill_window_after_window_and_completes_it(catching_up):
    schedule, counter = catching_up
    backfill = backfill_submit(schedule=schedule, start=DAY1.isoformat(), end=(DAY1 + timedelta(days=3)).isoformat(),
                               window=86400, reason="replay", requested_by="tests", now=NOW)
    [(first, token)] = tick(NOW)
    sent, patch = _broker()
    with patch:
        assert execute_run(first, token, clock=lambda: NOW) == RunStatus.SUCCEEDED
    assert sent == []
    runs = list(Run.objects.filter(backfill=backfill).order_by("id"))
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert [(w.low, w.high) for w in counter["windows"]] == [
        (DAY1 + timedelta(days=d), DAY1 + timedelta(days=d + 1)) for d in range(3)]
    backfill.refresh_from_db()
    assert backfill.status == BackfillStatus.COMPLETED
    assert watermark_state(schedule).value is None, "a backfill never moves the live mark"


def test_with_catchup_on_worker_off_the_next_slice_waits_for_the_dispatch_loop(catching_up, settings):
    settings.ETL_CATCHUP_ON_WORKER = False
    schedule, counter = catching_up
    first, second, sent = _first_slice(schedule)
    assert second.status == RunStatus.QUEUED and sent == []
    assert len(counter["windows"]) == 1


def test_each_window_ends_admits_and_begins_the_next_in_one_commit(catching_up):
    schedule, _ = catching_up
    run_trigger_manual(schedule=schedule, actor="tests", now=NOW)
    [(first, token)] = tick(NOW)
    _, patch = _broker()
    with patch, CaptureQueriesContext(connection) as queries:
        execute_run(first, token, clock=lambda: NOW)
    runs = list(Run.objects.filter(schedule=schedule).order_by("id"))
    commits = [q for q in queries.captured_queries if q["sql"] == "COMMIT"]
    assert len(runs) == 4 and len(commits) == 4, "one commit for each end, its log and the next window's start"
    # every slice after the first was admitted and claimed by this worker in its predecessor's end
    assert {(r.worker_id, r.admitted_at, r.started_at) for r in runs[1:]} == {(runs[0].worker_id, NOW, NOW)}
    assert len(queries.captured_queries) <= 4 * 26, "the bookkeeping of a window stays bounded"


def _slice(schedule, *, trigger_kind="manual"):
    """A catch-up slice queued as a capped window's end queues it."""
    return run_enqueue(schedule=schedule, trigger_kind=trigger_kind, trigger_key=f"k>{NOW.isoformat()}", now=NOW)


def _hand_over(queued):
    with transaction.atomic():  # a capped window's end is a transaction; the class row is locked in it
        return admit_slice(run=queued, now=NOW, holder="w1")


def test_a_slice_with_nothing_ahead_of_it_is_admitted_with_its_schedule_as_it_is_now(catching_up):
    schedule, _ = catching_up
    queued = _slice(schedule)
    Schedule.objects.filter(pk=schedule.pk).update(description="changed meanwhile")
    pk, token = _hand_over(queued)
    stored = Run.objects.get(pk=pk)
    assert (stored.status, stored.dispatch_token, stored.admitted_at, stored.worker_id) == (
        RunStatus.RUNNING, token, NOW, "w1")
    assert queued.status == RunStatus.RUNNING and queued.schedule.description == "changed meanwhile"


@pytest.mark.parametrize("case", ["another run queued in the class", "class full", "upstream", "rate limit",
                                  "breaker open", "freshness rule", "another live run running"])
def test_a_slice_goes_through_the_whole_gate_whenever_it_might_decide_otherwise(catching_up, make_schedule, case):
    schedule, _ = catching_up
    trigger_kind = "manual"
    if case == "another run queued in the class":
        run_trigger_manual(schedule=make_schedule("other", target_id="test.catchup"), actor="tests", now=NOW)
    elif case == "class full":
        WorkloadClass.objects.filter(pk=schedule.workload_class_id).update(concurrency_limit=1)
        busy = run_trigger_manual(schedule=make_schedule("other", target_id="test.catchup"), actor="tests", now=NOW)
        Run.objects.filter(pk=busy.pk).update(status=RunStatus.RUNNING, admitted_at=NOW)
    elif case == "upstream":
        schedule.depends_on.add(make_schedule("up", target_id="test.catchup"))
    elif case == "rate limit":
        Schedule.objects.filter(pk=schedule.pk).update(max_runs_per_minute=100)
    elif case == "breaker open":
        Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_opened_at=NOW)
    elif case == "freshness rule":
        Schedule.objects.filter(pk=schedule.pk).update(refresh_after_seconds=3600)
        trigger_kind = "cron"
    else:
        running = run_trigger_manual(schedule=schedule, actor="tests", now=NOW)
        Run.objects.filter(pk=running.pk).update(status=RunStatus.RUNNING, admitted_at=NOW)
    queued = _slice(schedule, trigger_kind=trigger_kind)
    assert _hand_over(queued) is None
    assert Run.objects.get(pk=queued.pk).status == RunStatus.QUEUED


def test_a_freshness_rule_does_not_hold_a_slice_a_person_asked_for(catching_up):
    schedule, _ = catching_up
    Schedule.objects.filter(pk=schedule.pk).update(refresh_after_seconds=3600)
    assert _hand_over(_slice(Schedule.objects.get(pk=schedule.pk))) is not None
