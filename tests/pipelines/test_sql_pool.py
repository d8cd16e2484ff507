"""PostgreSQL connections kept between windows (sql_pool.py): reused, reset, replaced when dead."""
import psycopg
import pytest

from scheduler.pipelines import sql_pool
from scheduler.pipelines.sql import SqlSink, SqlSource, connect


@pytest.fixture
def url(pg_table):
    url, _, _ = pg_table
    sql_pool._idle.clear()
    yield url
    for idle in sql_pool._idle.values():
        for conn in idle:
            conn.close()
    sql_pool._idle.clear()


def _pid_and_timeout(db):
    return db.conn.execute("SELECT pg_backend_pid(), current_setting('statement_timeout')").fetchone()


def test_a_connection_given_back_is_reused_with_its_session_reset(url):
    db = connect(url)
    pid, default = _pid_and_timeout(db)
    db.conn.execute("SET statement_timeout = 1234")
    db.conn.execute("CREATE TEMPORARY TABLE leftover (n INTEGER)")
    db.close()
    again = connect(url)
    assert _pid_and_timeout(again) == (pid, default)
    assert again.conn.execute("SELECT to_regclass('pg_temp.leftover')").fetchone() == (None,)
    again.close()


def test_a_connection_the_server_ended_meanwhile_is_replaced(url, pg_table):
    _, _, admin = pg_table
    db = connect(url)
    pid, _ = _pid_and_timeout(db)
    db.close()
    admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    again = connect(url)
    assert _pid_and_timeout(again)[0] != pid
    again.close()


def test_a_connection_left_in_a_transaction_is_closed_not_kept(url):
    db = connect(url)
    db.conn.execute("BEGIN")
    db.close()
    assert db.conn.closed and not any(sql_pool._idle.values())


def test_a_source_and_a_sink_reuse_one_connection_window_after_window(url, pg_table, monkeypatch):
    _, table, admin = pg_table
    admin.execute(f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY)')
    opened = []
    real = psycopg.connect
    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: opened.append(a) or real(*a, **k))
    for start in range(0, 50, 10):
        SqlSink(url, table=table, key="id").load([{"id": i} for i in range(start, start + 10)])
        assert len(list(SqlSource(url, table=table).extract())) == start + 10
    assert len(opened) == 1
