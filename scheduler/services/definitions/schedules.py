"""Creating, changing and deleting schedules, with every check in one place.

The admin, the pages, the commands and the Python API all save through here,
so a bad cron, time zone, filter, watermark, target or cycle is refused the
same way everywhere, naming the field.
"""
from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any, Iterable

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from scheduler.core.userdata import storable
from scheduler.models import (
    Schedule,
    Team,
    WorkloadClass,
)
from scheduler.services.common.audit import audit_record
from scheduler.services.common.errors import Conflict, NotFound, ServiceError, check_text
from scheduler.services.admission.firing import compute_next_fire
from scheduler.services.integrations.channels import (
    mask_url,
    split_channels,
    unmask_channels,
)
# schedule_get is re-exported
from scheduler.services.runs.queue import check_target_params, schedule_get, validate_params  # noqa: F401
from scheduler.services.admission.webhooks import webhook_rotate_secret
from scheduler.services.worker.commands import command_env_seal, command_spec_shown

from scheduler.services.definitions.schedule_source import FileSource, check_unmanaged, source_stamp
from scheduler.services.definitions.schedule_checks import (  # noqa: E402,F401  re-exported: the checks' names
    EDITABLE, INT_MAX, JSON_FIELDS, MAX_RETENTION_DAYS, NAME_RE, NON_NEGATIVE_INT, POSITIVE_INT, SCHEDULE_FIELDS,
    TEXT_FIELDS, validate_schedule)


def _resolve(data: dict) -> tuple[dict, list[Schedule] | None]:
    unknown = sorted(set(data) - EDITABLE)
    if unknown:
        raise ServiceError("unknown field", field=unknown[0])
    data = dict(data)
    if isinstance(data.get("name"), str):
        check_text(data["name"], field="name")  # looked up before the full validation runs
    depends = data.pop("depends_on", None)
    upstreams = None
    if depends is not None and not isinstance(depends, (list, tuple, set)):
        raise ServiceError("must be a list of schedule names", field="depends_on")
    if depends is not None:
        upstreams = []
        for item in depends:
            if isinstance(item, Schedule):
                upstreams.append(item)
                continue
            if not isinstance(item, str) or not storable(item):
                raise ServiceError(f"unknown schedule {item!r}", field="depends_on")
            found = Schedule.objects.filter(name=item).first()
            if found is None:
                raise ServiceError(f"unknown schedule '{item}'", field="depends_on")
            upstreams.append(found)
    wc = data.get("workload_class")
    if isinstance(wc, str):
        found = WorkloadClass.objects.filter(name=wc).first() if storable(wc) else None
        if found is None:
            raise ServiceError(f"unknown workload class '{wc}'", field="workload_class")
        data["workload_class"] = found
    elif "workload_class" in data and not isinstance(wc, WorkloadClass):
        raise ServiceError(f"must be a workload class name, got {wc!r}", field="workload_class")
    owner = data.get("owner")
    if isinstance(owner, str):
        found = Team.objects.filter(name=owner).first() if storable(owner) else None
        if found is None:
            known = ", ".join(Team.objects.order_by("name").values_list("name", flat=True)[:20]) or "none"
            raise ServiceError(f"unknown team '{owner}' (known: {known})", field="owner")
        data["owner"] = found
    elif owner is None and "owner" in data:
        data.pop("owner")  # no owner named: the default team on create, unchanged on update
    elif "owner" in data and not isinstance(owner, Team):
        raise ServiceError(f"must be a team name, got {owner!r}", field="owner")
    return data, upstreams


def _next_fire(schedule: Schedule, now: datetime) -> datetime | None:
    return compute_next_fire(schedule, after=now) if schedule.enabled else None


def field_default(field: str) -> Any:
    """The value a schedule gets for `field` when nobody sets it."""
    if field == "depends_on":
        return []
    if field == "workload_class":
        return "standard"
    if field == "owner":
        return settings.ETL_DEFAULT_TEAM
    return Schedule._meta.get_field(field).get_default()


def schedule_spec(schedule: Schedule, *, depends_on: list[str] | None = None) -> dict:
    """Every SCHEDULE_FIELDS value of `schedule`, in that order, as plain data (names for relations).

    For an unsaved schedule pass its upstream names in `depends_on`.
    """
    spec: dict[str, Any] = {}
    for field in SCHEDULE_FIELDS:
        if field == "workload_class":
            spec[field] = schedule.workload_class.name if schedule.workload_class_id else None
        elif field == "owner":
            spec[field] = schedule.owner.name if schedule.owner_id else None
        elif field == "depends_on":
            if depends_on is not None:
                spec[field] = sorted(depends_on)
            elif schedule.pk:
                spec[field] = sorted(schedule.depends_on.values_list("name", flat=True))
            else:
                spec[field] = []
        elif field == "alert_channels":
            spec[field] = split_channels(schedule.alert_channels, field=field)
        else:
            spec[field] = getattr(schedule, field)
    return spec


def _snapshot(schedule: Schedule) -> dict:
    return schedule_spec(schedule)


def schedule_spec_masked(schedule: Schedule, *, depends_on: list[str] | None = None) -> dict:
    """`schedule_spec` as shown to people and clients (the API): channel URLs with their secrets masked."""
    return _audited(schedule_spec(schedule, depends_on=depends_on))


def _audited(snapshot: dict) -> dict:
    """What the audit log keeps: channel URLs may carry tokens and passwords, and a command's env values
    marked secret are secrets, so both are masked."""
    if isinstance(snapshot.get("alert_channels"), list):
        snapshot = {**snapshot, "alert_channels": [mask_url(url) for url in snapshot["alert_channels"]]}
    if snapshot.get("command"):
        snapshot = {**snapshot, "command": command_spec_shown(snapshot["command"])}
    return snapshot


def schedule_save(*, data: dict, actor: Any, schedule: Schedule | None = None, reason: str = "",
                  now: datetime | None = None, source: FileSource | None = None) -> Schedule:
    """Create (schedule=None) or update a schedule from a dict of field values.

    `source`: the schedules file this change comes from (recorded on the schedule). Without it, a change of a
    managed field of a schedule that a file manages is refused (Conflict naming the field and the file)."""
    now = now or timezone.now()
    data, upstreams = _resolve(data)
    creating = schedule is None
    with transaction.atomic():
        if creating:
            if "workload_class" not in data:
                data["workload_class"], _ = WorkloadClass.objects.get_or_create(name="standard")
            if "owner" not in data:
                data["owner"] = Team.objects.get(pk=Team.default_team_id())
            if "command" in data:  # env values marked secret are stored encrypted
                data["command"] = command_env_seal(data["command"], None)
            schedule = Schedule(**data)
            before = None
        else:
            name = schedule.name
            schedule = Schedule.objects.select_for_update().filter(pk=schedule.pk).first()
            if schedule is None:  # deleted since the caller read it
                raise NotFound(f"schedule '{name}' was deleted", field="name")
            if schedule.deleting_at is not None:
                raise Conflict(f"schedule '{name}' is being deleted (asked by {schedule.deleting_by}); it changes "
                               "no more", field="schedule")
            before = _snapshot(schedule)
            _merge(schedule, data, before)
            if source is None:
                _check_managed(schedule, before, upstreams)
        if (creating or "name" in data) and _name_taken(schedule):
            raise Conflict(f"a schedule named '{schedule.name}' already exists", field="name")
        if upstreams is None and not creating:
            current = list(schedule.depends_on.all())
            validate_schedule(schedule, depends_on=current if schedule.trigger_kind == "upstream" else None)
        else:
            validate_schedule(
                schedule,
                depends_on=upstreams if upstreams is not None else [] if schedule.trigger_kind == "upstream" else None,
            )
        if schedule.trigger_kind == "webhook" and not schedule.webhook_secret:
            schedule.webhook_secret = secrets.token_urlsafe(32)
        timing_changed = creating or any(k in data for k in ("trigger_kind", "trigger_config", "timezone", "enabled"))
        if timing_changed:
            schedule.next_fire_at = _next_fire(schedule, now)
        _write(schedule, creating=creating, was=before["name"] if before else schedule.name)
        if upstreams is not None:
            schedule.depends_on.set(upstreams)
        after = _snapshot(schedule)
        changed = {k: v for k, v in after.items() if before is None or before.get(k) != v}
        if creating or changed:
            audit_record(
                actor=actor, action="schedule.create" if creating else "schedule.update", target=schedule,
                before=None if before is None else _audited({k: before.get(k) for k in changed}),
                after=_audited(changed), reason=reason, at=now,
            )
        if source is not None:
            source_stamp(schedule=schedule, source=source, actor=actor, reason=reason)
    return schedule


def _merge(schedule: Schedule, data: dict, before: dict) -> None:
    if "alert_channels" in data:  # what a page or file showed masked keeps the stored secret
        data["alert_channels"] = unmask_channels(
            split_channels(data["alert_channels"], field="alert_channels"), before["alert_channels"])
    if "command" in data:  # so does a masked env value marked secret
        data["command"] = command_env_seal(data["command"], before["command"])
    for key, value in data.items():
        setattr(schedule, key, value)


def _check_managed(schedule: Schedule, before: dict, upstreams: list[Schedule] | None) -> None:
    if schedule.source_file:
        wanted = schedule_spec(schedule, depends_on=None if upstreams is None else [u.name for u in upstreams])
        check_unmanaged(schedule, [f for f in SCHEDULE_FIELDS if wanted[f] != before[f]])


def schedule_check_managed(*, schedule: Schedule, data: dict) -> None:
    """Raise the refusal `schedule_save` would raise for `data` on a schedule that a file manages (a form asks
    before it saves); nothing is written."""
    stored = Schedule.objects.filter(pk=schedule.pk).first()
    if stored is None or not stored.source_file:
        return
    data, upstreams = _resolve(data)
    before = _snapshot(stored)
    _merge(stored, data, before)
    _check_managed(stored, before, upstreams)


def _name_taken(schedule: Schedule) -> bool:
    return Schedule.objects.filter(name=schedule.name).exclude(pk=schedule.pk).exists()


def _write(schedule: Schedule, *, creating: bool, was: str) -> None:
    """INSERT or UPDATE; never an INSERT for a schedule deleted meanwhile (Django's save would re-create it)."""
    try:
        with transaction.atomic():  # PostgreSQL: a refused statement must not poison the caller's transaction
            schedule.save(force_insert=creating, force_update=not creating)
    except IntegrityError:
        if _name_taken(schedule):  # a create or rename of the same name committed since the check
            raise Conflict(f"a schedule named '{schedule.name}' already exists", field="name") from None
        raise
    except DatabaseError:
        if not creating and not Schedule.objects.filter(pk=schedule.pk).exists():  # the UPDATE found no row
            raise NotFound(f"schedule '{was}' was deleted", field="name") from None
        raise


def schedule_set_enabled(*, schedule: Schedule, enabled: bool, actor: Any, reason: str = "",
                         now: datetime | None = None) -> Schedule:
    return schedule_save(data={"enabled": bool(enabled)}, schedule=schedule, actor=actor, reason=reason, now=now)


def schedule_rotate_secret(*, schedule: Schedule, actor: Any, reason: str = "") -> str:
    """Kept for callers of the schedule API; the webhook service owns rotation."""
    return webhook_rotate_secret(schedule=schedule, actor=actor, reason=reason)


def iter_names(items: Iterable[Schedule]) -> list[str]:
    return [s.name for s in items]
