"""A real qcluster on PostgreSQL admits a manual run as soon as it is queued, not at the dispatch loop's next poll.

The poll is set to 10 s. A run's `admitted_at` is the `now` of the tick that admitted it, read just after the tick
began (after the lease check); a tick that nothing woke begins a whole interval after the one before. So a run
queued once run A was admitted, and admitted itself less than 6 s after A, was admitted by a tick a notification
began. No speed is measured: the margin (4 s of the 10, for the lease check before `now`) is for a loaded machine.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection  # noqa: F401  (the skip condition reads it)

from scheduler.models import LoopLease, Run
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
INTERVAL = 10.0


def _admitted(run_id: int):
    return Run.objects.filter(pk=run_id, admitted_at__isnull=False).values_list("admitted_at", flat=True).first()


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite has no NOTIFY: its dispatch loop polls")
def test_a_manual_run_is_admitted_well_before_the_dispatch_loops_poll(make_schedule, tmp_path):
    schedule = make_schedule("by-hand")
    log = tmp_path / "cluster.log"
    proc = start_cluster("wake", log_path=log, extra_env={
        "ETL_DISPATCH_INTERVAL": str(INTERVAL), "ETL_LEASE_SECONDS": "60"})
    try:
        wait_until(lambda: LoopLease.objects.filter(name="dispatch").exclude(holder="").exists(), timeout=60,
                   what="the dispatch loop's lease", log_path=log)
        first = run_trigger_manual(schedule=schedule, actor="tests")
        previous = wait_until(lambda: _admitted(first.pk), timeout=60, what="the first run admitted", log_path=log)
        for _ in range(3):
            run = run_trigger_manual(schedule=schedule, actor="tests")
            admitted = wait_until(lambda: _admitted(run.pk), timeout=60, what=f"run {run.pk} admitted", log_path=log)
            assert admitted - previous < timedelta(seconds=INTERVAL - 4), (
                f"run {run.pk} was admitted {admitted - previous} after the tick before: by the poll, not a wake\n"
                + log.read_text()[-3000:])
            previous = admitted
    finally:
        stop_cluster(proc)


def test_a_cron_schedule_fires_at_its_fire_times_not_at_the_dispatch_loops_poll(make_schedule, tmp_path):
    """Both databases: a fire due before the poll wakes the loop (the due query looks one interval ahead).

    A schedule firing every 2 s; a poll of 60 s. Without the look-ahead the loop ticks once as it takes its lease
    and then not for a minute: one run at most in the first 40 s. With it, a run every 2 s.
    """
    schedule = make_schedule("every-2s", trigger_kind="cron", trigger_config={"cron": "* * * * * */2"})
    log = tmp_path / "cluster.log"
    proc = start_cluster("fires", log_path=log, extra_env={"ETL_DISPATCH_INTERVAL": "60", "ETL_LEASE_SECONDS": "120"})
    try:
        wait_until(lambda: LoopLease.objects.filter(name="dispatch").exclude(holder="").exists(), timeout=60,
                   what="the dispatch loop's lease", log_path=log)
        wait_until(lambda: Run.objects.filter(schedule=schedule).count() >= 3, timeout=40,
                   what="three fires within 40 s of the lease, with a 60 s poll", log_path=log)
    finally:
        stop_cluster(proc)
    times = sorted(Run.objects.filter(schedule=schedule).values_list("logical_time", flat=True))
    assert len(set(times)) == len(times) and all(t.second % 2 == 0 and t.microsecond == 0 for t in times)
