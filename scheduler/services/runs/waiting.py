"""Which WAITING runs a tick looks at: fair across schedules, bounded per tick.

A schedule with a thousand runs waiting on an upstream must not keep the
runs of other schedules from being released, or from timing out at their
max wait. Runs are taken in turns, as admission takes queued runs: each
schedule's oldest waiting run first, then each schedule's second, and so on,
up to `WAITING_PER_TICK` runs.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from scheduler.models import Run, RunStatus, Schedule

WAITING_PER_TICK = 1000


def waiting_in_turns(*, limit: int | None = None, waited_past_max_at: datetime | None = None) -> list[Run]:
    """Up to `limit` WAITING runs (with their schedules), in turns across schedules, oldest first in each.

    With `waited_past_max_at`, only the runs that at that time have waited longer than their schedule's
    `max_wait_seconds`.
    """
    runs = Run.objects.filter(status=RunStatus.WAITING)
    if waited_past_max_at is not None:
        runs = runs.filter(_waited_past_max(waited_past_max_at))
    # the turns are counted over ids alone (a narrow sort: a backlog of 50,000 waiting runs took 1.6 s a tick on
    # SQLite with whole rows, 0.35 s so), then only the chosen runs are read whole, with their schedules
    turns = runs.annotate(turn=Window(RowNumber(), partition_by=[F("schedule_id")], order_by=[F("id").asc()]))
    ids = list(turns.order_by("turn", "id").values_list("id", flat=True)[:limit or WAITING_PER_TICK])
    if not ids:
        return []
    by_id = Run.objects.filter(status=RunStatus.WAITING).select_related("schedule").in_bulk(ids)
    return [by_id[pk] for pk in ids if pk in by_id]


def _waited_past_max(now: datetime) -> Q:
    """Runs queued before now minus their schedule's max wait (one term per distinct max wait in use)."""
    waits = (Schedule.objects.filter(runs__status=RunStatus.WAITING).values_list("max_wait_seconds", flat=True)
             .distinct().order_by())
    terms = Q(pk__in=[])
    for seconds in set(waits):
        try:
            cutoff = now - timedelta(seconds=seconds)
        except OverflowError:
            continue  # a wait longer than the calendar: it never times out
        terms |= Q(schedule__max_wait_seconds=seconds, queued_at__lt=cutoff)
    return terms
