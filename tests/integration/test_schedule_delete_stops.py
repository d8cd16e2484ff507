"""A schedule deleted with stop_runs while its command runs, against a real `manage.py qcluster`: the command's
process is stopped as a cancel stops it, the run ends CANCELLED, and governance deletes the schedule."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Run, Schedule
from scheduler.services.definitions.schedule_removal import DELETING, UnfinishedRuns, schedule_delete
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import wait_until
from tests.integration.test_run_control import SLEEPS, WAIT, _command, _lines, _still_there, cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_deleting_with_stop_runs_stops_the_running_command_and_then_deletes_the_schedule(make_schedule, tmp_path):
    marks = tmp_path / "sleeps.pids"
    schedule = _command(make_schedule, "doomed", SLEEPS, env={"MARKS": marks})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        wait_until(lambda: len(_lines(marks)) == 1, timeout=WAIT, what="the command to start", log_path=log)
        pid = int(_lines(marks)[0].split()[2])
        with pytest.raises(UnfinishedRuns):
            schedule_delete(schedule=schedule, actor="tests")
        assert _still_there([pid]) == [pid], "a refused delete stops nothing"
        assert schedule_delete(schedule=schedule, actor="tests", reason="retired", stop_runs=True) == DELETING
        wait_until(lambda: not Schedule.objects.filter(pk=schedule.pk).exists(), timeout=WAIT,
                   what="governance to delete the schedule", log_path=log)
        left = _still_there([pid])
    assert left == [], "the command's process was stopped"
    assert not Run.objects.filter(pk=run.pk).exists()
    cancel = AuditEntry.objects.get(action="run.stop.cancel", target_id=str(run.pk))
    assert "schedule 'doomed' is being deleted: retired" in cancel.reason
    assert AuditEntry.objects.filter(action="schedule.delete", reason="retired").exists()
