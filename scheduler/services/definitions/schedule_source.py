"""Which schedules file manages a schedule, the refusal of edits made elsewhere, and detaching.

A schedule applied from a file records its source (the file's name, the SHA-256 of its text, when, by whom).
Its definition then lives in the file: an edit of a managed field through any other door (the admin, the API,
`SchedulerHost.schedules`, `manage.py team assign`) is refused, naming the field and the file, until the schedule
is detached (an audited action). Pausing, resuming and triggering are operations, not edits: `enabled` is no
managed field, so they stay allowed (the next apply, or `apply_schedules --check`, still compares it).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.models import Schedule
from scheduler.services.access.teams import authorize
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import Conflict, NotFound, check_text
from scheduler.services.definitions.schedule_checks import SCHEDULE_FIELDS

#: The fields a file states and only the file may change; `enabled` is pause / resume, an operation.
MANAGED_FIELDS: tuple[str, ...] = tuple(f for f in SCHEDULE_FIELDS if f != "enabled")


@dataclass(frozen=True)
class FileSource:
    """A schedules file as applied: its name (no directory), the digest of its text, when and by whom."""

    name: str
    digest: str
    at: datetime
    by: str

    @classmethod
    def of(cls, *, name: str, text: str, actor: Any, at: datetime) -> "FileSource":
        name = check_text(name, field="source", max_length=200).rsplit("/", 1)[-1] or "schedules.yaml"
        return cls(name=name, digest=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), at=at,
                   by=actor_name(actor)[0][:150])

    def fields(self) -> dict[str, Any]:
        return {"source_file": self.name, "source_digest": self.digest, "source_applied_at": self.at,
                "source_applied_by": self.by}


def managed_by(schedule: Schedule) -> dict | None:
    """{file, digest, applied_at, applied_by} of the file that manages `schedule`, or None."""
    if not schedule.source_file:
        return None
    return {"file": schedule.source_file, "digest": schedule.source_digest,
            "applied_at": schedule.source_applied_at, "applied_by": schedule.source_applied_by}


def managed_refusal(schedule: Schedule, field: str) -> Conflict:
    """The refusal of an edit of managed `field` of `schedule` made elsewhere than in its file."""
    return Conflict(f"is managed by {schedule.source_file}: change it in the file and apply it, or detach "
                    f"schedule '{schedule.name}' from the file first", field=field)


def check_unmanaged(schedule: Schedule, changed: list[str]) -> None:
    """Refuse (Conflict naming the first field) a change of managed fields of a schedule a file manages."""
    if not schedule.source_file:
        return
    for field in MANAGED_FIELDS:
        if field in changed:
            raise managed_refusal(schedule, field)


def source_stamp(*, schedule: Schedule, source: FileSource, actor: Any, reason: str = "") -> bool:
    """Record that `source` was applied to `schedule` (in the apply's transaction); True when it changed.

    A schedule coming under a file (or moving to another file) has an audit entry `schedule.managed`; a new
    digest of the same file (another schedule of it changed) is kept without one."""
    before = managed_by(schedule)
    fields = source.fields()
    if all(getattr(schedule, k) == v for k, v in fields.items() if k != "source_applied_at"):
        return False
    Schedule.objects.filter(pk=schedule.pk).update(**fields)
    for key, value in fields.items():
        setattr(schedule, key, value)
    if before is None or before["file"] != source.name:
        audit_record(actor=actor, action="schedule.managed", target=schedule,
                     before={"managed_by": before["file"] if before else None},
                     after={"managed_by": source.name, "digest": source.digest}, reason=reason, at=source.at)
    return True


def schedule_detach(*, schedule: Schedule, actor: Any, reason: str = "", now: datetime | None = None) -> Schedule:
    """Detach `schedule` from the file that manages it, so the admin and the API may edit it (audited).

    Conflict when no file manages it. The next apply of a file that lists it manages it again."""
    authorize(actor=actor, perm="scheduler.change_schedule", obj=schedule)
    reason = check_text(reason, field="reason", max_length=500)
    now = now or timezone.now()
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().filter(pk=schedule.pk).first()
        if locked is None:
            raise NotFound(f"schedule '{schedule.name}' was deleted", field="schedule")
        before = managed_by(locked)
        if before is None:
            raise Conflict(f"schedule '{locked.name}' is not managed by a schedules file", field="schedule")
        Schedule.objects.filter(pk=locked.pk).update(source_file="", source_digest="", source_applied_at=None,
                                                     source_applied_by="")
        audit_record(actor=actor, action="schedule.detach", target=locked,
                     before={"managed_by": before["file"], "digest": before["digest"],
                             "applied_by": before["applied_by"]},
                     after={"managed_by": None}, reason=reason, at=now)
    schedule.refresh_from_db()
    return schedule


__all__ = ["FileSource", "MANAGED_FIELDS", "check_unmanaged", "managed_by", "managed_refusal", "schedule_detach",
           "source_stamp"]
