"""PostgreSQL restarted with runs in flight, Redis restarted with tasks queued: the cluster recovers.

Each test starts its own throwaway PostgreSQL (initdb in a temporary directory,
a free port) and Redis (a free port) and restarts those: the machine's own
services are never touched. They run on either pass (the test's own database
is left alone); they skip with a reason when initdb or redis-server is missing.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from scheduler.models import Run, RunStatus
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import start_cluster, stop_cluster, wait_until
from tests.throwaway import ThrowawayPostgres, ThrowawayRedis, Unavailable, default_database

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MODULES = "scheduler.pipelines.demo,tests.reliability.pipelines"


@pytest.fixture
def servers():
    """A throwaway PostgreSQL (Django's `default` for the test) and a throwaway Redis."""
    started = []
    try:
        try:
            postgres, redis = ThrowawayPostgres(), ThrowawayRedis()
        except Unavailable as exc:
            pytest.skip(f"needs a throwaway PostgreSQL and Redis: {exc}")
        started += [postgres, redis]
        postgres.start()
        redis.start()
        with default_database(postgres.url):
            yield postgres, redis
    finally:
        for server in reversed(started):
            server.stop()


def _executions(log: Path) -> Counter:
    if not log.exists():
        return Counter()
    with sqlite3.connect(log, timeout=30) as conn:
        try:
            return Counter(r[0] for r in conn.execute("SELECT run_id FROM executions"))
        except sqlite3.OperationalError:
            return Counter()


def _all_final(ids) -> bool:
    try:
        return not Run.objects.filter(pk__in=ids).exclude(status__in=RunStatus.final()).exists()
    except Exception:
        connection.close()
        return False


def _assert_logged_clearly(clog: Path, *needles: str) -> None:
    """The outage is named in the log, and the log is a handful of errors, not a crash loop."""
    text = clog.read_text()
    assert any(n in text for n in needles), f"the outage is not logged clearly ({needles} missing):\n{text[-3000:]}"
    assert text.count("Traceback") <= 100, f"{text.count('Traceback')} tracebacks: a crash loop"
    assert "reincarnated" not in text.replace("reincarnated pusher", ""), "workers died and were reincarnated"


def _trigger(schedule, n, log, seconds):
    return [run_trigger_manual(schedule=schedule, actor="tests", params={"log": str(log), "seconds": seconds}).pk
            for _ in range(n)]


def test_a_postgresql_restart_with_runs_in_flight_loses_and_doubles_nothing(servers, make_schedule, tmp_path):
    postgres, redis = servers
    import tests.reliability.pipelines  # noqa: F401

    schedule = make_schedule("sleepy_pg", target_id="reliability.sleepy", retry_max_attempts=3)
    log, clog = tmp_path / "exec.db", tmp_path / "cluster.log"
    ids = _trigger(schedule, 6, log, 1.0)
    proc = start_cluster("pgrestart", log_path=clog, extra_env={
        "ETL_PIPELINE_MODULES": MODULES, "REDIS_URL": redis.url, "ETL_STUCK_SECONDS": "4"})
    try:
        wait_until(lambda: Run.objects.filter(pk__in=ids, status=RunStatus.RUNNING, started_at__isnull=False).exists(),
                   timeout=60, what="a run in flight", log_path=clog)
        postgres.restart()
        connection.close()  # our own connection died with the server
        wait_until(lambda: _all_final(ids), timeout=120, what="every run to end", log_path=clog)
        assert proc.poll() is None, "the cluster died instead of recovering"
    finally:
        stop_cluster(proc)
    _assert_logged_clearly(clog, "the database system is shutting down", "terminating connection due to administrator",
                           "Connection refused", "server closed the connection")
    statuses = Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses[RunStatus.SUCCEEDED] == 6, statuses
    counts = _executions(log)
    attempts = dict(Run.objects.filter(pk__in=ids).values_list("id", "attempt"))
    # a run is executed again only when its earlier attempt never committed (at-least-once into an
    # idempotent sink); the ledger holds exactly one SUCCEEDED record per run
    assert all(1 <= counts[i] <= attempts[i] for i in ids), (counts, attempts)


def test_a_redis_restart_with_tasks_queued_loses_and_doubles_nothing(servers, make_schedule, tmp_path):
    postgres, redis = servers
    import tests.reliability.pipelines  # noqa: F401
    from scheduler.models import WorkloadClass

    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=10)
    schedule = make_schedule("sleepy_redis", target_id="reliability.sleepy", retry_max_attempts=3)
    log, clog = tmp_path / "exec.db", tmp_path / "cluster.log"
    ids = _trigger(schedule, 8, log, 0.5)
    proc = start_cluster("redisrestart", log_path=clog, extra_env={
        "ETL_PIPELINE_MODULES": MODULES, "REDIS_URL": redis.url, "Q_WORKERS": "1", "ETL_STUCK_SECONDS": "3",
        "ETL_RUN_BATCH_MAX": "2"})
    try:
        # admitted runs wait in Redis behind the single worker (four messages of two runs: the worker holds one)
        wait_until(
            lambda: Run.objects.filter(pk__in=ids, status=RunStatus.RUNNING, started_at__isnull=True).count() >= 3,
            timeout=60,
            what="tasks queued in Redis",
            log_path=clog,
        )
        redis.restart()
        wait_until(lambda: _all_final(ids), timeout=120, what="every run to end", log_path=clog)
        assert proc.poll() is None, "the cluster died instead of recovering"
    finally:
        stop_cluster(proc)
    _assert_logged_clearly(clog, "Failed to pull task from broker", "redis.exceptions.ConnectionError")
    assert Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))[RunStatus.SUCCEEDED] == 8
    counts = _executions(log)
    assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}, "each run executed exactly once"
