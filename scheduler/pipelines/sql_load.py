"""How SqlSink writes its rows: values by column, COPY into a staging table on PostgreSQL, executemany on SQLite.

The work per row is kept in C (operator.itemgetter, zip, map, set) and a
column is converted value by value only when it holds a type the database
wants converted (datetimes, JSON values, ...): a table of plain numbers and
text is never touched cell by cell in Python (issue 25: the load benchmark,
docs/benchmarks.md).

PostgreSQL: `COPY` into a temporary table shaped like the target's columns,
then one `INSERT ... SELECT ... ON CONFLICT (key) DO UPDATE`, all inside the
sink's one transaction, so a load is still all or nothing and an upsert.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Decimal
from itertools import chain
from operator import itemgetter
from typing import Any

from scheduler.core import stop

BATCH = 5000  # rows written between two stop checks
STAGE = "etl_stage"
# what must be converted before the driver sees it, per dialect. PostgreSQL takes datetimes as they are: the
# sink's transaction is in UTC (naive ones are UTC, as values.to_utc takes them) and the staging table has
# timestamptz where the target has timestamp, so the instant is converted by the server, not per value in Python.
CONVERTED = {
    "postgresql": (dict, list, tuple),
    "sqlite": (datetime, date, Decimal, dict, list, tuple),
}


def value_rows(rows: Sequence[dict], columns: list[str], convert: Callable[[Any], Any], dialect: str) -> list[tuple]:
    """The rows as tuples in `columns` order, a column converted only where it holds a type that needs it.

    A row that lacks a column has NULL there.
    """
    getter = itemgetter(*columns)
    try:
        tuples = list(map(getter, rows)) if len(columns) > 1 else [(value,) for value in map(getter, rows)]
    except KeyError:
        tuples = [tuple(row.get(c) for c in columns) for row in rows]
    kinds = CONVERTED[dialect]
    if not any(issubclass(kind, kinds) for kind in set(map(type, chain.from_iterable(tuples)))):
        return tuples  # the common case: plain numbers, text and (on PostgreSQL) datetimes, all in C
    by_column = list(zip(*tuples))
    for index, values in enumerate(by_column):
        if any(issubclass(kind, kinds) for kind in set(map(type, values))):
            by_column[index] = tuple(map(convert, values))
    return list(zip(*by_column))


def column(tuples: list[tuple], index: int) -> list[Any]:
    return list(map(itemgetter(index), tuples))


def last_per_key(tuples: list[tuple], key_columns: list[tuple]) -> list[tuple]:
    """One row per key, the last one given: what row-by-row upserts would leave.

    `INSERT ... ON CONFLICT DO UPDATE` refuses to change a row twice in one statement.
    """
    keys = key_columns[0] if len(key_columns) == 1 else list(zip(*key_columns))
    if len(set(keys)) == len(keys):
        return tuples
    return list(dict(zip(keys, tuples)).values())


def copy_upsert(cur: Any, *, table: str, names: str, conflict: str, tuples: list[tuple]) -> None:
    """COPY `tuples` into a staging table with the target's column types, then upsert them into `table`.

    `table` and `names` are quoted identifiers; `conflict` is the statement's `ON CONFLICT ...` clause.
    """
    cur.execute("SET LOCAL TIME ZONE 'UTC'")
    cur.execute(f"DROP TABLE IF EXISTS pg_temp.{STAGE}")
    # the target's own types for just these columns, and no constraint: COPY parses each value as the target would
    cur.execute(f"CREATE TEMPORARY TABLE {STAGE} ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA")
    # but an instant stays an instant: a timestamp column is staged as timestamptz, so a datetime's offset counts
    # and the server converts it to UTC wall time on the upsert (what binding a UTC datetime did)
    cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND atttypid = 'timestamp'::regtype"
                " AND attnum > 0 AND NOT attisdropped", [f"pg_temp.{STAGE}"])
    plain = [row[0] for row in cur.fetchall()]
    if plain:
        changes = ", ".join(f'ALTER COLUMN "{name}" TYPE timestamptz' for name in plain)
        cur.execute(f"ALTER TABLE {STAGE} {changes}")
    with cur.copy(f"COPY {STAGE} ({names}) FROM STDIN") as copy:
        for start in range(0, len(tuples), BATCH):
            # between batches: a stopped run's transaction rolls back, so none of its rows count
            stop.check()
            for row in tuples[start:start + BATCH]:
                copy.write_row(row)
    stop.check()
    cur.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {STAGE} {conflict}")
    cur.execute(f"DROP TABLE {STAGE}")


def executemany_upsert(cur: Any, *, sql: str, tuples: list[tuple]) -> None:
    for start in range(0, len(tuples), BATCH):
        stop.check()  # between batches: a stopped run's transaction rolls back
        cur.executemany(sql, tuples[start:start + BATCH])
