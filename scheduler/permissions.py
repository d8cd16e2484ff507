"""Who may do what to which schedule: the groups' permissions combined with team membership.

The groups (viewer / operator / admin) grant model permissions as before; the
rules below (django-rules) add the object check. An object permission on a
schedule, a run, a backfill or a backfill window holds when the user has the
model permission AND either acts for every team (`scheduler.act_for_all_teams`,
the admin group and superusers) or belongs to the team that owns the schedule.
Reading another team's objects is allowed while ETL_TEAMS_VIEW_ALL is on.

`request.user.has_perm(perm)` (no object) still answers the model question;
`request.user.has_perm(perm, obj)` answers the team question. Every entry point
asks the second one through `scheduler.services.access.teams.authorize` or the views'
`action` / `page` decorators.
"""
from __future__ import annotations

from typing import Any

import rules
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.db import models

from scheduler.models import BackfillWindow, Schedule

ALL_TEAMS = "scheduler.act_for_all_teams"
# Acting on a schedule (or its runs and backfills) needs membership of its team.
SCOPED_ACTIONS = (
    "scheduler.trigger_schedule",
    "scheduler.toggle_schedule",
    "scheduler.reset_breaker",
    "scheduler.manage_watermark",
    "scheduler.cancel_run",
    "scheduler.manage_backfill",
    "scheduler.change_schedule",
    "scheduler.delete_schedule",
    "scheduler.add_failureack",
)
# Reading them needs membership too unless ETL_TEAMS_VIEW_ALL is on.
SCOPED_VIEWS = (
    "scheduler.view_schedule",
    "scheduler.view_run",
    "scheduler.view_backfill",
    "scheduler.view_backfillwindow",
    "scheduler.view_watermarkstate",
)
VERBS = {
    "scheduler.trigger_schedule": "trigger",
    "scheduler.toggle_schedule": "pause or resume",
    "scheduler.reset_breaker": "reset the breaker of",
    "scheduler.manage_watermark": "change the watermark of",
    "scheduler.cancel_run": "cancel runs of",
    "scheduler.manage_backfill": "manage backfills of",
    "scheduler.change_schedule": "edit",
    "scheduler.delete_schedule": "delete",
    "scheduler.add_failureack": "acknowledge the failures of",
}

_model_backend = ModelBackend()


def owner_id_of(obj: Any) -> int | None:
    """The owning team's id of a schedule or of what belongs to one (run, backfill, window, watermark)."""
    if isinstance(obj, Schedule):
        return obj.owner_id
    if isinstance(obj, BackfillWindow):
        obj = obj.backfill
    if isinstance(obj, models.Model) and hasattr(obj, "schedule_id"):  # a run, a backfill, a watermark ...
        cached = obj._state.fields_cache.get("schedule")
        if cached is not None:
            return cached.owner_id
        return Schedule.objects.filter(pk=obj.schedule_id).values_list("owner_id", flat=True).first()
    return None


def schedule_of(obj: Any) -> Schedule | None:
    if isinstance(obj, Schedule):
        return obj
    if isinstance(obj, BackfillWindow):
        obj = obj.backfill
    if isinstance(obj, models.Model) and hasattr(obj, "schedule_id"):
        return obj.schedule
    return None


def member_team_ids(user) -> frozenset[int]:
    """The teams a user belongs to; cached on the user object for the request."""
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_etl_team_ids", None)
    if cached is None:
        cached = frozenset(user.etl_teams.values_list("pk", flat=True))
        user._etl_team_ids = cached
    return cached


def acts_for_all(user) -> bool:
    return bool(user is not None and getattr(user, "is_active", False) and user.has_perm(ALL_TEAMS))


@rules.predicate
def is_object(user, obj) -> bool:
    return obj is not None and owner_id_of(obj) is not None


@rules.predicate
def acts_for_all_teams(user) -> bool:
    return acts_for_all(user)


@rules.predicate
def is_team_member(user, obj) -> bool:
    return owner_id_of(obj) in member_team_ids(user)


@rules.predicate
def views_all_teams() -> bool:
    return bool(getattr(settings, "ETL_TEAMS_VIEW_ALL", True))


def has_model_perm(perm: str):
    # ModelBackend directly: asking user.has_perm(perm) here would come back to this rule
    @rules.predicate(name=f"has {perm}")
    def check(user) -> bool:
        return _model_backend.has_perm(user, perm)

    return check


for _perm in SCOPED_ACTIONS:
    rules.add_perm(_perm, is_object & has_model_perm(_perm) & (acts_for_all_teams | is_team_member))
for _perm in SCOPED_VIEWS:
    rules.add_perm(_perm, is_object & has_model_perm(_perm) & (views_all_teams | acts_for_all_teams | is_team_member))


def refusal_message(user, perm: str, obj: Any) -> str:
    """Why `user` may not `perm` on `obj`, in words an operator can act on."""
    name = user.get_username() if getattr(user, "is_authenticated", False) else "an anonymous user"
    if not _model_backend.has_perm(user, perm) and not getattr(user, "is_superuser", False):
        return f"permission denied: {name} lacks the permission {perm} (ask an admin for the operator group)"
    schedule = schedule_of(obj)
    if schedule is None:
        return f"permission denied: {name} may not use {perm}"
    verb = VERBS.get(perm, "see" if perm in SCOPED_VIEWS else f"use {perm} on")
    if not (views_all_teams() or acts_for_all(user) or schedule.owner_id in member_team_ids(user)):
        # viewing is scoped: the refusal itself must not show another team's names (issue 22)
        return (f"permission denied: {name} may not {verb} schedule #{schedule.pk}: it belongs to another team "
                f"and {name} is not a member")
    return (
        f"permission denied: {name} may not {verb} schedule '{schedule.name}': it belongs to team "
        f"'{schedule.owner.name}' and {name} is not a member"
    )
