"""/api/v1/schedules: list, get, create, update, delete, through the schedule service like the admin."""
from __future__ import annotations

from typing import Literal

from django.db.models import Prefetch
from ninja import Field, Query, Router, Schema, Status

from scheduler import selectors
from scheduler.api.common import MAX_LIMIT, bounded_limit, caller, errors, require, schedule_by_name, team_ids_for
from scheduler.api.schemas import (
    QueryBool, ReasonIn, ScheduleCreate, ScheduleDeleting, ScheduleOut, SchedulePage, ScheduleUpdate)
from scheduler.models import BreakerStatus, Schedule
from scheduler.services.common.errors import NotFound, ServiceError
from scheduler.services.definitions.schedule_removal import DELETED, schedule_delete, unfinished_runs
from scheduler.services.definitions.schedule_source import managed_by, schedule_detach
from scheduler.services.definitions.schedules import schedule_save, schedule_spec_masked
from scheduler.services.access.teams import authorize_owner_change, owner_for_create, team_get, visible_team_ids

router = Router(tags=["schedules"])


HIDDEN_NAME = "(a schedule of another team)"


def schedule_out(schedule: Schedule, visible: frozenset[int] | None = None) -> dict:
    """A schedule as the API shows it; with viewing scoped (`visible`), another team's upstream is not named.

    The upstreams are read through `depends_on.all()`, so a list that prefetched them asks no query per schedule."""
    upstreams = list(schedule.depends_on.all())
    spec = schedule_spec_masked(schedule, depends_on=[u.name for u in upstreams])
    if visible is not None and spec.get("depends_on"):
        hidden = {u.name for u in upstreams if u.owner_id not in visible}
        spec["depends_on"] = [HIDDEN_NAME if name in hidden else name for name in spec["depends_on"]]
    return {
        "id": schedule.pk, "name": schedule.name, "owner": schedule.owner.name if schedule.owner_id else None,
        "enabled": schedule.enabled, "target_kind": schedule.target_kind, "target_id": schedule.target_id,
        "trigger_kind": schedule.trigger_kind, "breaker_status": schedule.breaker_status,
        "breaker_failures": schedule.breaker_failures, "next_fire_at": schedule.next_fire_at,
        "last_fire_at": schedule.last_fire_at, "created_at": schedule.created_at, "updated_at": schedule.updated_at,
        "spec": spec, "managed_by": managed_by(schedule), "deleting": schedule.deleting_at is not None,
    }


def owner_team(name: str):
    """The team a body names as `owner`: an unknown one is bad input in the body (422), not a missing URL (404)."""
    try:
        return team_get(name)
    except NotFound as exc:
        raise ServiceError(exc.problem, field="owner") from None


class ScheduleFilters(Schema):
    team: str | None = None
    enabled: QueryBool | None = Field(default=None, description="true or false")
    status: Literal["enabled", "disabled"] | None = None
    breaker: BreakerStatus | None = None
    cursor: str | None = Field(default=None, pattern=r"^[-a-zA-Z0-9_]{1,100}$",
                               description="The `next` of the previous page: schedules named after it.")
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)


@router.get("/schedules", response={200: SchedulePage, **errors()}, summary="List schedules, by name")
def list_schedules(request, filters: Query[ScheduleFilters]):
    """The schedules the caller may see, by name; filter by team, enabled (or status), breaker.

    Keyset pages on the name: follow `next` as `cursor` until it is null."""
    require(request, "scheduler.view_schedule")
    qs = selectors.schedules_with_last_run(team_ids_for(request, filters.team))
    enabled = filters.enabled if filters.enabled is not None else (
        None if filters.status is None else filters.status == "enabled")
    if enabled is not None:
        qs = qs.filter(enabled=enabled)
    if filters.breaker is not None:
        qs = qs.filter(breaker_status=filters.breaker)
    # one query for the page, one for the upstreams of all its schedules
    qs = qs.prefetch_related(Prefetch("depends_on", queryset=Schedule.objects.only("id", "name", "owner_id")))
    page = selectors.schedules_keyset_page(qs, after=filters.cursor, size=bounded_limit(filters.limit))
    visible = visible_team_ids(caller(request))
    return {"items": [schedule_out(s, visible) for s in page["schedules"]], "next": page["next"]}


@router.get("/schedules/{name}", response={200: ScheduleOut, **errors()}, summary="Get a schedule")
def get_schedule(request, name: str):
    schedule = schedule_by_name(name)
    require(request, "scheduler.view_schedule", schedule)
    return schedule_out(schedule, visible_team_ids(caller(request)))


@router.post("/schedules", response={201: ScheduleOut, **errors(409)}, summary="Create a schedule")
def create_schedule(request, payload: ScheduleCreate):
    """Saved through the schedule service: the admin's checks, each refusal naming its field."""
    user = caller(request)
    data = payload.model_dump(exclude_unset=True)
    reason = data.pop("reason", "")
    require(request, "scheduler.add_schedule")
    # no owner named: ETL_DEFAULT_TEAM, which the caller must be allowed to give schedules to like any team
    team = owner_team(data["owner"]) if data.get("owner") is not None else owner_for_create(None)
    authorize_owner_change(actor=user, schedule=Schedule(name=data["name"]), team=team)
    schedule = schedule_save(data=data, actor=user, reason=reason)
    saved = Schedule.objects.select_related("owner", "workload_class").get(pk=schedule.pk)
    return Status(201, schedule_out(saved, visible_team_ids(user)))


@router.patch("/schedules/{name}", response={200: ScheduleOut, **errors(409)}, summary="Change a schedule")
def update_schedule(request, name: str, payload: ScheduleUpdate):
    user = caller(request)
    schedule = schedule_by_name(name)
    require(request, "scheduler.change_schedule", schedule)
    data = payload.model_dump(exclude_unset=True)
    reason = data.pop("reason", "")
    if data.get("owner") is not None:
        authorize_owner_change(actor=user, schedule=schedule, team=owner_team(data["owner"]))
    saved = schedule_save(data=data, schedule=schedule, actor=user, reason=reason)
    return schedule_out(Schedule.objects.select_related("owner", "workload_class").get(pk=saved.pk),
                        visible_team_ids(user))


@router.delete("/schedules/{name}", response={204: None, 202: ScheduleDeleting, **errors(409)},
               summary="Delete a schedule")
def delete_schedule(request, name: str, reason: str = "", stop_runs: QueryBool = False):
    """204 when deleted. Unfinished runs refuse it (409 with their `run_ids`), unless `stop_runs=true`: they are
    stopped as a cancel does, and the schedule is deleted once none is left (202 until then)."""
    schedule = schedule_by_name(name)
    require(request, "scheduler.delete_schedule", schedule)
    if schedule_delete(schedule=schedule, actor=caller(request), reason=reason, stop_runs=stop_runs) == DELETED:
        return Status(204, None)
    return Status(202, {"status": "deleting", "stopping_runs": [pk for pk, _ in unfinished_runs(schedule.pk)]})


@router.post("/schedules/{name}/detach", response={200: ScheduleOut, **errors(409)},
             summary="Detach a schedule from its schedules file")
def detach_schedule(request, name: str, payload: ReasonIn):
    """Its fields may then be edited here and in the admin; audited (`schedule.detach`). 409 when no file
    manages it."""
    schedule = schedule_by_name(name)
    user = caller(request)
    require(request, "scheduler.change_schedule", schedule)
    schedule_detach(schedule=schedule, actor=user, reason=payload.reason)
    return schedule_out(Schedule.objects.select_related("owner", "workload_class").get(pk=schedule.pk),
                        visible_team_ids(user))
