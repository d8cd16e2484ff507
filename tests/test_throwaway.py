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
