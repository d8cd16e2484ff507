"""SchedulerHost.cancel_run: the same check and outcomes as the run page and `manage.py cancel_run`."""
from __future__ import annotations

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Run, RunStatus, Schedule, StopKind, Team
from scheduler.services.common.errors import NotFound, ServiceError
from scheduler.services.access.teams import PermissionRefused
from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

pytestmark = pytest.mark.django_db


def test_a_queued_run_is_cancelled_and_a_running_one_is_stopping(make_schedule, make_run, operator):
    host = SchedulerHost()
    schedule = make_schedule("orders")
    queued, running = make_run(schedule, RunStatus.QUEUED), make_run(schedule, RunStatus.RUNNING)
    assert host.cancel_run(queued.pk, actor=operator) == "cancelled"
    assert host.cancel_run(running.pk, actor="olivia", reason="wrong window") == "stopping"
    running.refresh_from_db()
    assert running.status == RunStatus.RUNNING and running.shown_status == "STOPPING"
    assert running.stop_kind == StopKind.CANCEL and running.stop_reason == "wrong window"
    assert host.cancel_run(running.pk, actor="olivia") == "already stopping"
    assert host.cancel_run(running.pk, actor="olivia", force=True) == "stopping"
    running.refresh_from_db()
    assert running.stop_kind == StopKind.TERMINATE
    assert Run.objects.get(pk=queued.pk).status == RunStatus.CANCELLED
    assert AuditEntry.objects.filter(action="run.stop.terminate", actor="olivia").exists()


def test_it_refuses_another_teams_run_a_final_run_and_an_unknown_one(make_schedule, make_run, operator):
    host = SchedulerHost()
    theirs = make_schedule("ledger")
    Schedule.objects.filter(pk=theirs.pk).update(owner=Team.objects.create(name="payments"))
    run = make_run(theirs, RunStatus.RUNNING)
    with pytest.raises(PermissionRefused, match="may not cancel runs of schedule 'ledger'"):
        host.cancel_run(run.pk, actor=operator)
    assert Run.objects.get(pk=run.pk).stop_requested_at is None
    done = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    with pytest.raises(ServiceError, match=f"run {done.pk} is already SUCCEEDED"):
        host.cancel_run(done.pk, actor=operator)
    with pytest.raises(NotFound, match="unknown run 987654"):
        host.cancel_run(987654, actor=operator)


def test_the_actor_is_required():
    with pytest.raises(TypeError):
        SchedulerHost().cancel_run(1)  # a cancel says who asked for it
