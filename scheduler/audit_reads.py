"""The audit report: the filtered log, what a scoped viewer may read of it, and its counts."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate

from scheduler.models import AuditEntry, Schedule, Team


def audit_filtered(filters: dict, *, team_ids: frozenset[int] | None = None, own_actor: str | None = None):
    """Entries matching `filters`; with `team_ids` (viewing scoped) only those teams' entries and the reader's own."""
    qs = AuditEntry.objects.all()
    if team_ids is not None:
        qs = qs.filter(Q(team_id__in=team_ids) | Q(team_id__isnull=True, actor=own_actor or ""))
    if filters.get("team"):
        qs = qs.filter(team_id=filters["team"].pk)
    if filters.get("actor"):
        qs = qs.filter(actor=filters["actor"])
    if filters.get("action"):
        qs = qs.filter(action__startswith=filters["action"])
    if filters.get("target"):
        target = filters["target"]
        if ":" in target:
            kind, _, ident = target.partition(":")
            qs = qs.filter(target_type=kind, target_id=ident)
        else:
            qs = qs.filter(target_repr__icontains=target) | qs.filter(target_id=target)
    if filters.get("since"):
        qs = qs.filter(at__gte=filters["since"])
    if filters.get("until"):
        qs = qs.filter(at__lt=filters["until"])
    return qs


def audit_redactor(team_ids: frozenset[int] | None) -> Callable[[AuditEntry], AuditEntry]:
    """For a reader who may see only `team_ids`: hide other teams' schedule and team names inside an entry.

    An entry of one's own team may still name another team's schedule (an upstream in `depends_on`, a refusal's
    reason); with viewing scoped those names read "(another team's schedule)" / "(another team)". The entry is
    changed in memory only (the log is append-only). None for `team_ids`: every entry as it is.
    """
    if team_ids is None:
        return lambda entry: entry
    names = {n: "(another team's schedule)" for n in
             Schedule.objects.exclude(owner_id__in=team_ids).values_list("name", flat=True)}
    names.update({n: "(another team)" for n in Team.objects.exclude(pk__in=team_ids).values_list("name", flat=True)})
    if not names:
        return lambda entry: entry
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    pattern = re.compile(r"(?<![\w-])(" + alternatives + r")(?![\w-])")

    def hide(value):
        if isinstance(value, str):
            return pattern.sub(lambda m: names[m.group(1)], value)
        if isinstance(value, list):
            return [hide(v) for v in value]
        if isinstance(value, dict):
            return {hide(k): hide(v) for k, v in value.items()}
        return value

    def redact(entry: AuditEntry) -> AuditEntry:
        for field in ("target_repr", "reason", "before", "after"):
            setattr(entry, field, hide(getattr(entry, field)))
        return entry

    return redact


AUDIT_COUNT_DAYS = 31


def audit_counts(qs, *, now: datetime, until: datetime | None = None) -> dict:
    """Entries by action, actor and day over the AUDIT_COUNT_DAYS up to `until` (else now), whatever the filter's
    own range: the counts read a bounded range of the `at` index, not the whole log (issue 25)."""
    end = min(until or now, now)
    since = end - timedelta(days=AUDIT_COUNT_DAYS)
    qs = qs.filter(at__gte=since).order_by()
    return {
        "since": since,
        "until": end,
        "days": AUDIT_COUNT_DAYS,
        "by_action": list(qs.values("action").annotate(n=Count("id")).order_by("-n", "action")[:30]),
        "by_actor": list(qs.values("actor").annotate(n=Count("id")).order_by("-n", "actor")[:30]),
        "by_day": list(qs.annotate(day=TruncDate("at")).values("day").annotate(n=Count("id")).order_by("-day")[:31]),
    }
