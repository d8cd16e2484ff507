"""Final runs counted per schedule, hour and status as they end, so a crowded timeline never scans the ledger.

`runs_counted` is called in the transaction that makes runs final, beside the status counters (tally.py:
`runs_ended`): one INSERT ... SELECT from the runs' own rows, so the hours are the ones the ledger holds. It only
inserts, so two workers ending runs of one schedule in one hour never wait on each other's row. A prune calls
`runs_uncounted` for the runs it is about to delete (rows with negative counts), so the rows of an hour keep
summing to the runs the ledger still holds of it. `hour_counts_fold` (a governance job) sums the inserted rows
into one row per key and drops the keys that sum to nothing; the reads (scheduler/timeline.py) sum whatever
rows there are, folded or not.

A run's hour is the UTC hour of its start (of its queue time if it never started), its end hour that of its end.
It is counted in the row (schedule, hour, hour), and, when it ended in a later hour, again in the row (schedule,
hour, end hour): the rows a range reads for the runs that started before it and reach into it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from datetime import datetime

from django.db import connection, transaction

from scheduler.models import RunHourCount

FOLD_BATCH = 10_000
UPSERT_ROWS = 300  # rows per upsert statement (8 parameters each: under SQLite's parameter limit)
TABLE = RunHourCount._meta.db_table
KEY = ("schedule_id", "hour", "end_hour")
COLUMNS = RunHourCount.COLUMNS
INSERTED = ", ".join((*KEY, *COLUMNS.values(), "folded"))


def hour_of(column_sql: str) -> str:
    """SQL for the UTC hour (a datetime on the hour) of a datetime expression, on PostgreSQL and SQLite.

    Written for statements executed with parameters (a literal % is doubled)."""
    if connection.vendor == "postgresql":
        return f"date_trunc('hour', {column_sql}, 'UTC')"
    return f"strftime('%%Y-%%m-%%d %%H:00:00', {column_sql})"


def count_select(where: str, *, sign: int = 1, folded: bool = False) -> str:
    """SELECT the rollup's columns (INSERTED) for the final runs of scheduler_run matching `where` (SQL over its
    columns; twice in the statement, with its parameters each time): their rows (schedule, hour, hour), then
    (schedule, hour, end hour) for those that ended in a later hour.

    Also what bench/history.py writes for the runs it generates; migration 0027 holds its own copy."""
    hour = hour_of("COALESCE(started_at, queued_at)")
    end_hour = hour_of("COALESCE(finished_at, started_at, queued_at)")
    counts = ", ".join(f"{int(sign)} * SUM(CASE WHEN status = '{status}' THEN 1 ELSE 0 END)"
                       for status in COLUMNS)
    flag = ("TRUE" if folded else "FALSE") if connection.vendor == "postgresql" else str(int(folded))
    final = ", ".join(f"'{s}'" for s in COLUMNS)
    runs = f"FROM scheduler_run WHERE ({where}) AND status IN ({final})"
    return (f"SELECT schedule_id, {hour}, {hour}, {counts}, {flag} {runs} GROUP BY schedule_id, {hour}"
            f" UNION ALL SELECT schedule_id, {hour}, {end_hour}, {counts}, {flag} {runs} AND {end_hour} > {hour}"
            f" GROUP BY schedule_id, {hour}, {end_hour}")


def _insert_counts(run_ids: Collection[int], sign: int) -> None:
    ids = sorted({int(pk) for pk in run_ids})
    with connection.cursor() as cursor:
        for lo in range(0, len(ids), 1000):
            chunk = ids[lo:lo + 1000]
            where = f"id IN ({', '.join(['%s'] * len(chunk))})"
            cursor.execute(f"INSERT INTO {TABLE} ({INSERTED}) {count_select(where, sign=sign)}", chunk + chunk)


def runs_counted(run_ids: Collection[int]) -> None:
    """Count runs that just became final (in the caller's transaction, after their compare-and-set)."""
    _insert_counts(run_ids, 1)


def runs_uncounted(run_ids: Collection[int]) -> None:
    """Take back the counts of final runs about to be deleted (a prune, in its transaction, the rows locked)."""
    _insert_counts(run_ids, -1)


def _upsert(sums: dict[tuple, tuple]) -> None:
    """Add `sums` (key -> counts in the order of COLUMNS) to the folded rows of their keys (a key's first sum makes
    its row)."""
    rows = sorted(sums.items())
    true = "TRUE" if connection.vendor == "postgresql" else "1"
    added = ", ".join(f"{c} = {TABLE}.{c} + excluded.{c}" for c in COLUMNS.values())
    field = RunHourCount._meta.get_field("hour")
    with connection.cursor() as cursor:
        for lo in range(0, len(rows), UPSERT_ROWS):
            chunk = rows[lo:lo + UPSERT_ROWS]
            values = ", ".join([f"({', '.join(['%s'] * (len(KEY) + len(COLUMNS)))}, {true})"] * len(chunk))
            params = [value for (schedule_id, hour, end_hour), counts in chunk
                      for value in (schedule_id, field.get_db_prep_value(hour, connection),
                                    field.get_db_prep_value(end_hour, connection), *counts)]
            cursor.execute(f"INSERT INTO {TABLE} ({INSERTED}) VALUES {values}"
                           f" ON CONFLICT ({', '.join(KEY)}) WHERE folded DO UPDATE SET {added}", params)


def _unfolded(batch: int) -> list[tuple]:
    """The oldest `batch` rows not folded yet, locked: (id, *KEY, *counts)."""
    return list(RunHourCount.objects.select_for_update().filter(folded=False).order_by("id")
                .values_list("id", *KEY, *COLUMNS.values())[:batch])


def hour_counts_fold(*, now: datetime | None = None, batch: int = FOLD_BATCH) -> int:
    """Sum the oldest `batch` inserted rows into the folded row of each key; the number of rows folded.

    As tally_fold: the rows are locked, and the fold is given up (rolled back) if the rows it deletes are not
    exactly those it summed, so two folds at once never count a row twice and a row committed meanwhile is never
    lost. A folded row whose counts all reach 0 (its runs were all pruned) is deleted.
    """
    with transaction.atomic():
        rows = _unfolded(batch)
        if not rows:
            return 0
        sums: dict[tuple, Counter[int]] = {}
        for _, schedule_id, hour, end_hour, *counts in rows:
            total = sums.setdefault((schedule_id, hour, end_hour), Counter())
            for i, n in enumerate(counts):
                total[i] += n
        deleted, _ = RunHourCount.objects.filter(folded=False, id__lte=rows[-1][0]).delete()
        if deleted != len(rows):
            transaction.set_rollback(True)
            return 0
        _upsert({key: tuple(total[i] for i in range(len(COLUMNS))) for key, total in sums.items() if any(
            total.values())})
        schedules, hours = sorted({key[0] for key in sums}), sorted({key[1] for key in sums})
        for lo in range(0, len(hours), 1000):  # through runhour_sched_hour_idx
            RunHourCount.objects.filter(folded=True, schedule_id__in=schedules, hour__in=hours[lo:lo + 1000],
                                        **{column: 0 for column in COLUMNS.values()}).delete()
    return len(rows)


__all__ = ["count_select", "hour_counts_fold", "hour_of", "runs_counted", "runs_uncounted"]
