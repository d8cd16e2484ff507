"""Several dispatchers at once against one queue: limits hold and no run starts twice.

Each thread has its own database connection, as separate dispatcher
processes would. On SQLite the IMMEDIATE transactions serialise them; on
PostgreSQL the class row locks do.
"""
from __future__ import annotations

import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection

from scheduler.models import BreakerStatus, Run, RunStatus, Schedule, WorkloadClass
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.runs.queue import run_enqueue

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
THREADS = 4


def _in_threads(work, n=THREADS):
    barrier = threading.Barrier(n)
    errors = []

    def target(i):
        try:
            barrier.wait(timeout=30)
            work(i)
        except Exception as exc:  # noqa: BLE001  surfaced below: a thread's assert must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution"):
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors


def test_concurrent_dispatchers_never_exceed_a_class_limit_nor_admit_a_run_twice(make_schedule, now):
    limit = 3
    wc, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": limit})
    schedule = make_schedule("load", workload_class=wc)
    total = 24
    for i in range(total):
        run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key=f"k{i}", now=now + timedelta(seconds=i))
    admissions: list[tuple[str, int]] = []
    peaks: list[int] = []
    lock = threading.Lock()
    phase = threading.Barrier(THREADS)

    def dispatcher(i):
        holder = f"dispatcher-{i}"
        for _round in range(total // limit + 2):
            # Admission phase: every dispatcher at once, nothing finishes, so
            # the RUNNING count only grows and its value at the end of the
            # phase is the highest it reached.
            phase.wait(timeout=60)
            for _ in range(3):
                got = admit_runs(now=now + timedelta(minutes=1), holder=holder)
                with lock:
                    admissions.extend((holder, rid) for rid in got)
            phase.wait(timeout=60)
            if i == 0:
                peaks.append(Run.objects.filter(status=S.RUNNING, workload_class=wc).count())
                # the workers finish everything, freeing the class for the next round
                Run.objects.filter(status=S.RUNNING, workload_class=wc).update(status=S.SUCCEEDED)
            phase.wait(timeout=60)

    _in_threads(dispatcher)
    ids = [rid for _, rid in admissions]
    assert len(ids) == len(set(ids)), "a run was admitted twice"
    assert sorted(ids) == sorted(Run.objects.filter(schedule=schedule).values_list("id", flat=True))
    assert max(peaks) <= limit
    assert Run.objects.filter(schedule=schedule, status=S.SUCCEEDED).count() == total


def test_concurrent_dispatchers_admit_exactly_one_half_open_test_run(make_schedule, now):
    schedule = make_schedule("shaky", breaker_cooldown_seconds=60)
    Schedule.objects.filter(pk=schedule.pk).update(
        breaker_status=BreakerStatus.OPEN, breaker_failures=5, breaker_opened_at=now,
        breaker_current_cooldown_seconds=60,
    )
    for i in range(8):
        run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key=f"k{i}", now=now)
    admitted: list[int] = []
    lock = threading.Lock()

    def dispatcher(i):
        got = admit_runs(now=now + timedelta(seconds=61), holder=f"dispatcher-{i}")
        with lock:
            admitted.extend(got)

    _in_threads(dispatcher)
    assert len(admitted) == 1
    assert Run.objects.filter(schedule=schedule, status=S.RUNNING).count() == 1
    schedule.refresh_from_db()
    assert schedule.breaker_status == BreakerStatus.HALF_OPEN and schedule.breaker_trial_run_id == admitted[0]
