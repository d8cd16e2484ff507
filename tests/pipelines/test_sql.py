import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core import ConfigError, EtlError, Window
from scheduler.pipelines.sql import SqlSink, SqlSource, redact
from scheduler.pipelines.values import iso_utc

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def fill(path, rows):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, seq INTEGER, at TEXT, name TEXT)")
    conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


@pytest.fixture
def events(sqlite_db):
    url, path = sqlite_db
    fill(path, [(i, i * 10, iso_utc(T0 + timedelta(hours=i)), f"e{i}") for i in range(1, 11)])
    return url


def test_sql_source_yields_every_row_as_a_dict_without_a_window(events):
    rows = list(SqlSource(events, table="events").extract())
    assert len(rows) == 10
    assert rows[0] == {"id": 1, "seq": 10, "at": iso_utc(T0 + timedelta(hours=1)), "name": "e1"}


def test_sql_source_reads_only_rows_inside_the_window(events):
    window = Window(T0 + timedelta(hours=3), T0 + timedelta(hours=6))
    rows = list(SqlSource(events, table="events", watermark_column="at", window=window).extract())
    # On the calendar, [low, high): the row at low is included, the row at high is the next window's.
    assert [r["id"] for r in rows] == [3, 4, 5]


def test_sql_source_compares_windows_in_other_time_zones_as_instants(events):
    plus2 = timezone(timedelta(hours=2))
    window = Window((T0 + timedelta(hours=3)).astimezone(plus2), (T0 + timedelta(hours=4)).astimezone(plus2))
    rows = list(SqlSource(events, table="events", watermark_column="at", window=window).extract())
    assert [r["id"] for r in rows] == [3]


def test_sql_source_integer_window_with_an_open_high_end(events):
    rows = list(SqlSource(events, table="events", watermark_column="seq", window=Window(70, None)).extract())
    assert [r["seq"] for r in rows] == [80, 90, 100]


def test_sql_source_selects_only_the_named_columns_in_batches(events):
    rows = list(SqlSource(events, table="events", columns=["id", "name"], batch_size=3).extract())
    assert rows[-1] == {"id": 10, "name": "e10"}
    assert len(rows) == 10


def test_sql_source_runs_a_query_with_params_and_a_window(events):
    source = SqlSource(
        events,
        query="SELECT id, seq FROM events WHERE name != ?",
        params=["e5"],
        watermark_column="seq",
        window=Window(30, 60),
    )
    assert [r["id"] for r in source.extract()] == [4, 6]


def test_sql_source_query_with_named_params_and_a_window(events):
    source = SqlSource(
        events,
        query="SELECT id, seq FROM events WHERE name != :skip",
        params={"skip": "e4"},
        watermark_column="seq",
        window=Window(30, 50),
    )
    assert sorted(r["id"] for r in source.extract()) == [5]


def test_sql_source_never_interpolates_values(events):
    # A hostile value is only ever a bind parameter: it matches nothing and drops nothing.
    source = SqlSource(events, query="SELECT * FROM events WHERE name = ?", params=["x'; DROP TABLE events; --"])
    assert list(source.extract()) == []
    assert len(list(SqlSource(events, table="events").extract())) == 10


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"table": "events; drop table events"}, "table"),
        ({"table": "events", "watermark_column": "at --", "window": Window(1, 2)}, "watermark_column"),
        ({"table": "events", "window": Window(1, 2)}, "watermark_column"),
        ({}, "table"),
        ({"table": "events", "query": "select 1"}, "table"),
        ({"table": "events", "columns": ["id", "name)"]}, "columns"),
        ({"table": "events", "batch_size": 0}, "batch_size"),
        ({"table": "events", "params": [1]}, "params"),
        ({"table": "events", "watermark_column": "at", "window": (1, 2)}, "window"),
        ({"table": "events", "watermark_column": "at", "window": Window("a", "b")}, "window"),
    ],
)
def test_sql_source_refuses_bad_configuration_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        SqlSource("sqlite:///x.db", **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize("db", ["", "mysql://u@h/db", "not an alias!", None])
def test_sql_source_and_sink_refuse_an_unsupported_db(db):
    with pytest.raises(ConfigError) as err:
        SqlSource(db, table="t")
    assert err.value.field == "db"
    with pytest.raises(ConfigError):
        SqlSink(db, table="t", key="id")


def test_sql_source_on_a_missing_sqlite_file_fails_without_creating_it(tmp_path):
    path = tmp_path / "missing.db"
    with pytest.raises(EtlError, match="unable to open database file\nwhile opening the SQLite database"):
        list(SqlSource(f"sqlite:///{path}", table="t").extract())
    assert not path.exists()


def test_sql_source_on_a_missing_table_raises_an_etl_error(sqlite_db):
    with pytest.raises(EtlError, match="no such table"):
        list(SqlSource(sqlite_db[0], table="nope").extract())


def test_sql_sink_creates_the_table_and_upserts(sqlite_db):
    url, path = sqlite_db
    sink = SqlSink(url, table="dim", key="id", create=True)
    assert sink.load([{"id": 1, "name": "a", "score": 1.5, "at": T0}, {"id": 2, "name": "b", "score": None}]) == 2
    conn = sqlite3.connect(path)
    types = {row[1]: row[2] for row in conn.execute("PRAGMA table_info(dim)")}
    assert types == {"id": "INTEGER", "name": "TEXT", "score": "REAL", "at": "TEXT"}
    assert conn.execute("SELECT at FROM dim WHERE id = 1").fetchone() == (iso_utc(T0),)


def test_sql_sink_upserts_on_key_so_a_rerun_does_not_duplicate(sqlite_db):
    url, path = sqlite_db
    sink = SqlSink(url, table="dim", key="id", create=True)
    rows = [{"id": i, "name": f"n{i}"} for i in range(100)]
    assert sink.load(rows) == 100
    assert sink.load(rows) == 100
    assert sink.load([{"id": 5, "name": "changed"}]) == 1
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM dim").fetchone() == (100,)
    assert conn.execute("SELECT name FROM dim WHERE id = 5").fetchone() == ("changed",)


def test_sql_sink_upserts_on_a_composite_key(sqlite_db):
    url, path = sqlite_db
    sink = SqlSink(url, table="rev", key=["country", "day"], create=True)
    sink.load(
        [{"country": "DE", "day": "2024-05-01", "amount": 1.0}, {"country": "FR", "day": "2024-05-01", "amount": 2.0}]
    )
    sink.load([{"country": "DE", "day": "2024-05-01", "amount": 3.0}])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT country, amount FROM rev ORDER BY country").fetchall() == [("DE", 3.0), ("FR", 2.0)]


def test_sql_sink_loads_all_or_nothing(sqlite_db):
    url, path = sqlite_db
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    conn.commit()
    sink = SqlSink(url, table="t", key="id")
    with pytest.raises(EtlError, match="NOT NULL"):
        sink.load([{"id": 1, "v": 1}, {"id": 2, "v": None}])
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)


def test_sql_sink_with_only_key_columns_ignores_duplicates(sqlite_db):
    url, path = sqlite_db
    sink = SqlSink(url, table="ids", key="id", create=True)
    assert sink.load([{"id": 1}, {"id": 1}]) == 2
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM ids").fetchone() == (1,)


def test_sql_sink_refuses_rows_without_the_key(sqlite_db):
    sink = SqlSink(sqlite_db[0], table="dim", key="id", create=True)
    with pytest.raises(EtlError, match="key column 'id'"):
        sink.load([{"name": "no id"}])
    with pytest.raises(EtlError, match="row 1 has no value for key column 'id'"):
        sink.load([{"id": 1}, {"id": None}])


def test_sql_sink_refuses_a_row_key_that_is_not_an_identifier(sqlite_db):
    sink = SqlSink(sqlite_db[0], table="dim", key="id", create=True)
    with pytest.raises(ConfigError) as err:
        sink.load([{"id": 1, 'x" text); drop table dim; --': 1}])
    assert err.value.field == "columns"


def test_sql_sink_with_no_rows_does_nothing(tmp_path):
    path = tmp_path / "never.db"
    assert SqlSink(f"sqlite:///{path}", table="t", key="id", create=True).load([]) == 0
    assert not path.exists()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"table": "t t", "key": "id"}, "table"),
        ({"table": "t", "key": []}, "key"),
        ({"table": "t", "key": "id", "columns": ["name"]}, "key"),
        ({"table": "t", "key": ["id", "id"]}, "key"),
    ],
)
def test_sql_sink_refuses_bad_configuration_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        SqlSink("sqlite:///x.db", **kwargs)
    assert err.value.field == field


def test_sql_sink_only_writes_the_configured_columns(sqlite_db):
    url, path = sqlite_db
    SqlSink(url, table="t", key="id", columns=["id", "a"], create=True).load([{"id": 1, "a": 2, "b": 3}])
    assert [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(t)")] == ["id", "a"]


def test_redact_hides_the_password_in_messages():
    assert redact("postgres://u:secret@h:5432/db") == "postgres://u:***@h:5432/db"
    assert "secret" not in repr(SqlSource("postgres://u:secret@h/db", table="t"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stamps=st.lists(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)), max_size=30),
    low=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    span=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=20000)),
    offset=st.integers(min_value=-12, max_value=14),
)
def test_sql_source_window_on_sqlite_text_matches_the_instants(tmp_path_factory, stamps, low, span, offset):
    # Stored as canonical UTC text; bounds in any zone; the text comparison
    # SQLite does must agree with comparing the datetimes themselves.
    path = tmp_path_factory.mktemp("prop") / "p.db"
    aware = [s.replace(tzinfo=UTC) for s in stamps]
    fill(path, [(i, 0, iso_utc(s), "") for i, s in enumerate(aware)])
    zone = timezone(timedelta(hours=offset))
    window = Window(low.replace(tzinfo=UTC).astimezone(zone), (low.replace(tzinfo=UTC) + span).astimezone(zone))
    got = sorted(
        r["id"] for r in SqlSource(f"sqlite:///{path}", table="events", watermark_column="at", window=window).extract()
    )
    assert got == sorted(i for i, s in enumerate(aware) if window.low <= s < window.high)


# PostgreSQL, URL mode


def test_postgres_sink_creates_a_typed_table_and_upserts(pg_table):
    url, table, conn = pg_table
    sink = SqlSink(url, table=table, key="id", create=True)
    rows = [{"id": i, "name": f"n{i}", "amount": i / 2, "at": T0 + timedelta(hours=i)} for i in range(1, 11)]
    assert sink.load(rows) == 10
    assert sink.load(rows) == 10
    assert sink.load([{"id": 3, "name": "changed", "amount": 0.0, "at": T0}]) == 1
    assert conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone() == (10,)
    assert conn.execute(f'SELECT name FROM "{table}" WHERE id = 3').fetchone() == ("changed",)
    types = dict(
        conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s", [table]
        ).fetchall()
    )
    assert types == {
        "id": "bigint",
        "name": "text",
        "amount": "double precision",
        "at": "timestamp with time zone",
    }


def test_postgres_source_reads_only_rows_inside_a_datetime_window(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL)')
    with conn.cursor() as cur:
        cur.executemany(f'INSERT INTO "{table}" VALUES (%s, %s)', [(i, T0 + timedelta(hours=i)) for i in range(1, 11)])
    window = Window(T0 + timedelta(hours=3), T0 + timedelta(hours=6))
    rows = list(SqlSource(url, table=table, watermark_column="at", window=window, batch_size=2).extract())
    assert [r["id"] for r in rows] == [3, 4, 5]
    assert rows[0]["at"] == T0 + timedelta(hours=3)


def test_postgres_source_integer_window_with_an_open_high_end(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY)')
    with conn.cursor() as cur:
        cur.executemany(f'INSERT INTO "{table}" VALUES (%s)', [(i,) for i in range(1, 11)])
    rows = list(SqlSource(url, table=table, watermark_column="id", window=Window(7, None)).extract())
    assert [r["id"] for r in rows] == [8, 9, 10]


def test_postgres_source_query_with_params_and_window(pg_table):
    url, table, conn = pg_table
    conn.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY, kind TEXT)')
    with conn.cursor() as cur:
        cur.executemany(f'INSERT INTO "{table}" VALUES (%s, %s)', [(i, "a" if i % 2 else "b") for i in range(1, 11)])
    source = SqlSource(
        url, query=f'SELECT id FROM "{table}" WHERE kind = %s', params=["a"], watermark_column="id", window=Window(2, 7)
    )
    assert sorted(r["id"] for r in source.extract()) == [3, 5, 7]


def test_postgres_unreachable_server_is_an_etl_error_without_the_password():
    with pytest.raises(EtlError) as err:
        list(SqlSource("postgres://u:secret@127.0.0.1:1/db", table="t").extract())
    assert "secret" not in str(err.value)
    cause, context = str(err.value).split("\n")[0], str(err.value).split("\n")[-1]
    assert "failed" in cause and context == "while connecting to postgres://u:***@127.0.0.1:1/db"
