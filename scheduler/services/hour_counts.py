"""Final runs counted per schedule, hour and status as they end, so a crowded timeline never scans the ledger.

`runs_counted` is called in the transaction that makes runs final, beside the status counters (tally.py:
`runs_ended`): one INSERT ... SELECT from the runs' own rows, so the hour is the one the ledger holds. It only
inserts, so two workers ending runs of one schedule in one hour never wait on each other's row. A prune calls
`runs_uncounted` for the runs it is about to delete (rows with negative counts), so the rows of an hour keep
summing to the runs the ledger still holds of it. `hour_counts_fold` (a governance job) sums the inserted rows
into one row per key and drops the keys that sum to nothing; the reads (scheduler/timeline.py) sum whatever
rows there are, folded or not.

A run's hour is the UTC hour of its start (of its queue time if it never started); its end hour that of its end.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from datetime import datetime

from django.db import connection, transaction

from scheduler.models import RunHourCount, RunStatus

FOLD_BATCH = 10_000
UPSERT_ROWS = 500  # rows per upsert statement (6 parameters each: under SQLite's parameter limit)
TABLE = RunHourCount._meta.db_table
KEY = ("schedule_id", "hour", "end_hour", "status")


def hour_of(column_sql: str) -> str:
    """SQL for the UTC hour (a datetime on the hour) of a datetime expression, on PostgreSQL and SQLite.

    Written for statements executed with parameters (a literal % is doubled)."""
    if connection.vendor == "postgresql":
        return f"date_trunc('hour', {column_sql}, 'UTC')"
    return f"strftime('%%Y-%%m-%%d %%H:00:00', {column_sql})"


def count_select(where: str, *, sign: int = 1, folded: bool = False) -> str:
    """SELECT the rollup's columns for the final runs of scheduler_run matching `where` (SQL over its columns).

    Also what bench/history.py writes for the runs it generates; migration 0027 holds its own copy."""
    hour = hour_of("COALESCE(started_at, queued_at)")
    end_hour = hour_of("COALESCE(finished_at, started_at, queued_at)")
    final = ", ".join(f"'{s}'" for s in sorted(RunStatus.final()))
    flag = ("TRUE" if folded else "FALSE") if connection.vendor == "postgresql" else str(int(folded))
    return (f"SELECT schedule_id, {hour}, {end_hour}, status, {int(sign)} * COUNT(*), {flag} FROM scheduler_run"
            f" WHERE ({where}) AND status IN ({final}) GROUP BY schedule_id, {hour}, {end_hour}, status")


def _insert_counts(run_ids: Collection[int], sign: int) -> None:
    ids = sorted({int(pk) for pk in run_ids})
    if not ids:
        return
    columns = ", ".join((*KEY, "n", "folded"))
    with connection.cursor() as cursor:
        for lo in range(0, len(ids), 1000):
            chunk = ids[lo:lo + 1000]
            where = f"id IN ({', '.join(['%s'] * len(chunk))})"
            cursor.execute(f"INSERT INTO {TABLE} ({columns}) {count_select(where, sign=sign)}", chunk)


def runs_counted(run_ids: Collection[int]) -> None:
    """Count runs that just became final (in the caller's transaction, after their compare-and-set)."""
    _insert_counts(run_ids, 1)


def runs_uncounted(run_ids: Collection[int]) -> None:
    """Take back the counts of final runs about to be deleted (a prune, in its transaction, the rows locked)."""
    _insert_counts(run_ids, -1)


def _upsert(sums: dict[tuple, int]) -> None:
    """Add `sums` to the folded rows of their keys (a key's first sum makes its row)."""
    rows = sorted(sums.items())
    true = "TRUE" if connection.vendor == "postgresql" else "1"
    columns = ", ".join((*KEY, "n", "folded"))
    with connection.cursor() as cursor:
        for lo in range(0, len(rows), UPSERT_ROWS):
            chunk = rows[lo:lo + UPSERT_ROWS]
            values = ", ".join([f"(%s, %s, %s, %s, %s, {true})"] * len(chunk))
            params = [value for key, n in chunk for value in (*_adapted(key), n)]
            cursor.execute(
                f"INSERT INTO {TABLE} ({columns}) VALUES {values}"
                f" ON CONFLICT ({', '.join(KEY)}) WHERE folded DO UPDATE SET n = {TABLE}.n + excluded.n", params)


def _adapted(key: tuple) -> tuple:
    schedule_id, hour, end_hour, status = key
    field = RunHourCount._meta.get_field("hour")
    return (schedule_id, field.get_db_prep_value(hour, connection), field.get_db_prep_value(end_hour, connection),
            status)


def _unfolded(batch: int) -> list[tuple]:
    """The oldest `batch` rows not folded yet, locked: (id, *KEY, n)."""
    return list(RunHourCount.objects.select_for_update().filter(folded=False).order_by("id")
                .values_list("id", *KEY, "n")[:batch])


def hour_counts_fold(*, now: datetime | None = None, batch: int = FOLD_BATCH) -> int:
    """Sum the oldest `batch` inserted rows into the folded row of each key; the number of rows folded.

    As tally_fold: the rows are locked, and the fold is given up (rolled back) if the rows it deletes are not
    exactly those it summed, so two folds at once never count a row twice and a row committed meanwhile is never
    lost. A folded row whose count reaches 0 (its runs were all pruned) is deleted.
    """
    with transaction.atomic():
        rows = _unfolded(batch)
        if not rows:
            return 0
        sums: Counter[tuple] = Counter()
        for _, *key, n in rows:
            sums[tuple(key)] += n
        deleted, _ = RunHourCount.objects.filter(folded=False, id__lte=rows[-1][0]).delete()
        if deleted != len(rows):
            transaction.set_rollback(True)
            return 0
        _upsert({key: n for key, n in sums.items() if n})
        hours = sorted({key[1] for key in sums})
        for lo in range(0, len(hours), 1000):
            RunHourCount.objects.filter(folded=True, n=0, hour__in=hours[lo:lo + 1000]).delete()
    return len(rows)


__all__ = ["count_select", "hour_counts_fold", "hour_of", "runs_counted", "runs_uncounted"]
