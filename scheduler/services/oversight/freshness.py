"""Freshness objectives: how old each schedule's data is, checked by the governance loop.

A schedule with `freshness_max_age_seconds` has an objective on the age of
its last live success, or on its datetime watermark's lag behind now
(`freshness_measure`). When the age passes the objective, governance stores
the breach on the schedule (`freshness_breached_at`, compare-and-set so two
loops cannot both raise it), writes an audit entry and raises one alert
through the schedule's and the global channels; the incident is the breach
start, so it alerts once however long it lasts. When the data is fresh
again the breach is cleared (audited), and the next breach is a new
incident. The pages, the overview's "needs attention" and /metrics read the
same numbers through `freshness_status`.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import OuterRef, Q, Subquery

from scheduler.core import ConfigError, Freshness, freshness
from scheduler.models import AlertKind, FreshnessMeasure, Run, RunStatus, Schedule, WatermarkState
from scheduler.services.oversight.alerts import alert_raise
from scheduler.services.common.audit import audit_record
from scheduler.services.runs.watermarks import decode_value, watermark_config


@dataclass(frozen=True)
class FreshnessRow:
    schedule: Schedule
    measure: str
    freshness: Freshness

    @property
    def breached(self) -> bool:
        return self.freshness.breached

    @property
    def text(self) -> str:
        return self.freshness.describe(self.measure)

    def as_dict(self) -> dict:
        return {
            "schedule": self.schedule.name, "measure": self.measure,
            "age_seconds": round(self.freshness.age.total_seconds(), 3),
            "objective_seconds": int(self.freshness.objective.total_seconds()),
            "measured_from": self.freshness.measured_from.isoformat(), "breached": self.breached,
            "breached_since": self.schedule.freshness_breached_at.isoformat()
            if self.schedule.freshness_breached_at else None,
            "text": self.text,
        }


def _mark(schedule: Schedule, rows: dict[int, str]) -> datetime | None:
    """The datetime mark (or the configured initial value before the first load), None when unreadable."""
    try:
        config = watermark_config(schedule)
    except ConfigError:
        return None
    if config is None or not config.is_datetime:
        return None
    text = rows.get(schedule.pk, "")
    return decode_value(config, text) if text else config.initial


def freshness_status(*, now: datetime, schedules: list[Schedule] | None = None) -> list[FreshnessRow]:
    """The freshness of every enabled schedule with an objective (or of `schedules`), by name."""
    if schedules is None:
        schedules = list(Schedule.objects.filter(enabled=True, freshness_max_age_seconds__isnull=False)
                         .order_by("name"))
    else:
        schedules = [s for s in schedules if s.freshness_max_age_seconds]
    ids = [s.pk for s in schedules]
    if not ids:
        return []
    # one backward seek of run_sched_status_idx (schedule, status, finished_at) per schedule, not a MAX over
    # every success the schedules ever had (governance and /metrics read this each time)
    latest = (Run.objects.filter(schedule=OuterRef("pk"), status=RunStatus.SUCCEEDED, backfill__isnull=True,
                                 finished_at__isnull=False).order_by("-finished_at").values("finished_at")[:1])
    last = dict(Schedule.objects.filter(pk__in=ids).annotate(last=Subquery(latest)).values_list("pk", "last"))
    marks = dict(WatermarkState.objects.filter(schedule_id__in=ids).values_list("schedule_id", "value"))
    out = []
    for schedule in schedules:
        measure = schedule.freshness_measure
        mark = _mark(schedule, marks) if measure == FreshnessMeasure.WATERMARK else None
        out.append(FreshnessRow(schedule, measure, freshness(
            measure, now=now, objective=timedelta(seconds=schedule.freshness_max_age_seconds),
            last_success=last.get(schedule.pk), mark=mark, since=schedule.created_at,
        )))
    return out


def freshness_check(*, now: datetime) -> dict[str, list[str]]:
    """Governance: store new breaches (one alert each) and clear the ones that recovered."""
    out: dict[str, list[str]] = {"breached": [], "recovered": []}
    for row in freshness_status(now=now):
        schedule = row.schedule
        if row.breached and schedule.freshness_breached_at is None:
            with transaction.atomic():
                if not Schedule.objects.filter(pk=schedule.pk, freshness_breached_at__isnull=True).update(
                        freshness_breached_at=now):
                    continue  # another governance loop recorded it
                schedule.freshness_breached_at = now
                audit_record(actor="governance", action="schedule.freshness_breached", target=schedule,
                             after=row.as_dict(), reason=row.text[:500], at=now)
                alert_raise(
                    kind=AlertKind.FRESHNESS_BREACHED,
                    incident_key=f"freshness:{schedule.pk}:{now.isoformat()}",
                    message=f"'{schedule.name}' breaks its freshness objective: {row.text}",
                    schedule=schedule,
                    now=now,
                )
            out["breached"].append(schedule.name)
        elif not row.breached and schedule.freshness_breached_at is not None:
            if _clear(schedule, now=now, reason=f"fresh again: {row.text}"):
                out["recovered"].append(schedule.name)
    # an objective removed, or a schedule disabled, ends the incident too
    for schedule in Schedule.objects.filter(freshness_breached_at__isnull=False).filter(
            Q(freshness_max_age_seconds__isnull=True) | Q(enabled=False)):
        why = "schedule disabled" if not schedule.enabled else "freshness objective removed"
        if _clear(schedule, now=now, reason=why):
            out["recovered"].append(schedule.name)
    return out


def _clear(schedule: Schedule, *, now: datetime, reason: str) -> bool:
    since = schedule.freshness_breached_at
    with transaction.atomic():
        if not Schedule.objects.filter(pk=schedule.pk, freshness_breached_at=since).update(freshness_breached_at=None):
            return False
        schedule.freshness_breached_at = None
        audit_record(actor="governance", action="schedule.freshness_recovered", target=schedule,
                     before={"breached_since": since.isoformat()}, after={"breached_since": None},
                     reason=reason[:500], at=now)
    return True


__all__ = ["FreshnessRow", "freshness_check", "freshness_status"]
