import sqlite3
import uuid

import pytest

from scheduler.pipelines import registry

PG_URL = "postgres://postgres@127.0.0.1:5432/test"


@pytest.fixture
def clean_registry():
    """An empty registry for the test; what was registered before comes back after."""
    saved = (dict(registry._pipelines), dict(registry._workflows), registry._discovered)
    registry._reset_for_tests()
    yield registry
    registry._reset_for_tests()
    registry._pipelines.update(saved[0])
    registry._workflows.update(saved[1])
    registry._discovered = saved[2]


@pytest.fixture
def sqlite_db(tmp_path):
    """(url, path) of an empty SQLite file."""
    path = tmp_path / "db.sqlite3"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}", path


@pytest.fixture
def pg_table():
    """(url, table name) of a uniquely named PostgreSQL table, dropped afterwards."""
    psycopg = pytest.importorskip("psycopg")
    try:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {PG_URL} is unreachable: {exc}")
    table = f"etl_test_{uuid.uuid4().hex[:12]}"
    try:
        yield PG_URL, table, conn
    finally:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.close()
