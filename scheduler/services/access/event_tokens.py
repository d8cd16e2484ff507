"""Event tokens: who may POST /api/events/<topic>, and for which team.

A token reads `evt_<key_id>_<secret>` and belongs to one team (it fires only
that team's schedules, and its event ids are that team's namespace) or is
admin-wide, explicitly (`all_teams`). Only a SHA-256 of the secret is stored.
Tokens listed in the ETL_EVENT_TOKENS setting predate teams: they stay valid
and are admin-wide (docs/security.md, "Event tokens").
"""
from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.models import EventToken, Team
from scheduler.permissions import acts_for_all, member_team_ids
from scheduler.services.common.audit import audit_record, audit_refusal
from scheduler.services.common.errors import NotFound, ServiceError, check_text
from scheduler.services.access.teams import PermissionRefused, resolve_user
from scheduler.services.access.tokens import secret_hash

PREFIX = "evt"
TOKEN_RE = re.compile(r"^evt_([a-z0-9]{8,16})_([A-Za-z0-9_-]{20,100})$")
LAST_USED_EVERY = timedelta(minutes=1)
MAX_TOKEN_LENGTH = 200


class EventTokenRefused(ServiceError):
    """Unknown or revoked (a 401 on the event endpoint)."""


@dataclass(frozen=True)
class EventCaller:
    """Who sent an event: the actor for the audit log, and the team it speaks for (None: every team)."""

    actor: str
    team: Team | None
    label: str


@dataclass(frozen=True)
class CreatedEventToken:
    token: EventToken
    plaintext: str  # shown once, never stored



def _refuse(user, message: str, *, team: Team | None) -> None:
    audit_refusal(user=user, perm="scheduler.event_token", target=team, reason=message)
    raise PermissionRefused(message)


def event_token_create(*, name: str, team: Team | None, all_teams: bool = False, actor: Any,
                       now: datetime | None = None) -> CreatedEventToken:
    """A new token of `team` (or admin-wide with all_teams=True and no team); the plaintext is in the result only.

    A user may make a token only for a team they belong to; an admin-wide one needs acting for every team.
    """
    now = now or timezone.now()
    name = check_text(name, field="name", max_length=100).strip()
    if not name:
        raise ServiceError("a name is required (the system that sends the events)", field="name")
    if (team is None) == (not all_teams):
        raise ServiceError("give exactly one of a team or all teams (admin-wide)", field="team")
    user = resolve_user(actor)
    if user is not None and not acts_for_all(user):
        if team is None:
            _refuse(user, f"permission denied: {user.get_username()} may not create an admin-wide event token "
                          "(it needs acting for every team)", team=None)
        elif team.pk not in member_team_ids(user):
            _refuse(user, f"permission denied: {user.get_username()} may not create an event token of team "
                          f"'{team.name}': {user.get_username()} is not a member", team=team)
    secret = secrets.token_urlsafe(32)
    with transaction.atomic():
        key_id = secrets.token_hex(5)
        while EventToken.objects.filter(key_id=key_id).exists():
            key_id = secrets.token_hex(5)
        token = EventToken.objects.create(name=name, team=team, all_teams=team is None, key_id=key_id,
                                          secret_hash=secret_hash(secret), created_at=now)
        audit_record(actor=actor, action="event_token.create", target=team if team is not None else token,
                     after={"name": name, "key_id": key_id, "team": team.name if team else None,
                            "all_teams": team is None}, at=now)
    return CreatedEventToken(token=token, plaintext=f"{PREFIX}_{key_id}_{secret}")


def event_token_revoke(*, token: EventToken, actor: Any, reason: str = "", now: datetime | None = None) -> bool:
    """Revoke `token`; False when it was revoked already."""
    now = now or timezone.now()
    reason = check_text(reason, field="reason", max_length=500)
    user = resolve_user(actor)
    if user is not None and not acts_for_all(user) and (token.team_id is None
                                                        or token.team_id not in member_team_ids(user)):
        scope = f"of team '{token.team.name}'" if token.team_id else "that is admin-wide"
        _refuse(user, f"permission denied: {user.get_username()} may not revoke event token {token.key_id} "
                      f"{scope}", team=token.team)
    with transaction.atomic():
        changed = EventToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        if changed:
            token.revoked_at = now
            audit_record(actor=actor, action="event_token.revoke", target=token.team or token,
                         after={"key_id": token.key_id, "team": token.team.name if token.team_id else None},
                         reason=reason, at=now)
    return bool(changed)


def event_token_get(key_id: Any) -> EventToken:
    found = (EventToken.objects.select_related("team").filter(key_id=key_id).first()
             if isinstance(key_id, str) and "\x00" not in key_id else None)
    if found is None:
        raise NotFound(f"no event token with key id {key_id!r}", field="key_id")
    return found


def event_token_authenticate(raw: str, *, now: datetime | None = None) -> EventCaller:
    """The caller `raw` stands for; EventTokenRefused says why not."""
    now = now or timezone.now()
    match = TOKEN_RE.match(raw) if len(raw) <= MAX_TOKEN_LENGTH else None
    if match is None:
        # a token of the ETL_EVENT_TOKENS setting: compared with every one, in constant time
        hits = [hmac.compare_digest(raw.encode(), known.encode()) for known in settings.ETL_EVENT_TOKENS if known]
        if any(hits):
            return EventCaller(actor="api:token", team=None, label="settings token (all teams)")
        raise EventTokenRefused("unknown token", field="Authorization")
    token = EventToken.objects.select_related("team").filter(key_id=match.group(1)).first()
    expected = token.secret_hash if token is not None else secret_hash("")
    if not hmac.compare_digest(expected, secret_hash(match.group(2))) or token is None:
        raise EventTokenRefused("unknown token", field="Authorization")
    if token.revoked_at is not None:
        raise EventTokenRefused(f"event token {token.key_id} was revoked", field="Authorization")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
        EventToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return EventCaller(actor=f"api:event-token:{token.key_id}", team=token.team,
                       label=f"event token {token.key_id} ({token.scope_label})")
