"""A workflow node's own time limit, declared in the registry, stops the run past it: FAILED, naming the node."""
from __future__ import annotations

import time

import pytest

from scheduler.core import IdentityTransform, Pipeline, stop
from scheduler.models import NodeRecord, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual


class Spinning:
    """A source busy until it is asked to stop (it checks, as the built-in sources do between batches)."""

    def extract(self):
        for _ in range(100_000):  # a bound, so a broken stop fails the test instead of hanging it
            stop.check()
            time.sleep(0.001)
        return []


@pytest.fixture
def slow_workflow():
    registry.register_workflow(
        "test.slow", {"quick": lambda ctx: Pipeline(NoopSource(), IdentityTransform(), NoopSink()),
                      "slow": lambda ctx: Pipeline(Spinning(), IdentityTransform(), NoopSink())},
        [("quick", "slow")], timeouts={"slow": 0.05}, replace=True)
    yield
    registry._workflows.pop("test.slow", None)


@pytest.mark.django_db
def test_a_node_past_its_own_limit_fails_the_run_naming_the_node(slow_workflow, make_schedule, now):
    schedule = make_schedule("slow", target_kind="workflow", target_id="test.slow", retry_max_attempts=1)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "node 'slow' timed out after 0.05 s" in run.reason
    assert NodeRecord.objects.get(run=run, task_id="quick").outcome == "SUCCESS"
