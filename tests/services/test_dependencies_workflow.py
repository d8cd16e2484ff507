"""A workflow schedule runs its DAG through scheduler.core.Executor and stores the RunReport."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.models import Run, RunStatus, TargetKind
from scheduler.pipelines import registry
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import counting_factory, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def diamond():
    """test.diamond: a -> b, a -> c, b + c -> d; each node counts its extracts."""
    counters = {name: {} for name in "abcd"}
    registry.register_workflow(
        "test.diamond",
        {name: counting_factory(counters[name]) for name in "abcd"},
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        replace=True,
    )
    yield counters
    registry._workflows.pop("test.diamond", None)


def test_a_workflow_run_executes_every_node_in_order_and_stores_the_report(make_schedule, now, diamond):
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.diamond", retry_max_attempts=1)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    order = [r["task_id"] for r in run.report["records"]]
    assert order[0] == "a" and order[-1] == "d" and sorted(order) == ["a", "b", "c", "d"]
    assert run.report["skipped"] == [] and run.report["blocked"] == []
    assert run.rows_loaded == 4


def test_a_failing_node_fails_the_run_and_blocks_its_dependents_without_extracting(make_schedule, now, diamond):
    registry.register_workflow(
        "test.diamond",
        {"a": counting_factory(diamond["a"], fail=True), **{n: counting_factory(diamond[n]) for n in "bcd"}},
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        replace=True,
    )
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.diamond", retry_max_attempts=1)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "node 'a' failed" in run.reason
    assert run.report["blocked"] == ["b", "c", "d"]
    assert [r["outcome"] for r in run.report["records"]] == ["FAILED"]
    assert [diamond[n].get("extracts", 0) for n in "abcd"] == [1, 0, 0, 0]


def test_a_node_still_fresh_from_the_previous_run_is_skipped(make_schedule, now, diamond):
    def fresh_factory(ctx):
        pipeline = counting_factory(diamond["a"])(ctx)
        pipeline.refresh_after = timedelta(hours=1)
        return pipeline

    registry.register_workflow("test.diamond", {"a": fresh_factory, "b": counting_factory(diamond["b"])},
                               [("a", "b")], replace=True)
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.diamond", retry_max_attempts=1)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    second = run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(minutes=10))
    tick_and_execute(now + timedelta(minutes=10))
    second.refresh_from_db()
    assert second.status == RunStatus.SUCCEEDED
    assert second.report["skipped"] == ["a"]
    assert diamond["a"]["extracts"] == 1 and diamond["b"]["extracts"] == 2
    assert Run.objects.filter(schedule=schedule).count() == 2


def test_the_demo_workflow_is_accepted_as_a_schedule_target(make_schedule):
    schedule = make_schedule("nightly", target_kind=TargetKind.WORKFLOW, target_id="demo.nightly")
    assert schedule.pk is not None
