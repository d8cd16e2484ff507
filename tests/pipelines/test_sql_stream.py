"""PostgreSQL to PostgreSQL with no row in Python (sql_stream.py): the source's COPY piped into the sink's staging
table, then the sink's upsert; the same rows, values and largest watermark value as the row path."""
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from scheduler.core import EtlError, LoadError, Pipeline, RetryPolicy, Window, stop
from scheduler.core.stop import CANCEL, RunStopped, StopToken
from scheduler.pipelines import sql_pool, sql_stream
from scheduler.pipelines.sql import SqlSink, SqlSource

from .conftest import PG_URL

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
COLUMNS = (
    "id BIGINT PRIMARY KEY, at TIMESTAMPTZ, wall TIMESTAMP, day DATE, amount NUMERIC(8, 2), ratio DOUBLE PRECISION,"
    " name TEXT, ok BOOLEAN, doc JSONB, raw BYTEA"
)
TRICKY = ["tab\there", "new\nline", "back\\slash", "quote'\"", "", None, "ünïcødé ✓", "\\N", "carriage\rreturn"]


@pytest.fixture
def tables(pg_table):
    """(admin connection, source table, a function making a target table); every table dropped afterwards."""
    _, base, admin = pg_table
    made = [f"{base}_src"]
    admin.execute(f'CREATE TABLE "{made[0]}" ({COLUMNS})')

    def target(columns: str = COLUMNS) -> str:
        made.append(f"{base}_{uuid.uuid4().hex[:6]}")
        admin.execute(f'CREATE TABLE "{made[-1]}" ({columns})')
        return made[-1]

    sql_pool._idle.clear()
    yield admin, made[0], target
    for name in made:
        admin.execute(f'DROP TABLE IF EXISTS "{name}"')
    for idle in sql_pool._idle.values():
        for conn in idle:
            conn.close()
    sql_pool._idle.clear()


def fill(admin, table: str, n: int = 30) -> None:
    with admin.cursor().copy(f'COPY "{table}" FROM STDIN') as copy:
        for i in range(1, n + 1):
            copy.write_row((i, T0 + timedelta(hours=i), datetime(2024, 5, 1, 9) + timedelta(hours=i),
                            (T0 + timedelta(days=i)).date(), Decimal(i) / 4, 1 / (i + 2), TRICKY[i % len(TRICKY)],
                            i % 2 == 0, psycopg.types.json.Jsonb({"n": i, "k": [i, None]}), bytes([i % 256, 0, 255])))


def rows_of(admin, table: str) -> list:
    return admin.execute(f'SELECT * FROM "{table}" ORDER BY id').fetchall()


class RowPath(SqlSink):
    """The sink's row path: every row through Python, as before there was a stream."""

    def stream_from(self, source, *, watermark_column=None):
        return None


class NoRows(SqlSink):
    """A sink that fails the test if a row reaches it through Python."""

    def load(self, rows):
        raise AssertionError("rows went through Python")


def window(hours_from: int, hours_to: int) -> Window:
    return Window(T0 + timedelta(hours=hours_from), T0 + timedelta(hours=hours_to))


def test_a_window_streams_into_the_sink_as_the_row_path_loads_it_whatever_the_sessions_speak(tables, monkeypatch):
    # both servers' sessions start in another time zone: the stream pins its own
    monkeypatch.setenv("PGTZ", "America/New_York")
    admin, src, target = tables
    fill(admin, src)
    streamed, by_rows = target(), target()
    source = SqlSource(PG_URL, table=src, watermark_column="at", window=window(3, 20))
    result = Pipeline(source, None, NoRows(PG_URL, table=streamed, key="id"), watermark_column="at").run()
    expected = Pipeline(source, None, RowPath(PG_URL, table=by_rows, key="id"), watermark_column="at").run()
    assert (result.rows, result.max_value) == (expected.rows, expected.max_value) == (17, T0 + timedelta(hours=19))
    assert rows_of(admin, streamed) == rows_of(admin, by_rows)
    assert [r[0] for r in rows_of(admin, streamed)] == list(range(3, 20))
    assert {r[6] for r in rows_of(admin, streamed)} == set(TRICKY), "text comes through COPY's escaping unchanged"
    assert all(conn.info.transaction_status == 0 for idle in sql_pool._idle.values() for conn in idle)


def test_the_largest_integer_mark_comes_back_as_the_source_has_it(tables):
    admin, src, target = tables
    fill(admin, src)
    streamed = target("id INTEGER PRIMARY KEY, at TIMESTAMPTZ, wall TIMESTAMP, day DATE, amount NUMERIC, ratio REAL,"
                      " name TEXT, ok BOOLEAN, doc JSON, raw BYTEA")
    source = SqlSource(PG_URL, table=src, watermark_column="id", window=Window(10, 25))
    result = Pipeline(source, None, NoRows(PG_URL, table=streamed, key="id"), watermark_column="id").run()
    assert (result.rows, result.max_value) == (15, 25)
    # a timestamp staged as timestamptz reads back as the source's own timestamp
    wall = Pipeline(
        SqlSource(PG_URL, table=src, watermark_column="wall", window=Window(None, datetime(2024, 5, 1, 15))),
        None,
        NoRows(PG_URL, table=streamed, key="id"),
        watermark_column="wall",
    ).run()
    assert (wall.rows, wall.max_value) == (5, datetime(2024, 5, 1, 14))


def test_a_key_given_twice_keeps_the_last_row_given_and_existing_rows_are_updated(tables):
    admin, src, target = tables
    fill(admin, src, n=5)
    sink = target()
    admin.execute(f"""INSERT INTO "{sink}" (id, name) VALUES (2, 'old'), (99, 'kept')""")
    query = (f'SELECT id, name FROM (SELECT id, name, 1 AS o FROM "{src}" UNION ALL '
             f"SELECT 3, 'last of 3', 2) AS q ORDER BY o, id")
    result = Pipeline(SqlSource(PG_URL, query=query), None, NoRows(PG_URL, table=sink, key="id")).run()
    assert result.rows == 6
    assert admin.execute(f'SELECT id, name FROM "{sink}" ORDER BY id').fetchall() == [
        (1, TRICKY[1]), (2, TRICKY[2]), (3, "last of 3"), (4, TRICKY[4]), (5, TRICKY[5]), (99, "kept")]


def test_a_key_without_a_unique_index_fails_as_the_upsert_does_and_loads_nothing(tables):
    admin, src, target = tables
    fill(admin, src, n=5)
    sink = target("id BIGINT, name TEXT")
    with pytest.raises(LoadError, match="no unique or exclusion constraint"):
        Pipeline(SqlSource(PG_URL, table=src, columns=["id", "name"]), None, NoRows(PG_URL, table=sink, key="id")).run()
    assert rows_of(admin, sink) == []
    # the row path says the same
    with pytest.raises(EtlError, match="no unique or exclusion constraint"):
        Pipeline(
            SqlSource(PG_URL, table=src, columns=["id", "name"]), None, RowPath(PG_URL, table=sink, key="id")
        ).run()


@pytest.mark.parametrize("case", ["no such table", "create", "other columns", "mark as text", "sqlite sink"])
def test_the_rows_take_the_usual_way_when_the_stream_could_differ(tables, case, tmp_path):
    admin, src, target = tables
    fill(admin, src, n=4)
    sink = {"no such table": lambda: SqlSink(PG_URL, table=f"{src}_missing", key="id"),
            "create": lambda: SqlSink(PG_URL, table=target(), key="id", create=True),
            "other columns": lambda: SqlSink(PG_URL, table=target(), key="id", columns=["id"]),
            "mark as text": lambda: SqlSink(PG_URL, table=target("id TEXT PRIMARY KEY, name TEXT"), key="id"),
            "sqlite sink": lambda: SqlSink(f"sqlite:///{tmp_path}/t.db", table="t", key="id", create=True)}[case]()
    source = SqlSource(PG_URL, table=src, columns=["id", "name"], watermark_column="id", window=Window(0, 10))
    assert sink.stream_from(source, watermark_column="id") is None
    if case == "no such table":
        with pytest.raises(EtlError, match="does not exist"):
            Pipeline(source, None, sink, watermark_column="id").run()
    else:
        assert Pipeline(source, None, sink, watermark_column="id").run().rows == 4


def test_an_empty_window_streams_nothing_and_asks_the_source_how_far_an_integer_mark_may_move(tables):
    admin, src, target = tables
    fill(admin, src, n=5)
    admin.execute(f"""INSERT INTO "{src}" (id, name) VALUES (40, 'far')""")
    sink = target()
    result = Pipeline(SqlSource(PG_URL, table=src, watermark_column="id", window=Window(5, 10)), None,
                      NoRows(PG_URL, table=sink, key="id"), watermark_column="id").run()
    assert (result.rows, result.max_value) == (0, 39)


def test_a_failed_read_is_retried_as_an_extract_a_value_the_target_refuses_is_a_load_error_never_retried(tables):
    admin, src, target = tables
    fill(admin, src, n=6)
    sink = target()
    retries: list = []

    def pipeline_from(query: str) -> Pipeline:
        pipeline = Pipeline(SqlSource(PG_URL, query=query), None, NoRows(PG_URL, table=sink, key="id"),
                            RetryPolicy(max_attempts=2), sleep=lambda s: None)
        pipeline.on_retry = lambda attempt, exc, wait: retries.append(str(exc))
        return pipeline

    # the source fails at its fourth row, after the stream began
    with pytest.raises(EtlError, match="division by zero"):
        pipeline_from(f'SELECT id, 1 / (id - 4) AS ratio FROM "{src}" ORDER BY id').run()
    assert len(retries) == 1 and "SqlSource" in retries[0]
    with pytest.raises(LoadError, match="invalid input syntax for type date"):
        pipeline_from(f"SELECT id, 'not a day' AS day FROM \"{src}\"").run()
    assert len(retries) == 1, "a load error is not retried"
    assert rows_of(admin, sink) == []


def test_a_stream_stopped_midway_leaves_nothing_and_gives_its_connections_back_idle(tables, monkeypatch):
    admin, src, target = tables
    fill(admin, src, n=3000)
    sink = target()
    token = StopToken()
    real = sql_stream.pipe_blocks

    def stopping(out, into):
        blocks = iter(out)
        for _ in range(sql_stream.STOP_EVERY):
            into.write(next(blocks))
        token.request(CANCEL, "cancelled by a person")  # seen at the next check, with the COPY half sent
        real(blocks, into)

    monkeypatch.setattr(SqlSink, "pipe", staticmethod(stopping))
    with stop.activate(token), pytest.raises(RunStopped):
        Pipeline(SqlSource(PG_URL, table=src), None, NoRows(PG_URL, table=sink, key="id")).run()
    assert rows_of(admin, sink) == []
    idle = [conn for conns in sql_pool._idle.values() for conn in conns]
    assert len(idle) == 2 and all(conn.info.transaction_status == 0 for conn in idle)
    pids = [conn.info.backend_pid for conn in idle]
    assert admin.execute("SELECT array_agg(DISTINCT state) FROM pg_stat_activity WHERE pid = ANY(%s)",
                         [pids]).fetchone() == (["idle"],), "neither COPY goes on on the server"
