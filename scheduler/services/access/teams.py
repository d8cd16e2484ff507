"""Teams: who owns a schedule, who may act on it, who hears about it.

Team changes (create, update, delete, members, secret) are services like any
other: keyword-only, atomic, audited. `authorize` is the one check every entry
point (pages, admin, commands, SchedulerHost) asks before acting on a
schedule, a run or a backfill; a refusal is audited and raised as
`PermissionRefused`.
"""
from __future__ import annotations

import re
import secrets
from typing import Any, Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from scheduler.models import Schedule, Team
from scheduler.permissions import acts_for_all, member_team_ids, owner_id_of, refusal_message
from scheduler.services.common.audit import audit_record, audit_refusal
from scheduler.services.integrations.channels import (
    channels_text,
    check_channels,
    mask_url,
    split_channels,
    unmask_channels,
    uses_signing,
)
from scheduler.services.common.errors import NotFound, ServiceError, check_text
from scheduler.core.userdata import storable
from scheduler.permissions import may_see

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
EDITABLE = {"name", "description", "alert_channels"}


class PermissionRefused(ServiceError):
    """The actor may not do this to this object (a 403 on the web, exit 2 in a shell)."""


class ObjectHidden(PermissionRefused):
    """With viewing scoped, the object is another team's: the pages and the API answer 404, as for a missing one,
    so that names and ids cannot be enumerated (the refusal is still audited, under that team)."""


# --- actors and the one check -----------------------------------------------

def resolve_user(actor: Any):
    """The Django user an actor stands for, or None for a system actor (a loop, a shell without --actor).

    A user object is itself; "user:NAME" or "NAME" is the user of that name when one exists. A name
    that is no user (cli, api:etl-bot, governance) is a system actor, trusted as the shell is.
    """
    if actor is None:
        return None
    if hasattr(actor, "get_username"):
        return actor
    if isinstance(actor, str):
        check_text(actor, field="actor")  # NUL or a lone surrogate (an undecodable --actor): no name holds one
    if not isinstance(actor, str) or actor.startswith("api:"):
        return None
    name = actor[5:] if actor.startswith("user:") else actor
    if not name:
        return None
    return get_user_model().objects.filter(username=name).first()


def authorize(*, actor: Any, perm: str, obj: Any = None) -> None:
    """Refuse (audited) unless `actor` holds `perm` on `obj`; system actors pass."""
    user = resolve_user(actor)
    if user is None:
        return
    allowed = user.has_perm(perm) and (obj is None or user.has_perm(perm, obj))
    if allowed:
        return
    message = refusal_message(user, perm, obj)
    audit_refusal(user=user, perm=perm, target=obj if obj is not None and obj.pk else None, reason=message)
    if obj is not None and obj.pk and not may_see(user, obj):
        raise ObjectHidden(f"unknown {obj._meta.model_name} {obj.pk}")
    raise PermissionRefused(message)


def authorize_owner_change(*, actor: Any, schedule: Schedule, team: Team) -> None:
    """Giving a schedule to a team: edit rights on it, and (unless acting for all teams) membership of `team`."""
    if schedule.pk:
        authorize(actor=actor, perm="scheduler.change_schedule", obj=schedule)
    user = resolve_user(actor)
    if user is None or acts_for_all(user) or team.pk in member_team_ids(user):
        return
    message = (f"permission denied: {user.get_username()} may not give schedule '{schedule.name}' to team "
               f"'{team.name}': {user.get_username()} is not a member")
    audit_refusal(user=user, perm="scheduler.change_schedule", target=schedule if schedule.pk else None,
                  after={"owner": team.name}, reason=message)
    raise PermissionRefused(message)


def authorize_create(*, actor: Any, name: str, team: Team) -> None:
    """Creating schedule `name` owned by `team`: the add permission, and (unless acting for all teams) membership."""
    user = resolve_user(actor)
    if user is not None and not user.has_perm("scheduler.add_schedule"):
        message = (f"permission denied: {user.get_username()} may not create schedule '{name}' of team "
                   f"'{team.name}': {refusal_message(user, 'scheduler.add_schedule', None)[19:]}")
        audit_refusal(user=user, perm="scheduler.add_schedule", target=None,
                      after={"schedule": name, "owner": team.name}, reason=message)
        raise PermissionRefused(message)
    authorize_owner_change(actor=actor, schedule=Schedule(name=name), team=team)


def owner_for_create(owner: Any) -> Team:
    """The team a new schedule goes to: the one named, else ETL_DEFAULT_TEAM (a user must be allowed to give to it)."""
    return team_get(owner) if owner is not None else Team.objects.get(pk=Team.default_team_id())


def visible_team_ids(user) -> frozenset[int] | None:
    """The teams whose objects `user` may see; None for every team."""
    if getattr(settings, "ETL_TEAMS_VIEW_ALL", True) or acts_for_all(user):
        return None
    return member_team_ids(user)


def actable_team_ids(user) -> frozenset[int] | None:
    """The teams whose schedules `user` may act on (given the group's permission); None for every team."""
    return None if acts_for_all(user) else member_team_ids(user)


# --- alerts ------------------------------------------------------------------

def team_alert_channels(schedule: Schedule | None) -> list[dict]:
    """The owning team's channels for an alert about `schedule` (empty when it has none)."""
    if schedule is None or schedule.owner_id is None:
        return []
    team = Team.objects.filter(pk=schedule.owner_id).only("alert_channels").first()
    if team is None:
        return []
    # the secret stays in the team row; delivery looks it up by team (team_webhook_secret)
    return [{"url": url, "source": "team", "team": team.pk}
            for url in split_channels(team.alert_channels, field="alert_channels")]


def team_webhook_secret(channel: dict) -> str | None:
    """The secret that signs a webhook channel of a team; None for the global channels."""
    team_id = channel.get("team")
    if not team_id:
        return None
    return Team.objects.filter(pk=team_id).values_list("alert_webhook_secret", flat=True).first() or None


# --- team services -------------------------------------------------------------

def team_get(name_or_id: Any, *, visible: frozenset[int] | None = None) -> Team:
    """The team of that name or id; with `visible` (viewing scoped) only those, and the error names no other."""
    if isinstance(name_or_id, Team):
        return name_or_id
    found = None
    if isinstance(name_or_id, int) or (isinstance(name_or_id, str) and name_or_id.isdigit()):
        found = Team.objects.filter(pk=int(name_or_id)).first()
    if isinstance(name_or_id, str):
        check_text(name_or_id, field="team")
    if found is None and isinstance(name_or_id, str):
        found = Team.objects.filter(name=name_or_id).first()
    if found is not None and visible is not None and found.pk not in visible:
        found = None
    if found is None:
        teams = Team.objects.all() if visible is None else Team.objects.filter(pk__in=visible)
        known = ", ".join(teams.order_by("name").values_list("name", flat=True)[:20]) or "none"
        raise NotFound(f"unknown team '{name_or_id}' (known: {known})", field="team")
    return found


def validate_team(team: Team) -> None:
    """Check every field of a team; raise ServiceError naming the field."""
    if isinstance(team.alert_channels, (list, tuple)):
        team.alert_channels = channels_text(split_channels(team.alert_channels, field="alert_channels"))
    for field in ("name", "description", "alert_channels"):
        value = getattr(team, field)
        if not isinstance(value, str):
            raise ServiceError(f"must be text, got {type(value).__name__}", field=field)
        check_text(value, field=field, max_length=Team._meta.get_field(field).max_length)
    if not NAME_RE.match(team.name):
        raise ServiceError("must be 1-100 letters, digits, '_' or '-', starting with a letter or digit", field="name")
    team.alert_channels = channels_text(check_channels(team.alert_channels, field="alert_channels", owner_id=team.pk,
                                                       who=f"team '{team.name}'"))


def _snapshot(team: Team) -> dict:
    return {"name": team.name, "description": team.description,
            "alert_channels": split_channels(team.alert_channels, field="alert_channels")}


def _masked(snapshot: dict) -> dict:
    """What the audit log keeps: channel URLs may carry tokens and passwords, so they are masked."""
    if "alert_channels" in snapshot:
        return {**snapshot, "alert_channels": [mask_url(url) for url in snapshot["alert_channels"]]}
    return snapshot


def team_save(*, data: dict, actor: Any, team: Team | None = None, reason: str = "") -> Team:
    """Create (team=None) or update a team from a dict of field values."""
    unknown = sorted(set(data) - EDITABLE)
    if unknown:
        raise ServiceError("unknown field", field=unknown[0])
    authorize(actor=actor, perm="scheduler.change_team" if team else "scheduler.add_team")
    creating = team is None
    with transaction.atomic():
        if creating:
            team = Team(**{"description": "", "alert_channels": "", **data})
            before = None
        else:
            team = Team.objects.select_for_update().get(pk=team.pk)
            before = _snapshot(team)
            if "alert_channels" in data:  # what a page showed masked keeps the stored secret
                data = {**data, "alert_channels": unmask_channels(
                    split_channels(data["alert_channels"], field="alert_channels"), before["alert_channels"])}
            for key, value in data.items():
                setattr(team, key, value)
        if not isinstance(team.name, str):
            raise ServiceError(f"must be text, got {type(team.name).__name__}", field="name")
        validate_team(team)
        if Team.objects.filter(name=team.name).exclude(pk=team.pk).exists():
            raise ServiceError(f"a team named '{team.name}' already exists", field="name")
        if uses_signing(split_channels(team.alert_channels, field="alert_channels")) and not team.alert_webhook_secret:
            team.alert_webhook_secret = secrets.token_urlsafe(32)
        team.save()
        after = _snapshot(team)
        changed = {k: v for k, v in after.items() if before is None or before.get(k) != v}
        if creating or changed:
            audit_record(actor=actor, action="team.create" if creating else "team.update", target=team,
                         before=None if before is None else _masked({k: before[k] for k in changed}),
                         after=_masked(changed), reason=reason)
    return team


def team_delete(*, team: Team, actor: Any, reason: str = "") -> None:
    """Delete a team that owns no schedule (move them first) and is not the default team."""
    authorize(actor=actor, perm="scheduler.delete_team")
    with transaction.atomic():
        if team.name == settings.ETL_DEFAULT_TEAM:
            raise ServiceError(f"'{team.name}' is the default team (ETL_DEFAULT_TEAM) and cannot be deleted",
                               field="team")
        owned = list(Schedule.objects.filter(owner=team).order_by("name").values_list("name", flat=True)[:6])
        if owned:
            more = ", ..." if len(owned) > 5 else ""
            raise ServiceError(f"team '{team.name}' still owns schedules ({', '.join(owned[:5])}{more}); "
                               "give them another owner first", field="team")
        audit_record(actor=actor, action="team.delete", target=team, before=_masked(_snapshot(team)), reason=reason)
        team.delete()


def _user(item: Any):
    if hasattr(item, "get_username"):
        return item
    User = get_user_model()
    if isinstance(item, str) and storable(item):
        found = User.objects.filter(username=item).first()
        if found is not None:
            return found
    raise NotFound(f"unknown user {item!r}", field="user")


def team_set_members(*, team: Team, add: Iterable[Any] = (), remove: Iterable[Any] = (), actor: Any,
                     reason: str = "") -> list[str]:
    """Add and remove members; returns the member names after the change."""
    authorize(actor=actor, perm="scheduler.change_team")
    to_add, to_remove = [_user(u) for u in add], [_user(u) for u in remove]
    with transaction.atomic():
        before = sorted(team.members.values_list("username", flat=True))
        team.members.add(*to_add)
        team.members.remove(*to_remove)
        after = sorted(team.members.values_list("username", flat=True))
        if before != after:
            audit_record(actor=actor, action="team.members", target=team, before={"members": before},
                         after={"members": after}, reason=reason)
    for user in to_add + to_remove:
        user.__dict__.pop("_etl_team_ids", None)
    return after


def team_rotate_secret(*, team: Team, actor: Any, reason: str = "") -> str:
    """A new secret for the team's alert webhook; the receiver must be told the new one."""
    authorize(actor=actor, perm="scheduler.change_team")
    with transaction.atomic():
        secret = secrets.token_urlsafe(32)
        Team.objects.filter(pk=team.pk).update(alert_webhook_secret=secret)
        team.alert_webhook_secret = secret
        audit_record(actor=actor, action="team.rotate_secret", target=team, reason=reason)
    return secret


def team_of(obj: Any) -> int | None:
    return owner_id_of(obj)
