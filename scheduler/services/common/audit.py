from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from datetime import datetime
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import F
from django.utils import timezone

from scheduler.models import ActorKind, AuditEntry, RefusalCount, Run, Team
from scheduler.models.audit import audit_counted
from scheduler.permissions import owner_id_of
from scheduler.services.common import bulk
from scheduler.core.userdata import storable
from scheduler.services.common.errors import check_text


# The door a request came through when it is not the user's own session ("API token k3x9"): the API's
# authentication sets it for the request, so every service's audit entry says so without being told.
_via: contextvars.ContextVar[str] = contextvars.ContextVar("audit_via", default="")


def audit_via() -> str:
    return _via.get()


def audit_via_set(text: str) -> contextvars.Token:
    """Name the door for what follows in this context; pass the result to `audit_via_reset`."""
    return _via.set(check_text(text, field="via", max_length=100))


def audit_via_reset(token: contextvars.Token) -> None:
    _via.reset(token)


@contextmanager
def audit_via_context(text: str) -> Iterator[None]:
    token = audit_via_set(text)
    try:
        yield
    finally:
        audit_via_reset(token)


def actor_name(actor: Any) -> tuple[str, str]:
    """(name, kind) for a user, "user:NAME", "api:NAME", a system component name, or None."""
    if actor is None:
        return "system", ActorKind.SYSTEM
    if isinstance(actor, str):
        check_text(actor, field="actor")
        if actor.startswith("user:"):
            return actor[5:], ActorKind.USER
        if actor.startswith("api:"):
            return actor, ActorKind.API
        return actor, ActorKind.SYSTEM
    username = getattr(actor, "get_username", None)
    if username is not None:
        return username() or "anonymous", ActorKind.USER
    return str(actor), ActorKind.SYSTEM


def audit_build(
    *,
    actor: Any,
    action: str,
    target: models.Model | tuple[str, Any] | None,
    before: Any = None,
    after: Any = None,
    reason: str = "",
    at=None,
) -> AuditEntry:
    """One unsaved audit entry (audit_record saves it; audit_record_many saves many at once)."""
    name, kind = actor_name(actor)
    if reason and not storable(reason.replace("\x00", "")):
        # a lone surrogate can be written by neither database (no UTF-8 holds one): refused, named, at the last door
        # before the row, for a door that forgot (NUL is left as it was: SQLite stores it)
        check_text(reason.replace("\x00", ""), field="reason")
    team_id = target.pk if isinstance(target, Team) else owner_id_of(target)
    if isinstance(target, models.Model):
        target_type = target._meta.model_name
        target_id = str(target.pk)
        target_repr = str(target)[:200]
    elif target is None:
        target_type, target_id, target_repr = "", "", ""
    else:
        target_type, target_id = target[0], str(target[1])
        target_repr = target_id
    # an entry about a run names the code it ran (issue 32); read from the row as loaded, never fetched for this
    code = target.__dict__.get("code_version") if isinstance(target, Run) else None
    if code and (after is None or isinstance(after, dict)) and "code_version" not in (after or {}):
        after = {**(after or {}), "code_version": code}
    return AuditEntry(
        at=at or timezone.now(),
        actor=name[:150],
        actor_kind=kind,
        action=action,
        target_type=target_type,
        target_id=target_id[:64],
        target_repr=target_repr,
        before=before,
        after=after,
        reason=(reason or "")[:500],
        team_id=team_id,
        via=_via.get(),
    )


def audit_record(
    *,
    actor: Any,
    action: str,
    target: models.Model | tuple[str, Any] | None,
    before: Any = None,
    after: Any = None,
    reason: str = "",
    at=None,
) -> AuditEntry:
    """Append one audit entry. Call inside the transaction of the change it records."""
    entry = audit_build(actor=actor, action=action, target=target, before=before, after=after, reason=reason, at=at)
    entry.save(force_insert=True)
    return entry


def audit_record_many(entries: list[AuditEntry]) -> None:
    """Append many built entries in one INSERT (a batch transition), and their hours' counts (AuditCount).
    Call inside its transaction."""
    with transaction.atomic(savepoint=False):
        bulk.insert(AuditEntry, entries)
        audit_counted(entries)


def audit_refusal(*, user: Any, perm: str, target: models.Model | None, reason: str, after: dict | None = None,
                  now: datetime | None = None) -> AuditEntry | None:
    """Record a permission refusal: an audit entry for the first of its window, a count for the repeats.

    One entry per (actor, permission, object, ETL_AUDIT_REFUSAL_WINDOW_SECONDS window) keeps every refusal on
    the record (the entry, and the `RefusalCount` row with how many) while a script asking again and again
    writes one row, not one per request. Returns the entry when one was written.
    """
    now = now or timezone.now()
    name, _ = actor_name(user)
    seconds = settings.ETL_AUDIT_REFUSAL_WINDOW_SECONDS
    window_start = datetime.fromtimestamp(int(now.timestamp()) // seconds * seconds, tz=dt_timezone.utc)
    key = {"actor": name[:150], "permission": perm[:100], "window_start": window_start,
           "target": (f"{target._meta.model_name}:{target.pk}" if target is not None else reason)[:140]}
    if RefusalCount.objects.filter(**key).update(count=F("count") + 1, last_at=now):
        return None
    entry = audit_record(actor=user, action="permission.denied", target=target, after={"permission": perm,
                         **(after or {})}, reason=reason, at=now)
    try:
        with transaction.atomic():
            RefusalCount.objects.create(**key, first_at=now, last_at=now, audit_entry_id=entry.pk)
    except IntegrityError:  # a concurrent refusal made the window's row first: count this one there
        RefusalCount.objects.filter(**key).update(count=F("count") + 1, last_at=now)
    return entry
