"""The suite restarts and flushes only servers it started itself, never the machine's."""
from __future__ import annotations

import re
import socket
from pathlib import Path

import psycopg
import pytest

from tests.throwaway import ThrowawayPostgres, Unavailable

TESTS = Path(__file__).resolve().parent
# what restarting, stopping or wiping a machine's service looks like from a test
FORBIDDEN = re.compile(r"pg_ctlcluster|systemctl|service postgresql|flushdb|flushall|shutdown nosave|redis-cli",
                       re.IGNORECASE)


def test_no_test_restarts_stops_or_flushes_a_service_by_hand():
    offenders = []
    for path in TESTS.rglob("*.py"):
        if path in (Path(__file__).resolve(), TESTS / "throwaway.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FORBIDDEN.search(line):
                offenders.append(f"{path.relative_to(TESTS.parent)}:{number}: {line.strip()}")
    assert not offenders, "use tests/throwaway.py instead:\n" + "\n".join(offenders)


@pytest.fixture
def postgres():
    try:
        server = ThrowawayPostgres()
    except Unavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server.start()
    finally:
        server.stop()
    assert not server.dir.exists(), "the data directory is removed"


def _started_at(url: str):
    with psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=10) as conn:
        return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]


def test_a_throwaway_postgresql_runs_on_its_own_port_and_restarts(postgres):
    assert postgres.port not in (0, 5432)
    before = _started_at(postgres.url)
    postgres.restart()
    assert _started_at(postgres.url) > before


def test_a_throwaway_redis_runs_on_its_own_port_and_a_restart_empties_it(throwaway_redis):
    import redis

    assert throwaway_redis.port != 6379
    client = redis.Redis.from_url(throwaway_redis.url)
    client.set("k", "v")
    throwaway_redis.restart()
    assert client.get("k") is None
    with socket.create_connection(("127.0.0.1", throwaway_redis.port), timeout=5):
        pass


def _ports(monkeypatch, worker: str, database_url: str, count: int = 5) -> list[int]:
    from tests import throwaway

    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setattr(throwaway, "_next_port", [])
    return [throwaway.free_port() for _ in range(count)]


def test_each_xdist_worker_and_each_database_pass_hands_out_ports_of_its_own_block(monkeypatch):
    """Two workers, or the SQLite and PostgreSQL passes side by side, never hand out the same port; a worker never
    hands out a port twice running (one handed out may not be bound yet), nor one in the kernel's ephemeral range."""
    sqlite_0 = _ports(monkeypatch, "gw0", "sqlite:///x.sqlite3")
    sqlite_1 = _ports(monkeypatch, "gw1", "sqlite:///x.sqlite3")
    postgres_0 = _ports(monkeypatch, "gw0", "postgres://postgres@127.0.0.1:5432/test")
    blocks = [{p // 400 for p in ports} for ports in (sqlite_0, sqlite_1, postgres_0)]
    assert all(len(ports) == len(set(ports)) == 5 for ports in (sqlite_0, sqlite_1, postgres_0))
    assert all(len(block) == 1 for block in blocks) and len(set.union(*blocks)) == 3
    assert all(20000 <= p < 32768 for p in sqlite_0 + sqlite_1 + postgres_0)
    for port in sqlite_0:  # each one is free to bind
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
