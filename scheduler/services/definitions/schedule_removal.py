"""Deleting a schedule: refused while it has unfinished runs, or (stop_runs) once they have been stopped.

A schedule's runs are deleted with it, so deleting one whose run is QUEUED, WAITING or RUNNING (STOPPING
included) would lose a run whose code may still be executing, and leave its OpenLineage START without an end.
`schedule_delete` therefore refuses it (`UnfinishedRuns`, naming the runs), unless `stop_runs` is asked. Then:

1. One transaction marks the schedule as being deleted (`deleting_at`, by whom, why), disables it (nothing
   fires it any more; a save, a resume or a manual trigger of it is refused), with an audit entry
   `schedule.delete_requested` naming the runs.
2. Each unfinished run is cancelled as a person's cancel does (`run_cancel`): one that has not begun ends
   CANCELLED at once; one whose code executes is asked to stop, and ends CANCELLED when its code has ended
   (forced after the grace). Its end writes its lineage ABORT, like any cancel.
3. When none is left unfinished, the schedule is deleted (`schedule.delete`, as any delete).

Each step is its own transaction, and the mark is in the database: if the process asking dies after step 1,
or a run is still stopping, governance (`schedules_deleting_finish`, each tick) goes on: it cancels any run
of a schedule being deleted that is not final and not already stopping (a run that slipped in), and deletes
the schedule once nothing of it runs. A run whose worker died is ended by governance's lost-worker check as
any other stopping run. So the delete finishes, at the latest, a tick after its last run ended.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.models import Run, RunStatus, Schedule
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import Conflict, NotFound, check_text
from scheduler.services.definitions.schedules import schedule_spec_masked
from scheduler.services.runs.stop import run_cancel

DELETED = "deleted"  # gone now
DELETING = "deleting"  # marked, its runs asked to stop; deleted when the last has ended
SHOWN_RUNS = 20


class UnfinishedRuns(Conflict):
    """The schedule has runs not final yet (`run_ids`); the API answers 409 with them."""

    def __init__(self, name: str, runs: list[tuple[int, str]]) -> None:
        self.run_ids = [pk for pk, _status in runs]
        shown = ", ".join(f"{pk} ({status})" for pk, status in runs[:SHOWN_RUNS])
        more = f" and {len(runs) - SHOWN_RUNS} more" if len(runs) > SHOWN_RUNS else ""
        super().__init__(f"schedule '{name}' has unfinished runs: {shown}{more}; wait for them to end, or delete "
                         "it with stop_runs (they are stopped as a cancel does, then it is deleted)", field="schedule")


def unfinished_runs(schedule_id: int) -> list[tuple[int, str]]:
    """(id, status as shown: STOPPING for a run asked to stop) of the schedule's runs not final, oldest first."""
    rows = (Run.objects.filter(schedule_id=schedule_id).exclude(status__in=RunStatus.final())
            .order_by("id").values_list("id", "status", "stop_requested_at"))
    return [(pk, "STOPPING" if status == RunStatus.RUNNING and asked else status) for pk, status, asked in rows]


def schedule_delete(*, schedule: Schedule, actor: Any, reason: str = "", stop_runs: bool = False,
                    now: datetime | None = None) -> str:
    """Delete `schedule`: DELETED, or DELETING when (stop_runs) its runs are being stopped first.

    Raises UnfinishedRuns (a Conflict naming the runs, nothing changed) when it has unfinished runs and
    `stop_runs` is not asked; a schedule being deleted already goes on being deleted.
    """
    now = now or timezone.now()
    reason = check_text(reason, field="reason", max_length=500)
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().filter(pk=schedule.pk).first()
        if locked is None:
            raise NotFound(f"schedule '{schedule.name}' was deleted", field="schedule")
        runs = unfinished_runs(locked.pk)
        if not runs:
            _delete(locked, actor=actor, reason=reason, now=now)
            return DELETED
        if not stop_runs and locked.deleting_at is None:
            raise UnfinishedRuns(locked.name, runs)
        if locked.deleting_at is None:
            who = actor_name(actor)[0][:150]
            Schedule.objects.filter(pk=locked.pk).update(deleting_at=now, deleting_by=who, deleting_reason=reason,
                                                         enabled=False, next_fire_at=None)
            audit_record(actor=actor, action="schedule.delete_requested", target=locked,
                         before={"enabled": locked.enabled, "runs": [f"{pk} ({st})" for pk, st in runs]},
                         after={"enabled": False, "stopping_runs": [pk for pk, _ in runs]}, reason=reason, at=now)
    return _finish(schedule.pk, actor=actor, now=now)


def _cancel_unstopped(schedule_id: int, *, actor: Any, now: datetime, reason: str) -> None:
    """Cancel each run of the schedule that is not final and not asked to stop yet; each in its own transaction."""
    for run in Run.objects.filter(schedule_id=schedule_id).exclude(status__in=RunStatus.final()).order_by("id"):
        if run.stopping:
            continue
        try:
            run_cancel(run=run, actor=actor, reason=reason, now=now)
        except Conflict:
            continue  # it became final meanwhile


def _finish(schedule_id: int, *, actor: Any, now: datetime) -> str:
    """Stop what still runs of a schedule being deleted; delete it when nothing is left unfinished."""
    marked = Schedule.objects.filter(pk=schedule_id, deleting_at__isnull=False).first()
    if marked is None:
        return DELETED
    why = f"schedule '{marked.name}' is being deleted" + (f": {marked.deleting_reason}" if marked.deleting_reason
                                                          else "")
    _cancel_unstopped(schedule_id, actor=actor, now=now, reason=why[:300])
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().filter(pk=schedule_id, deleting_at__isnull=False).first()
        if locked is None:
            return DELETED
        if unfinished_runs(schedule_id):
            return DELETING
        _delete(locked, actor=actor, reason=locked.deleting_reason, now=now, asked_by=locked.deleting_by)
    return DELETED


def _delete(schedule: Schedule, *, actor: Any, reason: str, now: datetime, asked_by: str = "") -> None:
    downstream = list(schedule.downstream.values_list("name", flat=True))
    after: dict[str, Any] = {"downstream_unlinked": downstream}
    if asked_by:
        after["asked_by"] = asked_by
    audit_record(actor=actor, action="schedule.delete", target=schedule, before=schedule_spec_masked(schedule),
                 after=after, reason=reason, at=now)
    schedule.delete()


def schedules_deleting_finish(*, now: datetime) -> list[str]:
    """Governance: go on with every delete that waits for its runs; the names of the schedules deleted now."""
    done = []
    for pk, name in Schedule.objects.filter(deleting_at__isnull=False).order_by("id").values_list("id", "name"):
        if _finish(pk, actor="governance", now=now) == DELETED:
            done.append(name)
    return done


__all__ = ["DELETED", "DELETING", "UnfinishedRuns", "schedule_delete", "schedules_deleting_finish",
           "unfinished_runs"]
