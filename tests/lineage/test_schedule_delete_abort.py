"""A schedule deleted with stop_runs while its run executes: the code stops, lineage gets the run's ABORT."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import LineageEvent, Run, RunStatus, Schedule
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.services.definitions.schedule_removal import DELETING, schedule_delete, schedules_deleting_finish
from scheduler.services.runs.queue import run_trigger_manual
from tests.lineage.conftest import outbox
from tests.services.semantics_helpers import tick_and_execute

S = RunStatus


@pytest.mark.django_db(transaction=True)
def test_a_run_stopped_by_the_delete_ends_cancelled_with_its_abort_and_the_schedule_goes(lineage_on, make_schedule,
                                                                                          now):
    """The delete is asked while the run's extract executes: the run ends CANCELLED (not SUCCEEDED) with its
    ABORT, and governance deletes the schedule; the outbox keeps both events of the run's runId."""
    def deleting(ctx):
        class DeleteMe(NoopSource):
            def extract(self):
                schedule = Schedule.objects.get(name="doomed")
                assert schedule_delete(schedule=schedule, actor="user:olivia", stop_runs=True, now=now) == DELETING
                return [{"id": 1}]
        return Pipeline(DeleteMe(), IdentityTransform(), NoopSink(), policy=RetryPolicy(max_attempts=1))

    registry.register_pipeline("test.deleting", deleting, replace=True)
    try:
        schedule = make_schedule("doomed", target_id="test.deleting")
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        tick_and_execute(now)
    finally:
        registry._pipelines.pop("test.deleting", None)
    assert Run.objects.get(pk=run.pk).status == S.CANCELLED
    assert schedules_deleting_finish(now=now + timedelta(seconds=15)) == ["doomed"]
    assert not Run.objects.filter(pk=run.pk).exists()
    assert outbox() == [("START", "doomed"), ("ABORT", "doomed")]
    assert LineageEvent.objects.filter(event_type="ABORT", run__isnull=True).count() == 1
