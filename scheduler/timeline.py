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

from datetime import UTC, datetime, timedelta

from django.db.models import Count, F, Func, IntegerField, Q, Sum
from django.db.models.functions import Coalesce, TruncHour

from scheduler.models import Run, RunHourCount, RunStatus, Schedule

# how far before the range a run may have been queued and still reach into it (a long wait or a long run), when
# the runs are drawn one by one; the grouped range has no such bound (its reaching rows are indexed apart)
REACH_BACK = timedelta(days=2)
COLUMNS = RunHourCount.COLUMNS
# a schedule with these in range is drawn before one without, when there are more schedules than rows
TROUBLE = (RunStatus.FAILED, RunStatus.BLOCKED)
HOUR = 3600


class HourSlice(Func):
    """The slice of a rollup row (its hour) or of a run (a moment), (moment - start) // step in seconds, in integer
    arithmetic on PostgreSQL and SQLite (where a datetime is UTC text), not PostgreSQL's numeric EXTRACT on each of
    thousands of rows. The two constants are whole numbers, written into the SQL."""

    output_field = IntegerField()

    def __init__(self, column, *, start: datetime, step: int) -> None:
        super().__init__(F(column) if isinstance(column, str) else column)
        self.origin, self.step = int(start.timestamp()), int(step)

    def as_sql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        if connection.vendor == "postgresql":
            seconds = f"floor(date_part('epoch', {column}))::bigint"
        else:
            seconds = f"CAST(strftime('%%s', {column}) AS INTEGER)"  # %%: the cursor interpolates the SQL
        return f"(({seconds} - {self.origin}) / {self.step})", params


def owned(qs, team_ids, backfills: bool = True):
    """`qs` narrowed to the teams' schedules, and without backfill windows' runs when `backfills` is false."""
    qs = qs if team_ids is None else qs.filter(schedule__owner_id__in=list(team_ids))
    return qs if backfills else qs.filter(backfill__isnull=True)


def in_range(*, start: datetime, end: datetime, team_ids=None, backfills: bool = True):
    """Runs that overlap [start, end]: queued before the end (and not long before the start), not finished before
    the start. run_queued_at_idx bounds the scan to the range."""
    return (owned(Run.objects.filter(queued_at__lt=end, queued_at__gte=start - REACH_BACK), team_ids, backfills)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=start)))


def ledger_slice_counts(*, start: datetime, end: datetime, step: int, schedule_ids=None, team_ids=None,
                        backfills: bool = True, only_backfills: bool = False) -> list[tuple]:
    """(schedule id, slice, status, runs) counted from the ledger, for slices shorter than the rollup's hour (a
    short range: its runs are few enough to group in one pass) and for the backfill runs a crowded range leaves
    out. A run is in the slice it started in (was queued in, if it never started), as in the rollup; one that
    started before `start` is in the first slice, as is a live run."""
    rows = in_range(start=start, end=end, team_ids=team_ids, backfills=backfills).order_by()
    if only_backfills:
        rows = rows.filter(backfill__isnull=False)
    if schedule_ids is not None:
        rows = rows.filter(schedule_id__in=sorted(set(schedule_ids)))
    summed = (rows.annotate(slice=HourSlice(Coalesce("started_at", "queued_at"), start=start, step=step))
              .values_list("schedule_id", "slice", "status").annotate(n=Count("id")))
    return [(sid, max(index, 0), status, n) for sid, index, status, n in summed]


def without(counts: list[tuple], left_out: list[tuple]) -> list[tuple]:
    """`counts` less `left_out` (both as slice_counts gives them): a crowded range's counts without its backfills."""
    summed: dict[tuple, int] = {}
    for sid, index, status, n in counts:
        summed[sid, index, status] = summed.get((sid, index, status), 0) + n
    for sid, index, status, n in left_out:
        summed[sid, index, status] = summed.get((sid, index, status), 0) - n
    return [(*key, n) for key, n in summed.items() if n > 0]


def count_upto(*, start: datetime, end: datetime, limit: int, team_ids=None, backfills: bool = True) -> int:
    """The runs in range (in_range), counted up to `limit` + 1 at most (more than `limit` is all the page needs).

    Those queued in the range first: each of them is in it, so a crowded range stops after `limit` + 1 index
    entries; only a quiet one goes on to those queued before it that reach into it."""
    inside = owned(Run.objects.filter(queued_at__gte=start, queued_at__lt=end), team_ids, backfills).order_by()
    n = inside[: limit + 1].count()
    if n > limit:
        return n
    before = in_range(start=start, end=min(start, end), team_ids=team_ids, backfills=backfills).order_by()
    return n + before[: limit + 1 - n].count()


def runs(*, start: datetime, end: datetime, limit: int = 3000, team_ids=None, backfills: bool = True,
         schedule_ids=None) -> list[Run]:
    """The runs in range (of `schedule_ids`, if given), oldest first, each with what its bar needs."""
    found = in_range(start=start, end=end, team_ids=team_ids, backfills=backfills)
    if schedule_ids is not None:
        found = found.filter(schedule_id__in=sorted(set(schedule_ids)))
    return list(
        found
        .select_related("schedule")
        .only("id", "status", "stop_requested_at", "queued_at", "started_at", "finished_at", "schedule__id",
              "schedule__name")
        .order_by("queued_at", "id")[:limit]
    )


# --- a crowded range: counts per schedule, whole hour and status ------------------------------------------------

def hour_start(moment: datetime) -> datetime:
    """The UTC hour `moment` falls in: where a grouped range starts."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def outside_rows(*, start: datetime, end: datetime, team_ids=None) -> list[tuple]:
    """The runs of the grouped range [start (on the hour), end) that its hours' rows do not hold, as
    (schedule id, status, hour or None, runs): the final runs that started before `start` and ended in the range
    (hour None: the first slice), and the live runs queued before `end` (the hour they started or were queued in).
    Both are few: runs that outlast an hour boundary, and the queue."""
    # summed here, not by a GROUP BY: grouped by schedule, SQLite's planner walks every older row of each schedule
    # in runhour_sched_hour_idx instead of the few of the partial index
    reaching: dict[int, list[int]] = {}
    for sid, *counts in owned(RunHourCount.objects.filter(hour__lt=start, end_hour__gte=start,
                                                          end_hour__gt=F("hour")), team_ids).values_list(
            "schedule_id", *COLUMNS.values()):
        reaching[sid] = [a + b for a, b in zip(reaching.get(sid, [0] * len(COLUMNS)), counts)]
    live = (owned(Run.objects.filter(status__in=sorted(RunStatus.active()), queued_at__lt=end), team_ids).order_by()
            .annotate(at=TruncHour(Coalesce("started_at", "queued_at"), tzinfo=UTC))
            .values_list("schedule_id", "status", "at").annotate(n=Count("id")))
    return ([(sid, status, None, n) for sid, counts in reaching.items() for status, n in zip(COLUMNS, counts) if n]
            + [(sid, status, max(at, start), n) for sid, status, at, n in live])


def slice_counts(*, start: datetime, end: datetime, step: int, schedule_ids=None, team_ids=None,
                 outside: list[tuple] = ()) -> list[tuple]:
    """(schedule id, slice, status, runs) of the grouped range [start (on the hour), end): slice i is the `step`
    seconds (whole hours) from start + i * step. The hours' rows of every schedule (or of `schedule_ids`) are
    summed by the database in one pass; `outside` (outside_rows() of the same range) is added to them."""
    if step % HOUR:
        raise ValueError(f"step: {step} s is not a whole number of hours")
    rows = owned(RunHourCount.objects.filter(hour__gte=start, hour__lt=end, end_hour=F("hour")), team_ids).order_by()
    if schedule_ids is not None:
        rows = rows.filter(schedule_id__in=sorted(set(schedule_ids)))
    summed = (rows.annotate(slice=HourSlice("hour", start=start, step=step)).values_list("schedule_id", "slice")
              .annotate(*[Sum(c) for c in COLUMNS.values()]))
    counts = [(sid, index, status, n) for sid, index, *ns in summed for status, n in zip(COLUMNS, ns) if n]
    for sid, status, at, n in outside:
        if schedule_ids is None or sid in schedule_ids:
            counts.append((sid, 0 if at is None else int((at - start).total_seconds() // step), status, n))
    return counts


def schedules(counts: list[tuple]) -> list[dict]:
    """Per schedule in `counts` (slice_counts) with runs: id, name, runs and runs in trouble (failed or blocked)."""
    found: dict[int, dict] = {}
    for sid, _, status, n in counts:
        row = found.setdefault(sid, {"schedule_id": sid, "name": "", "n": 0, "trouble": 0})
        row["n"] += n
        row["trouble"] += n if status in TROUBLE else 0
    names = dict(Schedule.objects.filter(pk__in=sorted(found)).values_list("pk", "name"))
    return [{**row, "name": names.get(sid, "")} for sid, row in found.items() if row["n"] > 0 and sid in names]


__all__ = ["count_upto", "hour_start", "in_range", "ledger_slice_counts", "outside_rows", "runs", "schedules",
           "slice_counts", "without"]
