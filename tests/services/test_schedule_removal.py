"""Deleting a schedule with unfinished runs: refused naming them, or (stop_runs) stopped first and deleted after."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Run, RunStatus, Schedule, StopKind
from scheduler.services.cluster.governance import governance_tick
from scheduler.services.common.errors import Conflict, ServiceError
from scheduler.services.definitions.schedule_removal import (
    DELETED, DELETING, UnfinishedRuns, schedule_delete, schedules_deleting_finish)
from scheduler.services.definitions.schedules import schedule_save, schedule_set_enabled
from scheduler.services.runs.lost import run_stop_settled
from scheduler.services.runs.queue import run_trigger_manual
from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

S = RunStatus


def _begun(make_run, schedule, now):
    """A RUNNING run a worker has claimed (its code executes)."""
    return make_run(schedule, S.RUNNING, started_at=now, heartbeat_at=now, worker_id="etl@here:1")


@pytest.mark.django_db
def test_a_schedule_without_unfinished_runs_is_deleted_at_once_with_its_audit_entry(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    make_run(schedule, S.SUCCEEDED)
    assert schedule_delete(schedule=schedule, actor="user:olivia", reason="replaced", now=now) == DELETED
    assert not Schedule.objects.filter(name="orders").exists()
    entry = AuditEntry.objects.get(action="schedule.delete")
    assert (entry.actor, entry.reason, entry.before["name"]) == ("olivia", "replaced", "orders")


@pytest.mark.django_db
def test_unfinished_runs_refuse_the_delete_naming_them_and_nothing_changes(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    queued, waiting = make_run(schedule, S.QUEUED), make_run(schedule, S.WAITING)
    running = _begun(make_run, schedule, now)
    Run.objects.filter(pk=running.pk).update(stop_requested_at=now, stop_kind=StopKind.CANCEL)
    make_run(schedule, S.FAILED)
    with pytest.raises(UnfinishedRuns) as info:
        schedule_delete(schedule=schedule, actor="user:olivia", now=now)
    assert isinstance(info.value, Conflict) and info.value.field == "schedule"
    assert info.value.run_ids == [queued.pk, waiting.pk, running.pk]
    message = str(info.value)
    assert f"{queued.pk} (QUEUED), {waiting.pk} (WAITING), {running.pk} (STOPPING)" in message
    assert "stop_runs" in message
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.deleting_at is None
    assert Run.objects.filter(schedule=schedule).count() == 4
    assert not AuditEntry.objects.filter(action__startswith="schedule.delete").exists()


@pytest.mark.django_db
def test_stop_runs_cancels_what_has_not_begun_and_deletes_at_once(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    queued = make_run(schedule, S.QUEUED)
    assert schedule_delete(schedule=schedule, actor="user:olivia", reason="gone", stop_runs=True, now=now) == DELETED
    assert not Schedule.objects.filter(pk=schedule.pk).exists() and not Run.objects.filter(pk=queued.pk).exists()
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions[-3:] == ["schedule.delete_requested", "run.cancel", "schedule.delete"]
    requested = AuditEntry.objects.get(action="schedule.delete_requested")
    assert requested.after == {"enabled": False, "stopping_runs": [queued.pk]} and requested.actor == "olivia"


@pytest.mark.django_db
def test_a_running_run_is_asked_to_stop_and_governance_deletes_once_it_has_ended(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    running = _begun(make_run, schedule, now)
    assert schedule_delete(schedule=schedule, actor="user:olivia", reason="gone", stop_runs=True, now=now) == DELETING
    running.refresh_from_db()
    assert running.stopping and running.stop_kind == StopKind.CANCEL
    assert "schedule 'orders' is being deleted: gone" in running.stop_reason
    schedule.refresh_from_db()
    assert schedule.deleting_at == now and schedule.deleting_by == "olivia" and not schedule.enabled
    assert schedule.next_fire_at is None

    # nothing changes it meanwhile, not even a resume, and nothing triggers it
    with pytest.raises(Conflict, match="is being deleted"):
        schedule_set_enabled(schedule=schedule, enabled=True, actor="tests")
    with pytest.raises(Conflict, match="is being deleted"):
        schedule_save(data={"priority": 9}, schedule=schedule, actor="tests")
    with pytest.raises(ServiceError, match="disabled"):
        run_trigger_manual(schedule=schedule, actor="tests")
    assert schedules_deleting_finish(now=now) == []  # its code has not stopped yet
    assert Schedule.objects.filter(pk=schedule.pk).exists()

    # the worker reports that its code has ended: the next governance tick deletes the schedule
    assert run_stop_settled(run=Run.objects.get(pk=running.pk), now=now + timedelta(seconds=2), why="it ended")
    assert Run.objects.get(pk=running.pk).status == S.CANCELLED
    tick = governance_tick(now=now + timedelta(seconds=15), holder="t")
    assert tick.actions["schedules_deleted"] == ["orders"] and not tick.error
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    deleted = AuditEntry.objects.get(action="schedule.delete")
    assert deleted.actor == "governance" and deleted.after["asked_by"] == "olivia" and deleted.reason == "gone"


@pytest.mark.django_db
def test_governance_cancels_a_run_that_slipped_in_and_finishes_after_a_crash(make_schedule, make_run, now):
    """The mark is in the database: a run created after it (a backfill window) is cancelled by the next tick."""
    schedule = make_schedule("orders")
    Schedule.objects.filter(pk=schedule.pk).update(deleting_at=now, deleting_by="olivia", enabled=False)
    late = make_run(schedule, S.QUEUED)
    assert schedules_deleting_finish(now=now) == ["orders"]
    assert not Run.objects.filter(pk=late.pk).exists()
    assert AuditEntry.objects.filter(action="run.cancel", actor="governance").exists()


@pytest.mark.django_db
def test_asking_again_goes_on_and_bad_input_changes_nothing(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    running = _begun(make_run, schedule, now)
    with pytest.raises(ServiceError, match="reason: must not contain the NUL"):
        schedule_delete(schedule=schedule, actor="tests", reason="bad\x00", stop_runs=True, now=now)
    assert Schedule.objects.get(pk=schedule.pk).deleting_at is None and not Run.objects.get(pk=running.pk).stopping
    assert schedule_delete(schedule=schedule, actor="tests", stop_runs=True, now=now) == DELETING
    # a second delete, even without stop_runs, goes on with the one asked: no new request, no refusal
    assert schedule_delete(schedule=schedule, actor="tests", now=now) == DELETING
    assert AuditEntry.objects.filter(action="schedule.delete_requested").count() == 1


@pytest.mark.django_db
def test_the_host_deletes_the_same_way(make_schedule, make_run, now):
    host = SchedulerHost()
    schedule = make_schedule("orders")
    _begun(make_run, schedule, now)
    with pytest.raises(UnfinishedRuns):
        host.schedules.delete("orders", actor="tests")
    assert host.schedules.delete("orders", actor="tests", stop_runs=True) == DELETING


@pytest.mark.django_db
def test_a_prune_of_a_schedule_with_unfinished_runs_refuses_the_whole_file(make_schedule, make_run, standard_class):
    from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply

    busy = make_schedule("busy")
    queued = make_run(busy, S.QUEUED)
    text = "version: 1\nschedules:\n  - {name: kept, target_id: demo.noop, trigger_kind: manual}\n"
    with pytest.raises(ScheduleFileError) as info:
        schedules_apply(text=text, actor="tests", prune=True)
    [problem] = info.value.problems
    assert problem.entry == "busy" and f"unfinished runs: {queued.pk} (QUEUED)" in problem.problem
    assert Schedule.objects.filter(pk=busy.pk).exists() and not Schedule.objects.filter(name="kept").exists()
