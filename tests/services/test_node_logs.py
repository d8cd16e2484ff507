"""Workflow runs: every log line names its node; a failed node keeps its traceback (issue 23, point 4)."""
from __future__ import annotations

import logging

import pytest

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import NodeRecord, RunLogLine, RunStatus, TargetKind
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
node_log = logging.getLogger("tests.node")


class _Source:
    def __init__(self, name, fail):
        self.name, self.fail = name, fail

    def extract(self):
        node_log.info("reading for %s", self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} source down")
        return [{"id": 1}]


@pytest.fixture
def wf(make_schedule):
    def node(name, fail=False):
        def factory(ctx):
            return Pipeline(_Source(name, fail), IdentityTransform(), NoopSink(),
                            policy=RetryPolicy(max_attempts=1, initial_delay=0))
        return factory

    registry.register_workflow("test.logged", {"extract": node("extract"), "load": node("load", fail=True)},
                               [("extract", "load")], replace=True)
    yield make_schedule("logged", target_kind=TargetKind.WORKFLOW, target_id="test.logged", retry_max_attempts=1)
    registry._workflows.pop("test.logged", None)


def test_each_log_line_names_the_node_it_came_from_and_run_lines_name_none(wf, now):
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    lines = list(RunLogLine.objects.filter(run=run).order_by("seq"))
    by_message = {line.message: line.node for line in lines}
    assert by_message["reading for extract"] == "extract"
    assert by_message["reading for load"] == "load"
    assert lines[0].node == "" and "started on" in lines[0].message  # the run's own opening line
    assert lines[-1].node == "" and lines[-1].message.startswith("finished FAILED")
    assert {line.node for line in lines} == {"", "extract", "load"}


def test_the_failed_node_keeps_its_error_and_traceback_and_logs_it_under_its_name(wf, now):
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)
    tick_and_execute(now)
    failed = NodeRecord.objects.get(run=run, task_id="load")
    assert failed.reason == "RuntimeError: load source down"
    assert "Traceback (most recent call last)" in failed.error and "RuntimeError: load source down" in failed.error
    assert NodeRecord.objects.get(run=run, task_id="extract").error == ""
    errors = RunLogLine.objects.filter(run=run, node="load", level="ERROR")
    assert any("Traceback (most recent call last)" in line.message for line in errors)
