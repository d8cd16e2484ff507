"""Catching up: the worker that ran a capped window or a backfill window admits the next one and runs it (catchup.py)."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest

from scheduler.models import BackfillStatus, Run, RunStatus, WorkloadClass
from scheduler.pipelines import registry
from scheduler.services.backfills import backfill_submit
from scheduler.services.execution import execute_run
from scheduler.services.runs import run_trigger_manual
from scheduler.services.watermarks import watermark_state
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
    return sent, mock.patch.multiple("scheduler.services.dispatch", enqueue_execution=lambda rid, tok: sent.append(rid),
                                     enqueue_executions=lambda pairs: sent.extend(rid for rid, _ in pairs))


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
