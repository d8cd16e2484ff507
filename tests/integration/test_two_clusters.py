"""Two real `qcluster` processes on PostgreSQL + Redis: exactly-once fires, class limits,
lease fail-over after SIGKILL, and a killed worker's run re-queued and run once.

Both clusters share one Redis queue (ETL_QUEUE_NAME) and differ only by
`--name`, as docs/deploy.md tells operators to run them.
"""
from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection

from scheduler.models import LoopLease, Run, RunStatus, Schedule, WorkloadClass
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration import pipelines_for_tests  # noqa: F401  registers itest.record here too
from tests.integration.cluster import kill_cluster, start_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 3


@pytest.fixture
def redis_db(throwaway_redis):
    if connection.vendor != "postgresql":
        pytest.skip("two-cluster tests need PostgreSQL (set DATABASE_URL=postgres://...); SQLite serialises writers")
    return throwaway_redis.url


def _env(redis_url: str) -> dict:
    return {
        "REDIS_URL": redis_url,
        "Q_WORKERS": "4",
        "ETL_PIPELINE_MODULES": "scheduler.pipelines.demo,tests.integration.pipelines_for_tests",
        "ETL_LEASE_SECONDS": str(LEASE_SECONDS),
        "ETL_STUCK_SECONDS": "5",
        "ETL_HEARTBEAT_SECONDS": "1",
        "ETL_GOVERNANCE_INTERVAL": "1",
        "ETL_DISPATCH_INTERVAL": "0.05",
    }


def _leases() -> dict[str, LoopLease]:
    return {lease.name: lease for lease in LoopLease.objects.all()}


def _held_by(prefix: str) -> bool:
    leases = _leases()
    return all(name in leases and leases[name].holder.startswith(prefix) for name in ("dispatch", "governance"))


def _lines(path: Path) -> list[tuple[str, int, int, int]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        event, run_id, attempt, pid = line.split()
        out.append((event, int(run_id), int(attempt), int(pid)))
    return out


def _max_concurrent(lines, run_ids: set[int]) -> int:
    current = peak = 0
    for event, run_id, _attempt, _pid in lines:
        if run_id not in run_ids:
            continue
        current += 1 if event == "start" else -1
        peak = max(peak, current)
    return peak


def test_two_clusters_fire_once_hold_limits_fail_over_and_requeue_a_killed_run(make_schedule, redis_db, tmp_path):
    record = str(tmp_path / "executions.log")
    narrow = WorkloadClass.objects.create(name="narrow", concurrency_limit=2)
    WorkloadClass.objects.create(name="long", concurrency_limit=2)
    env = _env(redis_db)
    logs = {name: tmp_path / f"{name}.log" for name in ("c1", "c2")}

    # c1 starts alone so it holds both leases and is the one that runs the long job
    c1 = start_cluster("c1", log_path=logs["c1"], extra_env=env)
    c2 = None
    try:
        wait_until(lambda: _held_by("c1@"), timeout=30, what="c1 to hold both leases", log_path=logs["c1"])
        every_second = make_schedule(
            "every-second", target_id="itest.record", trigger_kind="cron", trigger_config={"cron": "* * * * * *"},
            catchup=True, max_catchup=100, params={"record": record},
        )
        long_job = make_schedule("long-job", target_id="itest.record", workload_class="long", retry_max_attempts=2,
                                 params={"record": record, "first_attempt_sleep": 300, "sleep": 0.2})
        victim = run_trigger_manual(schedule=long_job, actor="tests")
        wait_until(lambda: Run.objects.filter(pk=victim.pk, started_at__isnull=False).exists(), timeout=30,
                   what="the long run to start on c1", log_path=logs["c1"])
        assert Run.objects.get(pk=victim.pk).worker_id.startswith("c1@")

        c2 = start_cluster("c2", log_path=logs["c2"], extra_env=env)
        wait_until(lambda: "governance loop started" in logs["c2"].read_text(), timeout=30, what="c2 to start",
                   log_path=logs["c2"])

        # per-class limit: 8 runs in a class of 2, with 8 workers across two clusters
        burst_schedule = make_schedule("burst", target_id="itest.record", workload_class="narrow",
                                       params={"record": record, "sleep": 0.4})
        burst = [run_trigger_manual(schedule=burst_schedule, actor="tests").pk for _ in range(8)]
        wait_until(lambda: Run.objects.filter(pk__in=burst, status=RunStatus.SUCCEEDED).count() == 8, timeout=60,
                   what="the burst to finish", log_path=logs["c1"])
        assert 1 <= _max_concurrent(_lines(Path(record)), set(burst)) <= narrow.concurrency_limit

        # SIGKILL c1 (sentinel, workers, loops): no cleanup, no lease release
        before = _leases()
        killed_at = datetime.now(UTC)
        kill_cluster(c1)
        wait_until(lambda: _held_by("c2@"), timeout=LEASE_SECONDS + 15, what="c2 to take over both leases",
                   log_path=logs["c2"])
        after = _leases()
        for name in ("dispatch", "governance"):
            assert before[name].holder.startswith("c1@")
            # never two holders at once, and the take-over comes within the lease time (+ one loop interval)
            assert after[name].acquired_at >= before[name].expires_at - timedelta(seconds=0.01)
            assert after[name].acquired_at - killed_at <= timedelta(seconds=LEASE_SECONDS + 2)

        # governance on c2 finds the long run without a heartbeat and re-queues it; c2 runs it once
        wait_until(lambda: Run.objects.filter(pk=victim.pk, status=RunStatus.SUCCEEDED).exists(), timeout=40,
                   what="the killed run to be re-queued and succeed", log_path=logs["c2"])
        victim.refresh_from_db()
        assert victim.attempt == 2 and victim.worker_id.startswith("c2@")

        # stop firing, then let everything in flight drain
        Schedule.objects.filter(pk=every_second.pk).update(enabled=False)
        wait_until(lambda: not Run.objects.filter(status__in=RunStatus.active()).exists(), timeout=40,
                   what="every active run to finish", log_path=logs["c2"])
    finally:
        for proc in (c1, c2):
            if proc is not None:
                kill_cluster(proc)

    # every cron fire from the first to the last is exactly one run, across the fail-over
    fires = sorted(Run.objects.filter(schedule=every_second).values_list("logical_time", flat=True))
    assert len(fires) >= 5
    expected = [fires[0] + timedelta(seconds=i) for i in range(int((fires[-1] - fires[0]).total_seconds()) + 1)]
    assert fires == expected, "a cron fire was missed or doubled"

    # nothing lost, nothing run twice: every run succeeded and finished its pipeline exactly once
    runs = list(Run.objects.all())
    assert {r.status for r in runs} == {RunStatus.SUCCEEDED}, Counter(r.status for r in runs)
    ends = Counter(run_id for event, run_id, _a, _p in _lines(Path(record)) if event == "end")
    assert all(ends[r.pk] == 1 for r in runs), {r.pk: ends[r.pk] for r in runs if ends[r.pk] != 1}
    starts_of_victim = [(a, p) for e, rid, a, p in _lines(Path(record)) if e == "start" and rid == victim.pk]
    assert [a for a, _ in starts_of_victim] == [1, 2]
