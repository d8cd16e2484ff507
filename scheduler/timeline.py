"""The timeline page's reads: runs one by one when few, else counts the database groups (issue 25).

A range of 48 hours at 10,000 runs a day holds 20,000 runs: the page never
loads them. It asks whether the range holds more than it draws one by one (a
count that stops there), and if so the database counts the runs per schedule,
time slice and status; Python sees at most schedules x slices x statuses rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, F, FloatField, Func, Q, Value
from django.db.models.functions import Coalesce, Floor

from scheduler.models import Run, RunStatus

# how far before the range a run may have been queued and still reach into it (a long wait or a long run)
REACH_BACK = timedelta(days=2)
# a schedule with these in range is drawn before one without, when there are more schedules than rows
TROUBLE = (RunStatus.FAILED, RunStatus.BLOCKED)


class EpochSeconds(Func):
    """Seconds since 1970 of a datetime column, on PostgreSQL and SQLite (stored as UTC text there)."""

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)", **extra)

    def as_sqlite(self, compiler, connection, **extra):
        # %%%%: the template is interpolated twice, by Func and by the cursor
        return self.as_sql(compiler, connection, template="CAST(strftime('%%%%s', %(expressions)s) AS REAL)", **extra)


def owned(qs, team_ids):
    return qs if team_ids is None else qs.filter(schedule__owner_id__in=list(team_ids))


def in_range(*, start: datetime, end: datetime, team_ids=None):
    """Runs that overlap [start, end]: queued before the end (and not long before the start), not finished before
    the start. run_queued_at_idx bounds the scan to the range."""
    return (owned(Run.objects.filter(queued_at__lt=end, queued_at__gte=start - REACH_BACK), team_ids)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=start)))


def count_upto(*, start: datetime, end: datetime, limit: int, team_ids=None) -> int:
    """The runs in range, counted up to `limit` + 1 at most (more than `limit` is all the page needs to know)."""
    return in_range(start=start, end=end, team_ids=team_ids).order_by()[: limit + 1].count()


def runs(*, start: datetime, end: datetime, limit: int = 3000, team_ids=None) -> list[Run]:
    """The runs in range, oldest first, each with what its bar needs."""
    return list(
        in_range(start=start, end=end, team_ids=team_ids)
        .select_related("schedule")
        .only("id", "status", "stop_requested_at", "queued_at", "started_at", "finished_at", "schedule__id",
              "schedule__name")
        .order_by("queued_at", "id")[:limit]
    )


def schedules(*, start: datetime, end: datetime, team_ids=None) -> list[dict]:
    """Per schedule with runs in range: id, name, runs and runs in trouble (failed or blocked)."""
    return list(
        in_range(start=start, end=end, team_ids=team_ids).order_by()
        .values("schedule_id", name=F("schedule__name"))
        .annotate(n=Count("id"), trouble=Count("id", filter=Q(status__in=TROUBLE)))
    )


def slice_counts(*, start: datetime, end: datetime, step: float, schedule_ids, team_ids=None) -> list[tuple]:
    """(schedule id, slice, status, runs) of the runs of `schedule_ids` in range, counted by the database.

    A run falls in the slice of its start (its queue time when it never started); slice 0 begins at `start`.
    A slice before 0 (a run started before the range) or past the end is the caller's to clamp.
    """
    moment = EpochSeconds(Coalesce("started_at", "queued_at"))
    offset = (moment - Value(start.timestamp(), output_field=FloatField())) / Value(float(step),
                                                                                     output_field=FloatField())
    return list(
        in_range(start=start, end=end, team_ids=team_ids).filter(schedule_id__in=list(schedule_ids)).order_by()
        .annotate(slice=Floor(offset))
        .values_list("schedule_id", "slice", "status").annotate(n=Count("id"))
    )


__all__ = ["count_upto", "in_range", "runs", "schedules", "slice_counts"]
