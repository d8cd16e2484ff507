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
from operator import attrgetter, itemgetter
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
    by_column = list(zip(*tuples))
    converted = False
    for index, values in enumerate(by_column):
        types = set(map(type, values))
        if any(issubclass(kind, kinds) for kind in types):
            by_column[index] = tuple(map(_once_each(values, types, convert), values))
            converted = True
    # the common case: plain numbers, text and (on PostgreSQL) datetimes, all in C and the tuples as they were
    return list(zip(*by_column)) if converted else tuples


def _once_each(values: tuple, types: set[type], convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`convert`, or, for a column of plain datetimes or of plain dates, a lookup of each distinct value converted
    once: a load's rows share few instants (a day's rows, an hour's), and the conversion is most of the cost.

    Only where equal values convert alike: not Decimals (1.0 == 1.00), not mixed dates and datetimes, and not a
    datetime with `fold` set (an ambiguous wall time equals its twin of the other fold, and hashes alike).
    """
    kinds = types - {type(None)}
    if kinds == {datetime} and not any(map(attrgetter("fold"), filter(None, values))) or kinds == {date}:
        return {value: convert(value) for value in set(values)}.__getitem__
    return convert


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


def copy_upsert(cur: Any, *, table: str, names: str, key: list[str], conflict: str, tuples: list[tuple]) -> None:
    """COPY `tuples` into a staging table with the target's column types, then upsert them into `table`.

    `table` and `names` are quoted identifiers; `conflict` is the statement's `ON CONFLICT ...` clause.
    """
    _, unique = stage_like(cur, table=table, names=names, key=key)
    with cur.copy(f"COPY {STAGE} ({names}) FROM STDIN") as copy:
        for start in range(0, len(tuples), BATCH):
            # between batches: a stopped run's transaction rolls back, so none of its rows count
            stop.check()
            for row in tuples[start:start + BATCH]:
                copy.write_row(row)
    stop.check()
    upsert_staged(cur, table=table, names=names, key=key, conflict=conflict, unique=unique)


def stage_like(cur: Any, *, table: str, names: str, key: list[str], before: str = "") -> tuple[dict[str, int], bool]:
    """A temporary staging table (dropped at commit) with `table`'s types for the columns `names`: ({column: type
    oid} of the staging table, whether `key` is exactly the columns of a unique index ON CONFLICT can use).

    Call inside the load's transaction; `before` is more SQL to send first, in the same round trip (one round trip
    in all, as a plain text query: `table` and `key` are checked identifiers, safe to write as literals).
    """
    # the target's own types for just these columns, and no constraint: COPY parses each value as the target would
    keys = ", ".join(f"'{k}'" for k in sorted(key))
    cur.execute(f"{before}SET LOCAL TIME ZONE 'UTC'; DROP TABLE IF EXISTS pg_temp.{STAGE}; "
                f"CREATE TEMPORARY TABLE {STAGE} ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA; "
                f"SELECT attname, atttypid::int, ({UNIQUE_KEY.format(table=table, keys=keys)}) FROM pg_attribute"
                f" WHERE attrelid = 'pg_temp.{STAGE}'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
    found = last_result(cur).fetchall()
    types = {name: oid for name, oid, _ in found}
    # but an instant stays an instant: a timestamp column is staged as timestamptz, so a datetime's offset counts
    # and the server converts it to UTC wall time on the upsert (what binding a UTC datetime did)
    plain = [name for name, oid in types.items() if oid == TIMESTAMP]
    if plain:
        changes = ", ".join(f'ALTER COLUMN "{name}" TYPE timestamptz' for name in plain)
        cur.execute(f"ALTER TABLE {STAGE} {changes}")
        types.update(dict.fromkeys(plain, TIMESTAMPTZ))
    return types, bool(found and found[0][2])


TIMESTAMP, TIMESTAMPTZ = 1114, 1184  # type oids, the same in every PostgreSQL database
# a valid, immediate, unique index of the target on exactly the key's columns: what ON CONFLICT (key) arbitrates on
UNIQUE_KEY = ("SELECT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = '{table}'::regclass AND i.indisunique"
              " AND i.indimmediate AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL"
              " AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a"
              "      WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)) = ARRAY[{keys}]::text[])")


def last_result(cur: Any) -> Any:
    """`cur` moved to the first result with rows of its last query (several statements in one string)."""
    while cur.description is None and cur.nextset():
        pass
    return cur


def upsert_staged(cur: Any, *, table: str, names: str, key: list[str], conflict: str, unique: bool,
                  then: str = "") -> None:
    """The staged rows into `table`, as `INSERT ... ON CONFLICT (key) DO UPDATE` leaves them; `then`: more SQL to
    send after, in the last round trip.

    When the key has its unique index (`unique`), a plain INSERT is tried first, in a savepoint: it costs half the
    upsert (no speculative insertion per row), and if it succeeds no row met another, so the upsert would have
    inserted the very same rows. A key already there (or twice in the load) makes it fail at that row; it is rolled
    back and the upsert runs. When one key came twice, the last one given wins, as row-by-row upserts (and
    `last_per_key`) leave it: ON CONFLICT refuses to change a row twice in one statement.
    """
    insert = f"INSERT INTO {table} ({names}) SELECT {names} FROM {STAGE}"
    inserted = unique and not _fails(cur, f"SAVEPOINT etl_load; {insert}", UNIQUE_VIOLATION)
    upsert = f"{'' if unique else 'SAVEPOINT etl_load; '}{insert} {conflict}"
    if not inserted and _fails(cur, upsert, CARDINALITY_VIOLATION):
        keys = ", ".join(f'"{k}"' for k in key)
        # COPY appends to the new staging table in the order given, so the largest ctid of a key is its last row
        cur.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM (SELECT DISTINCT ON ({keys}) * FROM"
                    f" {STAGE} ORDER BY {keys}, ctid DESC) AS etl_last {conflict}")
    cur.execute(f"RELEASE SAVEPOINT etl_load{'; ' + then if then else ''}")


UNIQUE_VIOLATION, CARDINALITY_VIOLATION = "23505", "21000"  # SQLSTATEs


def _fails(cur: Any, sql: str, sqlstate: str) -> bool:
    """Run `sql` (after the savepoint etl_load); True when it failed with `sqlstate`, rolled back to the savepoint."""
    try:
        cur.execute(sql)
    except Exception as exc:
        # psycopg's error, or Django's wrapping it (a sink on a Django database alias)
        if (getattr(exc, "sqlstate", None) or getattr(exc.__cause__, "sqlstate", None)) != sqlstate:
            raise
        cur.execute("ROLLBACK TO SAVEPOINT etl_load")
        return True
    return False


def executemany_upsert(cur: Any, *, sql: str, tuples: list[tuple]) -> None:
    for start in range(0, len(tuples), BATCH):
        stop.check()  # between batches: a stopped run's transaction rolls back
        cur.executemany(sql, tuples[start:start + BATCH])
