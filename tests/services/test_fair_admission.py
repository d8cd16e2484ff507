"""Fair admission: one schedule's backlog never holds back another schedule's runs."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, RunStatus
from scheduler.services.runs.queue import run_build
from tests.services.semantics_helpers import tick

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def _backlog(schedule, count, now):
    Run.objects.bulk_create(
        [
            run_build(
                schedule=schedule,
                trigger_kind="cron",
                trigger_key=f"cron:{i}",
                logical_time=now - timedelta(minutes=count - i),
                now=now - timedelta(minutes=count - i),
            )
            for i in range(count)
        ]
    )


def test_a_rate_limited_backlog_of_250_runs_does_not_hold_back_another_schedules_run(make_schedule, now):
    busy = make_schedule("busy", max_runs_per_minute=1)
    other = make_schedule("other")
    _backlog(busy, 250, now)
    lone = run_build(schedule=other, trigger_kind="manual", trigger_key="m1", now=now)
    lone.save()

    admitted = [rid for rid, _ in tick(now)]
    lone.refresh_from_db()
    assert lone.status == S.RUNNING and lone.pk in admitted
    assert Run.objects.filter(schedule=busy, status=S.RUNNING).count() == 1  # 1 per minute
    assert len(admitted) == 2

    # the next tick: the rate-limited backlog is left out by the query, nothing is looked at run by run
    with CaptureQueriesContext(connection) as queries:
        assert tick(now + timedelta(seconds=1)) == []
    assert len(queries) < 30
    # a minute later the next one of the backlog starts
    assert len(tick(now + timedelta(seconds=61))) == 1


def test_a_serial_schedules_backlog_does_not_hold_back_another_schedules_run(make_schedule, now):
    serial = make_schedule("serial", overlap_policy="buffer_all")
    other = make_schedule("other")
    _backlog(serial, 250, now)
    assert len(tick(now)) == 1  # one at a time
    lone = run_build(schedule=other, trigger_kind="manual", trigger_key="m1", now=now)
    lone.save()
    assert [rid for rid, _ in tick(now + timedelta(seconds=1))] == [lone.pk]
    assert Run.objects.filter(schedule=serial, status=S.RUNNING).count() == 1


def test_a_backlog_that_becomes_held_during_the_tick_does_not_hide_a_later_run(make_schedule, now, settings):
    settings.ETL_DISPATCH_BATCH = 20
    busy = make_schedule("busy", max_runs_per_minute=2)
    other = make_schedule("other")
    _backlog(busy, 100, now)
    lone = run_build(schedule=other, trigger_kind="manual", trigger_key="m1", now=now)
    lone.save()
    admitted = [rid for rid, _ in tick(now)]
    assert lone.pk in admitted and len(admitted) == 3
