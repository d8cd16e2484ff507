"""SqlSink's fast paths (sql_load.py): COPY through a staging table on PostgreSQL, values by column on SQLite."""
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from scheduler.core import EtlError, stop
from scheduler.core.stop import CANCEL, RunStopped, StopToken
from scheduler.pipelines import sql_load
from scheduler.pipelines.sql import SqlSink

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
NEW_YORK = timezone(timedelta(hours=-4))  # 2024-05-01 is in daylight saving time there


# PostgreSQL: COPY into a staging table, then one INSERT ... ON CONFLICT


def test_postgres_sink_keeps_the_last_of_two_rows_with_one_key_in_a_load(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, name TEXT)')
    rows = [{"id": 1, "name": "first"}, {"id": 2, "name": "b"}, {"id": 1, "name": "last"}]
    assert SqlSink(url, table=table, key="id").load(rows) == 3
    assert conn.execute(f'SELECT id, name FROM "{table}" ORDER BY id').fetchall() == [(1, "last"), (2, "b")]


def test_postgres_sink_upserts_many_rows_over_existing_ones(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id BIGINT PRIMARY KEY, n INTEGER, at TIMESTAMPTZ, extra TEXT)')
    conn.execute(f"INSERT INTO \"{table}\" VALUES (5, -1, NULL, 'kept'), (50000, -1, NULL, 'kept')")
    sink = SqlSink(url, table=table, key="id", columns=["id", "n", "at"])
    rows = [{"id": i, "n": i * 2, "at": T0 + timedelta(seconds=i)} for i in range(1, 12_001)]  # 3 COPY batches
    assert sink.load(rows) == 12_000
    assert conn.execute(f'SELECT count(*), sum(n) FROM "{table}"').fetchone() == (12_001, 2 * 12_000 * 12_001 // 2 - 1)
    assert conn.execute(f'SELECT n, at, extra FROM "{table}" WHERE id = 5').fetchone() == (
        10,
        T0 + timedelta(seconds=5),
        "kept",
    )


def test_postgres_sink_stores_instants_whatever_the_session_time_zone(pg_table, monkeypatch):
    """Aware datetimes keep their instant, naive ones are UTC; a timestamp column gets the UTC wall time."""
    monkeypatch.setenv("PGTZ", "America/New_York")  # the sink's own connection starts in New York time
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, aware TIMESTAMPTZ, naive TIMESTAMPTZ, '
                 f'wall TIMESTAMP)')
    local = T0.astimezone(NEW_YORK)  # 08:00-04:00, the same instant as 12:00Z
    SqlSink(url, table=table, key="id").load([{"id": 1, "aware": local, "naive": T0.replace(tzinfo=None),
                                               "wall": local}])
    assert conn.execute(f'SELECT aware, naive, wall FROM "{table}"').fetchone() == (T0, T0, datetime(2024, 5, 1, 12))


def test_postgres_sink_writes_json_values_as_text_and_missing_columns_as_null(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, doc TEXT, amount NUMERIC, note TEXT)')
    rows = [{"id": 1, "doc": {"b": 1, "a": [1, 2]}, "amount": Decimal("1.10"), "note": "x"},
            {"id": 2, "doc": None, "amount": Decimal("2")}]
    SqlSink(url, table=table, key="id").load(rows)
    assert conn.execute(f'SELECT id, doc, amount, note FROM "{table}" ORDER BY id').fetchall() == [
        (1, '{"a": [1, 2], "b": 1}', Decimal("1.10"), "x"), (2, None, Decimal("2"), None)]


def test_postgres_sink_loads_all_or_nothing(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, n INTEGER)')
    conn.execute(f'INSERT INTO "{table}" VALUES (1, 1)')
    rows = [{"id": i, "n": i} for i in range(2, 9000)] + [{"id": 9000, "n": "not a number"}]
    with pytest.raises(EtlError, match="invalid input syntax for type integer"):
        SqlSink(url, table=table, key="id").load(rows)
    assert conn.execute(f'SELECT id, n FROM "{table}"').fetchall() == [(1, 1)]


def test_a_postgres_load_stopped_between_copy_batches_leaves_nothing(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY)')
    token = StopToken()

    class StopAfterFirstBatch(list):
        """The rows; the run is asked to stop once COPY has taken the first batch."""

        def __getitem__(self, index):
            if isinstance(index, slice) and index.start == sql_load.BATCH:
                token.request(CANCEL, "cancelled by a person")
            return super().__getitem__(index)

    original = sql_load.last_per_key
    with stop.activate(token), pytest.MonkeyPatch.context() as patch:
        patch.setattr("scheduler.pipelines.sql.last_per_key", lambda t, k: StopAfterFirstBatch(original(t, k)))
        with pytest.raises(RunStopped):
            SqlSink(url, table=table, key="id").load([{"id": i} for i in range(1, 2 * sql_load.BATCH + 1)])
    assert conn.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (0,)
    assert conn.execute("SELECT to_regclass('pg_temp.etl_stage')").fetchone() == (None,)


def test_postgres_sink_refuses_a_row_without_its_key_naming_the_row(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, n INTEGER)')
    with pytest.raises(EtlError, match="row 2 has no value for key column 'id'"):
        SqlSink(url, table=table, key="id").load([{"id": 1, "n": 1}, {"id": 2, "n": 2}, {"id": None, "n": 3}])
    assert conn.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (0,)


# SQLite: executemany of values built by column


def test_sqlite_sink_converts_only_what_sqlite_cannot_store(sqlite_db):
    """Datetimes become canonical UTC text, dates ISO text, a Decimal its text (stored in the REAL column the sink
    created), a dict JSON text; numbers and text go as they are."""
    url, path = sqlite_db
    rows = [{"id": 1, "at": T0.astimezone(NEW_YORK), "day": T0.date(), "price": Decimal("1.5"), "doc": {"k": 1},
             "n": 3, "x": 0.5, "name": "a"},
            {"id": 2, "n": 4}]  # lacks most columns: NULL there
    SqlSink(url, table="t", key="id", create=True).load(rows)
    with sqlite3.connect(path) as conn:
        got = conn.execute("SELECT id, at, day, price, doc, n, x, name FROM t ORDER BY id").fetchall()
    assert got == [(1, "2024-05-01T12:00:00.000000+00:00", "2024-05-01", 1.5, '{"k": 1}', 3, 0.5, "a"),
                   (2, None, None, None, None, 4, None, None)]


def test_sqlite_sink_upserts_more_rows_than_a_batch_and_the_last_of_a_key_wins(sqlite_db):
    url, path = sqlite_db
    rows = [{"id": i % 7000, "n": i} for i in range(12_000)]
    assert SqlSink(url, table="t", key="id", create=True).load(rows) == 12_000
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*), max(n) FROM t").fetchone() == (7000, 11_999)
        assert conn.execute("SELECT n FROM t WHERE id = 1").fetchone() == (7001,)


def test_value_rows_leaves_plain_values_untouched_and_converts_a_column_only_where_needed():
    calls = []

    def convert(value):
        calls.append(value)
        return f"<{value}>"

    rows = [{"a": 1, "b": "x", "c": [1]}, {"a": 2, "b": "y", "c": 5}]
    assert sql_load.value_rows(rows, ["a", "b"], convert, "postgresql") == [(1, "x"), (2, "y")]
    assert calls == []
    assert sql_load.value_rows(rows, ["a", "c"], convert, "postgresql") == [(1, "<[1]>"), (2, "<5>")]
    assert calls == [[1], 5]  # the list's column, each of its values; never column a



def test_value_rows_converts_each_distinct_instant_or_date_of_a_column_once():
    calls = []

    def convert(value):
        calls.append(value)
        return None if value is None else f"<{value.isoformat()}>"

    hours = [T0 + timedelta(hours=i % 3) for i in range(30)]
    rows = [{"at": at, "day": at.date() if i % 2 else None} for i, at in enumerate(hours)]
    got = sql_load.value_rows(rows, ["at", "day"], convert, "sqlite")
    assert got == [(f"<{at.isoformat()}>", f"<{at.date().isoformat()}>" if i % 2 else None)
                   for i, at in enumerate(hours)]
    assert sorted(map(str, calls)) == sorted(map(str, [*set(hours), T0.date(), None]))  # 3 + 1 + None, not 60


def test_sqlite_sink_keeps_apart_an_ambiguous_wall_time_and_its_twin_of_the_other_fold(sqlite_db):
    """01:30 on 2024-11-03 happens twice in New York: fold 0 is 05:30 UTC, fold 1 06:30 UTC. The two datetimes are
    equal and hash alike, so converting each distinct value once must not take one for the other."""
    url, path = sqlite_db
    first = datetime(2024, 11, 3, 1, 30, tzinfo=ZoneInfo("America/New_York"))
    rows = [{"id": 1, "at": first}, {"id": 2, "at": first.replace(fold=1)}, {"id": 3, "at": first}]
    SqlSink(url, table="t", key="id", create=True).load(rows)
    with sqlite3.connect(path) as conn:
        got = conn.execute("SELECT id, at FROM t ORDER BY id").fetchall()
    assert got == [(1, "2024-11-03T05:30:00.000000+00:00"), (2, "2024-11-03T06:30:00.000000+00:00"),
                   (3, "2024-11-03T05:30:00.000000+00:00")]


def test_sqlite_sink_converts_a_column_of_dates_and_datetimes_value_by_value(sqlite_db):
    """Midnight as a datetime and the same day as a date are stored differently, whichever comes first."""
    url, path = sqlite_db
    rows = [{"id": 1, "on": datetime(2024, 5, 1)}, {"id": 2, "on": datetime(2024, 5, 1).date()},
            {"id": 3, "on": datetime(2024, 5, 1)}]
    SqlSink(url, table="t", key="id", create=True).load(rows)
    with sqlite3.connect(path) as conn:
        got = conn.execute("SELECT id, \"on\" FROM t ORDER BY id").fetchall()
    assert got == [(1, "2024-05-01T00:00:00.000000+00:00"), (2, "2024-05-01"), (3, "2024-05-01T00:00:00.000000+00:00")]

@pytest.mark.django_db
def test_a_postgres_sink_on_a_django_alias_inserts_then_upserts_inside_the_callers_transaction():
    """The COPY path through Django's own connection: the insert tried first, then the upsert over what is there."""
    if connection.vendor != "postgresql":
        pytest.skip("the default database is not PostgreSQL")
    table = "etl_alias_load"
    with connection.cursor() as cur:
        cur.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, name TEXT)')
    sink = SqlSink("default", table=table, key="id")
    assert sink.load([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]) == 2
    assert sink.load([{"id": 2, "name": "B"}, {"id": 3, "name": "c"}]) == 2
    with connection.cursor() as cur:
        cur.execute(f'SELECT id, name FROM "{table}" ORDER BY id')
        assert cur.fetchall() == [(1, "a"), (2, "B"), (3, "c")]
