"""Each schedule's latest success and failure (`LatestOutcome`), kept as runs end, so the overview reads one row per
schedule instead of seeking into the ledger per schedule on every refresh (issue 25).

`outcomes_record` is called beside `runs_tallied`, in the transaction that makes runs final (finalize.py,
finish.py): the row commits or rolls back with the runs. Inside `outcomes_batch` (every entry point of
finish.py) the rows are written once, when the batch's body is done, in one statement ordered by schedule: the
row locks are the last a run's end takes, in one order, so two workers ending runs of the same schedules never
wait on each other in a circle (the breaker's schedule-row locks come before, in whatever order the runs end).

A row only moves forward (a higher id, a later finish), so ends written in any order leave the same row. The
ledger loses runs only to a prune: `outcomes_after_prune` points the rows that named a deleted run at the next
one the ledger holds, in the prune's transaction. `outcomes_rebuild` computes rows from the ledger alone (for a
history written by other means: the benchmark's generator, tests that write the ledger directly).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import Max, OuterRef, Q, Subquery

from scheduler.models import Backfill, LatestOutcome, Run, RunStatus, Schedule

S = RunStatus
COLUMNS = ("live_success_id", "live_failure_id", "failure_id", "failure_at", "success_id", "success_at")

_local = threading.local()


@dataclass
class _Facts:
    """What the runs of one schedule that just ended say (None: nothing new)."""

    live_success_id: int | None = None
    live_failure_id: int | None = None
    failure_id: int | None = None
    failure_at: datetime | None = None
    success_id: int | None = None
    success_at: datetime | None = None

    def add(self, run: Run) -> None:
        live = run.backfill_id is None
        if run.status == S.FAILED:
            if run.pk > (self.failure_id or 0):
                self.failure_id, self.failure_at = run.pk, run.finished_at
            if live:
                self.live_failure_id = max(self.live_failure_id or 0, run.pk)
        elif run.status == S.SUCCEEDED:
            if live:
                self.live_success_id = max(self.live_success_id or 0, run.pk)
            if run.finished_at is not None and (self.success_at is None
                                                or (run.finished_at, run.pk) > (self.success_at, self.success_id)):
                self.success_id, self.success_at = run.pk, run.finished_at


@dataclass
class _Batch:
    log: list[Run] = field(default_factory=list)  # in order, so a level can drop what it added


def outcomes_record(runs: Iterable[Run]) -> None:
    """Runs that just became final (in the caller's transaction): move their schedules' rows forward.

    Only SUCCEEDED and FAILED runs say anything. Inside `outcomes_batch` the rows are written when it ends."""
    ended = [run for run in runs if run.status in (S.SUCCEEDED, S.FAILED)]
    if not ended:
        return
    batch: _Batch | None = getattr(_local, "batch", None)
    if batch is not None:
        batch.log.extend(ended)
        return
    facts: dict[int, _Facts] = {}
    for run in ended:
        facts.setdefault(run.schedule_id, _Facts()).add(run)
    _upsert(facts)


@contextlib.contextmanager
def outcomes_batch() -> Iterator[None]:
    """Collect the body's `outcomes_record` calls and write them in one statement when it is done (inside the
    caller's transaction). Nested: the outermost writes; an exception drops what its own level collected (the
    savepoint it stands for was rolled back) and goes on."""
    outer: _Batch | None = getattr(_local, "batch", None)
    batch = outer or _Batch()
    mark = len(batch.log)
    _local.batch = batch
    try:
        yield
    except BaseException:
        del batch.log[mark:]
        raise
    finally:
        if outer is None:
            _local.batch = None
    if outer is None and batch.log:
        facts: dict[int, _Facts] = {}
        for run in batch.log:
            facts.setdefault(run.schedule_id, _Facts()).add(run)
        _upsert(facts)


def _stored(value: datetime | None):
    """A datetime as the ORM stores it (SQLite compares the text: it must be written alike)."""
    return connection.ops.adapt_datetimefield_value(value) if value is not None else None


def _upsert(facts: dict[int, _Facts]) -> None:
    """One INSERT ... ON CONFLICT DO UPDATE for the schedules in `facts`, ordered by schedule (the lock order).

    Each column moves only forward: a NULL or a lower id (for `success`, an earlier finish) never replaces what
    the row holds. SET reads the row as it was before the statement, on both databases."""
    quote = connection.ops.quote_name
    table = quote(LatestOutcome._meta.db_table)
    cols = ["schedule_id", *COLUMNS]
    rows, params = [], []
    for schedule_id in sorted(facts):
        f = facts[schedule_id]
        rows.append("(" + ", ".join(["%s"] * len(cols)) + ")")
        params += [schedule_id, f.live_success_id, f.live_failure_id, f.failure_id, _stored(f.failure_at),
                   f.success_id, _stored(f.success_at)]

    def higher(col: str, *, by: str | None = None) -> str:
        col, by = quote(col), quote(by or col)
        return (f"{col} = CASE WHEN {table}.{by} IS NULL OR {table}.{by} < excluded.{by} "
                f"THEN excluded.{col} ELSE {table}.{col} END")

    at, sid = quote("success_at"), quote("success_id")
    later = (f"excluded.{at} IS NOT NULL AND ({table}.{at} IS NULL OR excluded.{at} > {table}.{at} "
             f"OR (excluded.{at} = {table}.{at} AND excluded.{sid} > {table}.{sid}))")
    # failure_at goes with failure_id, and is set before it: SET reads the row as it was either way
    sets = [higher("live_success_id"), higher("live_failure_id"), higher("failure_at", by="failure_id"),
            higher("failure_id"),
            f"{sid} = CASE WHEN {later} THEN excluded.{sid} ELSE {table}.{sid} END",
            f"{at} = CASE WHEN {later} THEN excluded.{at} ELSE {table}.{at} END"]
    sql = (f"INSERT INTO {table} ({', '.join(quote(c) for c in cols)}) VALUES {', '.join(rows)} "
           f"ON CONFLICT ({quote('schedule_id')}) DO UPDATE SET {', '.join(sets)}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# --- from the ledger ---------------------------------------------------------------------------------------------

def _latest_live(status: str) -> Subquery:
    # run_sched_verdict_idx (schedule, status, -id) of live runs: one seek per schedule
    return Subquery(Run.objects.filter(schedule=OuterRef("pk"), status=status, backfill__isnull=True)
                    .order_by("-id").values("id")[:1])


def _ledger_rows(schedule_ids: Iterable[int] | None) -> list[LatestOutcome]:
    """The rows the ledger gives for these schedules (every schedule when None): a few index seeks each."""
    success = (Run.objects.filter(schedule=OuterRef("pk"), status=S.SUCCEEDED, finished_at__isnull=False)
               .order_by("-finished_at", "-id"))  # run_sched_status_idx (schedule, status, finished_at), backwards
    qs = Schedule.objects.all() if schedule_ids is None else Schedule.objects.filter(pk__in=list(schedule_ids))
    rows = list(qs.order_by("pk").annotate(
        live_ok=_latest_live(S.SUCCEEDED), live_failed=_latest_live(S.FAILED),
        ok=Subquery(success.values("id")[:1]), ok_at=Subquery(success.values("finished_at")[:1]),
    ).values_list("pk", "live_ok", "live_failed", "ok", "ok_at"))
    windows = _failed_windows([pk for pk, *_ in rows])
    rows = [(pk, live_ok, live_failed, max(live_failed or 0, windows.get(pk, 0)) or None, ok, at)
            for pk, live_ok, live_failed, ok, at in rows]
    failed_at = dict(Run.objects.filter(pk__in=[row[3] for row in rows if row[3]]).values_list("pk", "finished_at"))
    return [LatestOutcome(schedule_id=pk, live_success_id=live_ok, live_failure_id=live_failed, failure_id=failed,
                          failure_at=failed_at.get(failed), success_id=ok, success_at=at)
            for pk, live_ok, live_failed, failed, ok, at in rows]


def _failed_windows(schedule_ids: list[int]) -> dict[int, int]:
    """schedule -> its backfills' latest FAILED run, through the backfills' own runs (the run_backfill index):
    asked per schedule, PostgreSQL walked the whole ledger by id looking for them (a minute at 1,000,000 runs)."""
    backfills = dict(Backfill.objects.filter(schedule_id__in=schedule_ids).values_list("pk", "schedule_id"))
    out: dict[int, int] = {}
    if backfills:
        for backfill_id, top in (Run.objects.filter(backfill_id__in=list(backfills), status=S.FAILED).order_by()
                                 .values_list("backfill_id").annotate(top=Max("id"))):
            schedule_id = backfills[backfill_id]
            out[schedule_id] = max(out.get(schedule_id, 0), top)
    return out


def outcomes_rebuild(*, schedule_ids: Iterable[int] | None = None) -> int:
    """Set the rows of these schedules (every schedule when None) to what the ledger says; the rows written."""
    rows = _ledger_rows(schedule_ids)
    LatestOutcome.objects.bulk_create(rows, update_conflicts=True, unique_fields=["schedule"],
                                      update_fields=list(COLUMNS))
    return len(rows)


def outcomes_after_prune(deleted: Iterable[int]) -> int:
    """In the prune's transaction, after it deleted the runs `deleted`: the rows that named one of them, set to
    what the ledger says now (the next run it holds, or none). Returns the rows changed.

    A prune keeps every schedule's latest success (`success`), so the rows it touches are those whose latest
    live success or latest failure aged out: rare, and only those rows are locked. They are locked before the
    ledger is read: a run's end committed before the lock is in what is read, one committed after it moves the
    row forward from what is written here."""
    ids = list(deleted)
    if not ids:
        return 0
    named = Q()
    for column in ("live_success_id", "live_failure_id", "failure_id", "success_id"):
        named |= Q(**{f"{column}__in": ids})
    schedules = list(LatestOutcome.objects.filter(named).order_by("schedule_id").values_list("schedule_id", flat=True))
    if not schedules:
        return 0
    # in schedule order, as every run's end takes them (outcomes_batch)
    list(LatestOutcome.objects.select_for_update().filter(schedule_id__in=schedules).order_by("schedule_id")
         .values_list("schedule_id", flat=True))
    return outcomes_rebuild(schedule_ids=schedules)


def outcomes_stale() -> list[int]:
    """Schedules whose row differs from what the ledger says (a check for tests and the benchmark)."""
    kept = {row.schedule_id: tuple(getattr(row, c) for c in COLUMNS) for row in LatestOutcome.objects.all()}
    empty = (None,) * len(COLUMNS)
    return [row.schedule_id for row in _ledger_rows(None)
            if kept.get(row.schedule_id, empty) != tuple(getattr(row, c) for c in COLUMNS)]


__all__ = ["outcomes_after_prune", "outcomes_batch", "outcomes_stale", "outcomes_rebuild", "outcomes_record"]
