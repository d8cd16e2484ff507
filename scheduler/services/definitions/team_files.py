"""The `teams:` section of a schedules file: teams declared as code, applied before connections and schedules.

```yaml
teams:
  - name: analytics
    description: Revenue and orders
    members: [olivia, sam]                 # user names; the whole list: a member not listed is removed
    alert_channels: ["mailto://oncall@example.com"]
```

An entry states the whole team, as a schedule entry does: a key left out takes its default (no description,
no members, no channels). Each entry is saved through `team_save` and `team_set_members` (authorized, audited,
channel URLs masked in the audit log and in what is printed; a masked URL keeps the stored one). An unknown
user, a bad name or channel refuses the whole file, naming the entry and the field. Teams the file does not
name are left alone: the file never deletes a team.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from scheduler.core.userdata import excerpt
from scheduler.models import Team
from scheduler.services.access.teams import (
    NAME_RE, PermissionRefused, team_save, team_set_members)
from scheduler.services.common.errors import ServiceError
from scheduler.services.integrations.channels import mask_url, split_channels

KEYS = ("name", "description", "members", "alert_channels")


def _label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    named = isinstance(name, str) and NAME_RE.match(name)
    return f"teams[{index}] ({name})" if named else f"teams[{index}]"


def _shown(team: Team) -> dict:
    return {"description": team.description,
            "members": sorted(team.members.values_list("username", flat=True)),
            "alert_channels": [mask_url(u) for u in split_channels(team.alert_channels, field="alert_channels")]}


def _members(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ServiceError("must be a list of user names", field="members")
    if len(set(value)) != len(value):
        raise ServiceError("names a user twice", field="members")
    known = set(get_user_model().objects.filter(username__in=value).values_list("username", flat=True))
    missing = [v for v in value if v not in known]
    if missing:
        raise ServiceError(f"unknown user '{excerpt(missing[0], 60)}'", field="members")
    return value


def _apply_one(entry: dict, *, actor: Any, reason: str) -> dict:
    unknown = sorted(str(k) for k in set(entry) - set(KEYS))
    if unknown:
        raise ServiceError(f"unknown key (allowed: {', '.join(KEYS)})", field=excerpt(unknown[0], 40))
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ServiceError("must be 1-100 letters, digits, '_' or '-', starting with a letter or digit", field="name")
    members = _members(entry.get("members"))
    channels = entry.get("alert_channels") or []
    if not isinstance(channels, list):
        raise ServiceError("must be a list of channel URLs", field="alert_channels")
    description = entry.get("description") or ""
    existing = Team.objects.filter(name=name).first()
    before = _shown(existing) if existing is not None else None
    team = team_save(data={"name": name, "description": description, "alert_channels": channels}, actor=actor,
                     team=existing, reason=reason)
    current = set(team.members.values_list("username", flat=True))
    team_set_members(team=team, add=sorted(set(members) - current), remove=sorted(current - set(members)),
                     actor=actor, reason=reason)
    after = _shown(team)
    if before is None:
        return {"action": "create", "name": name, "changes": after}
    diff = {k: {"old": before[k], "new": v} for k, v in after.items() if before[k] != v}
    return {"action": "update" if diff else "unchanged", "name": name, "changes": diff}


def teams_file_apply(entries: Any, *, actor: Any, reason: str) -> tuple[list[dict], list[tuple]]:
    """Save every team entry (in the caller's transaction); ([{action, name, changes}], [(entry, field, problem)]).

    Any problem: nothing of the section is saved and the problems name each entry and field."""
    if not isinstance(entries, list):
        return [], [("file", "teams", "must be a list of teams")]
    problems: list[tuple] = []
    changes: list[dict] = []
    seen: set[str] = set()
    with transaction.atomic():
        for index, entry in enumerate(entries):
            label = _label(index, entry)
            if not isinstance(entry, dict):
                problems.append((label, None, "must be a mapping of team fields"))
                continue
            if isinstance(entry.get("name"), str) and entry["name"] in seen:
                problems.append((label, "name", f"'{entry['name']}' is listed twice"))
                continue
            try:
                with transaction.atomic():
                    changes.append(_apply_one(entry, actor=actor, reason=reason))
            except PermissionRefused:
                raise  # the whole file is refused, as for a schedule of a team the actor may not edit
            except ServiceError as exc:
                problems += [(label, e.field, getattr(e, "problem", None) or str(e)) for e in exc.errors]
                continue
            seen.add(entry["name"])
        if problems:
            transaction.set_rollback(True)
    return ([] if problems else changes), problems


__all__ = ["teams_file_apply"]
