"""What every router needs: the caller, the one authorization check, lookups, errors declared for the schema."""
from __future__ import annotations

from datetime import datetime, timezone

from scheduler.api.schemas import Problem
from scheduler.models import Backfill, Run, Schedule
from scheduler.services.common.errors import NotFound, ServiceError
from scheduler.services.access.teams import authorize, team_get, visible_team_ids

MAX_LIMIT = 200
# what any operation may answer besides its success; declared so the schema tells the truth
ERRORS = {400: Problem, 401: Problem, 403: Problem, 404: Problem, 422: Problem, 500: Problem}


def errors(*codes: int) -> dict:
    return {code: Problem for code in codes} | ERRORS


def caller(request):
    """The user the request acts as (the token's user, or the session's)."""
    return request.auth


def require(request, perm: str, obj=None) -> None:
    """The one check (`teams.authorize`): the model permission, and on `obj`'s team when given. 403 when refused."""
    authorize(actor=caller(request), perm=perm, obj=None)
    if obj is not None:
        authorize(actor=caller(request), perm=perm, obj=obj)


def _clean(value: str, field: str) -> str:
    if "\x00" in value:
        raise NotFound("must not contain the NUL character", field=field)
    return value


def schedule_by_name(name: str) -> Schedule:
    found = Schedule.objects.select_related("workload_class", "owner").filter(name=_clean(name, "name")).first()
    if found is None:
        raise NotFound(f"no schedule named '{name}'", field="name")
    return found


def run_by_id(run_id: int) -> Run:
    found = Run.objects.select_related("schedule", "workload_class").filter(pk=run_id).first()
    if found is None:
        raise NotFound(f"no run {run_id}", field="run_id")
    return found


def backfill_by_id(backfill_id: int) -> Backfill:
    found = Backfill.objects.select_related("schedule").filter(pk=backfill_id).first()
    if found is None:
        raise NotFound(f"no backfill {backfill_id}", field="backfill_id")
    return found


def team_ids_for(request, team: str | None) -> frozenset[int] | None:
    """The teams a list may show: what the caller may see, narrowed to `team` when given."""
    visible = visible_team_ids(caller(request))
    if not team:
        return visible
    found = team_get(_clean(team, "team"), visible=visible)
    return frozenset({found.pk})


def bounded_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ServiceError(f"must be from 1 to {MAX_LIMIT}, got {limit}", field="limit")
    return limit


def aware(value: datetime | None, field: str) -> datetime | None:
    """A naive datetime is read as UTC; out-of-range offsets are refused."""
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ServiceError("is out of range", field=field) from None


def cursor_of(cursor: int | None) -> int | None:
    if cursor is not None and cursor < 1:
        raise ServiceError("must be a positive id", field="cursor")
    return cursor
