"""Acknowledging a schedule's failures: who saw them, when, and why they are handled (the overview's work list)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.models import FailureAck, Run, RunStatus, Schedule
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import ServiceError, check_text
from scheduler.services.access.teams import authorize, resolve_user

ACK_PERM = "scheduler.add_failureack"


def failure_acknowledge(*, schedule: Schedule, actor: Any, note: Any, up_to_run_id: int | None = None,
                        now: datetime | None = None) -> FailureAck:
    """Acknowledge `schedule`'s failures up to its latest failed run (or `up_to_run_id`, one of them).

    The schedule leaves the open list until a later run fails; a later success moves it to "recovered".
    """
    authorize(actor=actor, perm=ACK_PERM, obj=schedule)
    if not isinstance(note, str):
        raise ServiceError(f"must be text, got {type(note).__name__}", field="note")
    note = check_text(note, field="note", max_length=500).strip()
    if not note:
        raise ServiceError("say why the failures are handled (a ticket, a cause, a plan)", field="note")
    failed = Run.objects.filter(schedule=schedule, status=RunStatus.FAILED)
    if up_to_run_id is None:
        up_to_run_id = failed.order_by("-id").values_list("id", flat=True).first()
        if up_to_run_id is None:
            raise ServiceError(f"schedule '{schedule.name}' has no failed run: nothing to acknowledge", field="run")
    elif isinstance(up_to_run_id, bool) or not isinstance(up_to_run_id, int) or not failed.filter(
            pk=up_to_run_id).exists():
        raise ServiceError(f"{up_to_run_id!r} is not a failed run of schedule '{schedule.name}'", field="run")
    now = now or timezone.now()
    name, _kind = actor_name(actor)
    with transaction.atomic():
        ack = FailureAck.objects.create(schedule=schedule, up_to_run_id=up_to_run_id, user=resolve_user(actor),
                                        actor=name[:150], at=now, note=note)
        audit_record(actor=actor, action="failure.acknowledge", target=schedule, after={"up_to_run": up_to_run_id},
                     reason=note, at=now)
    return ack
