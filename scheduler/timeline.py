"""The timeline page's reads: runs one by one when few, else counts from the hour rollup (issue 25).

A range of 48 hours at 27,000 runs a day holds 55,000 runs: the page never loads them, nor counts them in the
ledger. It asks whether the range holds more than it draws one by one (a count that stops there), and if so it
reads the counts kept as runs end (RunHourCount, services/hour_counts.py): per schedule, per whole UTC hour, per
final status. The grouped range therefore starts on the hour at or before `start`; it holds

* the final runs that started (were queued, if they never started) in its hours: the rollup's rows of those hours;
* the final runs that started before it and ended in it (a long run, a long wait): the rollup's rows whose end hour
  is past their start hour (a partial index holds only those), drawn in the first slice;
* the live runs (QUEUED, WAITING, RUNNING) queued before its end, read from the ledger by their status (a few).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone as dt_timezone

from django.db.models import Count, F, FloatField, Func, Q, Sum, Value
from django.db.models.functions import Coalesce, Floor, TruncHour

from scheduler.models import Run, RunHourCount, RunStatus

# how far before the range a run may have been queued and still reach into it (a long wait or a long run), when
# the runs are drawn one by one; the grouped range has no such bound (its reaching rows are indexed apart)
REACH_BACK = timedelta(days=2)
# a schedule with these in range is drawn before one without, when there are more schedules than rows
TROUBLE = (RunStatus.FAILED, RunStatus.BLOCKED)
HOUR = 3600


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
    """The runs in range (in_range), counted up to `limit` + 1 at most (more than `limit` is all the page needs).

    Those queued in the range first: each of them is in it, so a crowded range stops after `limit` + 1 index
    entries; only a quiet one goes on to those queued before it that reach into it."""
    inside = owned(Run.objects.filter(queued_at__gte=start, queued_at__lt=end), team_ids).order_by()
    n = inside[: limit + 1].count()
    if n > limit:
        return n
    before = in_range(start=start, end=min(start, end), team_ids=team_ids).order_by()
    return n + before[: limit + 1 - n].count()


def runs(*, start: datetime, end: datetime, limit: int = 3000, team_ids=None) -> list[Run]:
    """The runs in range, oldest first, each with what its bar needs."""
    return list(
        in_range(start=start, end=end, team_ids=team_ids)
        .select_related("schedule")
        .only("id", "status", "stop_requested_at", "queued_at", "started_at", "finished_at", "schedule__id",
              "schedule__name")
        .order_by("queued_at", "id")[:limit]
    )


# --- a crowded range: counts per schedule, whole hour and status ------------------------------------------------

def hour_start(moment: datetime) -> datetime:
    """The UTC hour `moment` falls in: where a grouped range starts."""
    return moment.astimezone(dt_timezone.utc).replace(minute=0, second=0, microsecond=0)


def _hours(start: datetime, end: datetime, team_ids):
    """The rollup's rows of the hours from `start` (on the hour) to `end`."""
    return owned(RunHourCount.objects.filter(hour__gte=start, hour__lt=end), team_ids).order_by()


def outside_rows(*, start: datetime, end: datetime, team_ids=None) -> list[tuple]:
    """The runs of the grouped range [start (on the hour), end) that its hours' rows do not hold, as
    (schedule id, name, status, hour or None, runs): the final runs that started before `start` and ended in the
    range (hour None: the first slice), and the live runs queued before `end` (the hour they started or were
    queued in). Both are few: runs that outlast an hour boundary, and the queue."""
    reaching = (owned(RunHourCount.objects.filter(hour__lt=start, end_hour__gte=start, end_hour__gt=F("hour")),
                      team_ids).order_by()
                .values_list("schedule_id", "schedule__name", "status").annotate(n=Sum("n")))
    live = (owned(Run.objects.filter(status__in=sorted(RunStatus.active()), queued_at__lt=end), team_ids).order_by()
            .annotate(at=TruncHour(Coalesce("started_at", "queued_at"), tzinfo=dt_timezone.utc))
            .values_list("schedule_id", "schedule__name", "status", "at").annotate(n=Count("id")))
    return ([(sid, name, status, None, n) for sid, name, status, n in reaching if n]
            + [(sid, name, status, max(at, start), n) for sid, name, status, at, n in live])


def schedules(*, start: datetime, end: datetime, team_ids=None, outside: list[tuple] = ()) -> list[dict]:
    """Per schedule with runs in the grouped range [start (on the hour), end): id, name, runs and runs in trouble
    (failed or blocked); `outside` are outside_rows() of the same range."""
    trouble = Q(status__in=TROUBLE)
    found = {sid: {"schedule_id": sid, "name": name, "n": n, "trouble": bad or 0}
             for sid, name, n, bad in _hours(start, end, team_ids).values_list("schedule_id", "schedule__name")
             .annotate(runs=Sum("n"), bad=Sum("n", filter=trouble))}
    for sid, name, status, _, n in outside:
        row = found.setdefault(sid, {"schedule_id": sid, "name": name, "n": 0, "trouble": 0})
        row["n"] += n
        row["trouble"] += n if status in TROUBLE else 0
    return [row for row in found.values() if row["n"] > 0]


def slice_counts(*, start: datetime, end: datetime, step: int, schedule_ids, team_ids=None,
                 outside: list[tuple] = ()) -> list[tuple]:
    """(schedule id, slice, status, runs) of `schedule_ids` in the grouped range [start (on the hour), end), slice
    i being the `step` seconds (whole hours) from start + i * step; the hours' rows are summed by the database."""
    if step % HOUR:
        raise ValueError(f"step: {step} s is not a whole number of hours")
    ids = set(schedule_ids)
    offset = (EpochSeconds("hour") - Value(start.timestamp(), output_field=FloatField())) / Value(
        float(step), output_field=FloatField())
    counts = list(_hours(start, end, team_ids).filter(schedule_id__in=sorted(ids)).annotate(slice=Floor(offset))
                  .values_list("schedule_id", "slice", "status").annotate(runs=Sum("n")))
    for sid, _, status, at, n in outside:
        if sid in ids:
            counts.append((sid, 0 if at is None else int((at - start).total_seconds() // step), status, n))
    return [row for row in counts if row[3]]


__all__ = ["count_upto", "hour_start", "in_range", "outside_rows", "runs", "schedules", "slice_counts"]
