"""Events: stored once per (scope, topic, event id); each matching event schedule gets one run.

The HTTP endpoint, the `emit_event` command and Python callers all come
through `event_emit`, so validation, dedup, matching and the team rule are the
same everywhere. A sender speaks for a scope: a team's token for its team, a
user for the teams they belong to, an admin-wide token, a user acting for all
teams or a system actor for every team. It fires only that scope's schedules,
and its event ids are that scope's own, so one team cannot take ("squat")
another team's id and silence its events.
"""
from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.models import Event, Run, Schedule, Team, TriggerKind
from scheduler.permissions import acts_for_all, member_team_ids
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import ServiceError, check_storable, check_text
from scheduler.services.runs.queue import check_target_params, run_enqueue, validate_params
from scheduler.services.access.teams import authorize, resolve_user
from scheduler.triggers.builtin import validate_topic
from scheduler.triggers.filters import check_payload, matches

log = logging.getLogger(__name__)


def _clean_event_id(event_id: Any) -> str:
    if event_id is None:
        return uuid.uuid4().hex
    if isinstance(event_id, bool) or not isinstance(event_id, (str, int)):
        raise ServiceError(f"must be a string or a whole number, got {type(event_id).__name__}", field="id")
    text = str(event_id).strip()
    if not text or len(text) > 200 or any(ord(c) < 32 for c in text):
        raise ServiceError("must be 1-200 printable characters", field="id")
    return text


def _clean_payload(payload: Any) -> dict:
    payload = check_storable(validate_params(payload, field="payload"), field="payload")
    if len(json.dumps(payload)) > settings.ETL_WEBHOOK_MAX_BYTES:
        raise ServiceError(f"is larger than {settings.ETL_WEBHOOK_MAX_BYTES} bytes", field="payload")
    return payload


def subscribers(topic: str, team_ids: frozenset[int] | None = None) -> list[Schedule]:
    """Enabled event schedules subscribed to the topic (of those teams when given)."""
    qs = Schedule.objects.filter(enabled=True, trigger_kind=TriggerKind.EVENT, trigger_config__topic=topic)
    if team_ids is not None:
        qs = qs.filter(owner_id__in=team_ids)
    return list(qs.order_by("id"))


def event_scope(*, actor: Any, team: Team | None = None) -> tuple[str, frozenset[int] | None]:
    """(dedup scope, the teams whose schedules the sender may fire or None for all) of a sender."""
    if team is not None:
        return f"team:{team.pk}", frozenset({team.pk})
    user = resolve_user(actor)
    if user is None or acts_for_all(user):
        return "*", None
    ids = member_team_ids(user)
    if len(ids) == 1:
        return f"team:{next(iter(ids))}", ids
    return "teams:" + ",".join(str(i) for i in sorted(ids))[:90], ids


def _wants(schedule: Schedule, payload: dict, topic: str, event_id: str) -> bool:
    flt = (schedule.trigger_config or {}).get("filter") or ""
    try:
        return matches(flt, payload)
    except ConfigError:
        # saved before the filter rules tightened: never fire on a filter we cannot read
        log.warning("schedule %s has an unreadable filter %r; event %s#%s ignored for it", schedule.name, flt, topic,
                    event_id)
        return False


def event_emit(
    *, topic: str, payload: Any, event_id: Any = None, source: str, actor: Any, team: Team | None = None,
    now: datetime | None = None
) -> tuple[Event, list[Run]]:
    """Store an event and start one run per matching schedule of the sender's teams.

    `team` is the team a team's event token speaks for; without it the actor's
    teams decide (see `event_scope`). A repeated (scope, topic, event id) is the
    same event delivered twice: the stored event comes back (with
    `duplicate = True`) and no run is created.
    """
    authorize(actor=actor, perm="scheduler.trigger_schedule")
    try:
        topic = validate_topic(topic)
    except ConfigError as exc:
        raise ServiceError(exc.problem, field="topic") from None
    event_id = _clean_event_id(event_id)
    payload = _clean_payload(payload)
    now = now or timezone.now()
    who, _ = actor_name(actor)
    source = check_text(source or who, field="source")[:150]
    scope, team_ids = event_scope(actor=actor, team=team)
    existing = Event.objects.filter(scope=scope, topic=topic, event_id=event_id).first()
    if existing is not None:  # a repeat costs one lookup, never a filter evaluation
        existing.duplicate = True
        return existing, []
    user = resolve_user(actor)
    # Filters are user text with a bounded but real cost: judge them before the write transaction,
    # so a slow filter never holds the database's write lock while other events wait behind it.
    listening = [schedule for schedule in subscribers(topic, team_ids)
                 if user is None or user.has_perm("scheduler.trigger_schedule", schedule)]
    if any((schedule.trigger_config or {}).get("filter") for schedule in listening):
        try:  # a filter is given the payload: bounded before any filter sees it
            check_payload(payload)
        except ConfigError as exc:
            raise ServiceError(exc.problem, field=exc.field) from None
    matching = [schedule for schedule in listening if _wants(schedule, payload, topic, event_id)]
    for schedule in matching:  # the payload becomes the run's params: data its pipeline declared, or no event
        try:
            check_target_params(schedule, payload, field="payload")
        except ServiceError as exc:
            raise ServiceError(f"{exc.problem} (schedule '{schedule.name}' runs {schedule.target_id})",
                               field=exc.field) from None
    try:
        with transaction.atomic():
            event = Event.objects.create(topic=topic, event_id=event_id, payload=payload, source=source,
                                         received_at=now, scope=scope, team=team)
            runs: list[Run] = []
            for schedule in matching:
                run = run_enqueue(
                    schedule=schedule, trigger_kind=TriggerKind.EVENT, trigger_key=f"event:{event.pk}", params=payload,
                    logical_time=now, triggered_by=f"event {topic}#{event_id}"[:150], event=event, now=now,
                )
                if run is not None:
                    runs.append(run)
            Event.objects.filter(pk=event.pk).update(matched=len(runs))
            event.matched = len(runs)
            audit_record(actor=actor, action="event.receive", target=event,
                         after={"topic": topic, "event_id": event_id, "source": source, "scope": scope,
                                "runs": [r.pk for r in runs]},
                         at=now)
    except IntegrityError:
        existing = Event.objects.filter(scope=scope, topic=topic, event_id=event_id).first()
        if existing is None:  # the integrity error was something else
            raise
        existing.duplicate = True
        return existing, []
    event.duplicate = False
    return event, runs
