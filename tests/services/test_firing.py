"""Firing time triggers: exactly one run per fire, DST in two zones, catch-up after downtime."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, Schedule
from scheduler.services.admission.firing import Fired, compute_next_fire, fire_due, fire_due_schedules
from scheduler.services.runs.queue import run_enqueue

pytestmark = pytest.mark.django_db


def _cron(make_schedule, name, cron, *, tz="UTC", start, **fields):
    """A cron schedule whose clock starts at `start` (instead of the real now it was saved at)."""
    schedule = make_schedule(name, trigger_kind="cron", trigger_config={"cron": cron}, timezone=tz, **fields)
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=compute_next_fire(schedule, after=start))
    schedule.refresh_from_db()
    return schedule


def _fires(schedule):
    return list(Run.objects.filter(schedule=schedule).order_by("logical_time").values_list("logical_time", flat=True))


def _tick_every(step: timedelta, start: datetime, end: datetime):
    t = start
    while t <= end:
        fire_due_schedules(now=t)
        t += step


def test_a_due_cron_fires_once_and_moves_next_fire_from_the_fire_time(make_schedule):
    start = datetime(2026, 3, 2, 11, 59, 30, tzinfo=UTC)
    schedule = _cron(make_schedule, "hourly", "0 * * * *", start=start)
    assert schedule.next_fire_at == datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert fire_due_schedules(now=start) == 0

    # the tick runs 7 s late: the run still stands for 12:00, and 13:00 is next
    assert fire_due_schedules(now=datetime(2026, 3, 2, 12, 0, 7, tzinfo=UTC)) == 1
    assert fire_due_schedules(now=datetime(2026, 3, 2, 12, 0, 8, tzinfo=UTC)) == 0
    schedule.refresh_from_db()
    run = Run.objects.get(schedule=schedule)
    assert run.logical_time == datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert run.trigger_key == "cron:2026-03-02T12:00:00+00:00" and run.trigger_kind == "cron"
    assert schedule.next_fire_at == datetime(2026, 3, 2, 13, tzinfo=UTC)
    assert schedule.last_fire_at == datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_berlin_spring_forward_runs_the_missing_time_once_at_the_end_of_the_gap(make_schedule):
    schedule = _cron(make_schedule, "berlin", "30 2 * * *", tz="Europe/Berlin",
                     start=datetime(2026, 3, 28, 0, tzinfo=UTC))
    _tick_every(timedelta(minutes=10), datetime(2026, 3, 28, 0, tzinfo=UTC), datetime(2026, 3, 30, 3, tzinfo=UTC))
    assert _fires(schedule) == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),  # 02:30 CET
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 02:30 does not exist: 03:00 CEST
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]


def test_berlin_fall_back_runs_the_repeated_time_once(make_schedule):
    schedule = _cron(make_schedule, "berlin-fall", "30 2 * * *", tz="Europe/Berlin",
                     start=datetime(2026, 10, 24, 12, tzinfo=UTC))
    _tick_every(timedelta(minutes=10), datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 12, tzinfo=UTC))
    assert _fires(schedule) == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST, not again at 02:30 CET
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]


def test_new_york_both_transitions_run_once(make_schedule):
    spring = _cron(make_schedule, "ny-spring", "15 2 * * *", tz="America/New_York",
                   start=datetime(2026, 3, 7, 12, tzinfo=UTC))
    fall = _cron(make_schedule, "ny-fall", "30 1 * * *", tz="America/New_York",
                 start=datetime(2026, 3, 7, 12, tzinfo=UTC))
    _tick_every(timedelta(minutes=15), datetime(2026, 3, 7, 12, tzinfo=UTC), datetime(2026, 3, 9, 12, tzinfo=UTC))
    assert _fires(spring) == [datetime(2026, 3, 8, 7, 0, tzinfo=UTC), datetime(2026, 3, 9, 6, 15, tzinfo=UTC)]
    Schedule.objects.filter(pk=fall.pk).update(
        next_fire_at=compute_next_fire(fall, after=datetime(2026, 10, 31, 12, tzinfo=UTC)))
    Run.objects.filter(schedule=fall).delete()
    _tick_every(timedelta(minutes=15), datetime(2026, 10, 31, 12, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC))
    assert _fires(fall) == [datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]


def test_an_hourly_cron_neither_skips_nor_doubles_an_hour_across_fall_back(make_schedule):
    schedule = _cron(make_schedule, "hourly-berlin", "0 * * * *", tz="Europe/Berlin",
                     start=datetime(2026, 10, 24, 22, 30, tzinfo=UTC))
    _tick_every(
        timedelta(minutes=20), datetime(2026, 10, 24, 22, 30, tzinfo=UTC), datetime(2026, 10, 25, 4, 10, tzinfo=UTC)
    )
    assert _fires(schedule) == [datetime(2026, 10, 24, 23, tzinfo=UTC) + timedelta(hours=h) for h in range(6)]


def test_after_downtime_one_coalesced_run_stands_for_the_latest_missed_fire(make_schedule):
    start = datetime(2026, 3, 2, 0, 0, 30, tzinfo=UTC)
    schedule = _cron(make_schedule, "down", "*/5 * * * *", start=start)
    # the cluster was down from 00:05 to 01:02
    assert fire_due_schedules(now=datetime(2026, 3, 2, 1, 2, tzinfo=UTC)) == 1
    assert _fires(schedule) == [datetime(2026, 3, 2, 1, 0, tzinfo=UTC)]
    schedule.refresh_from_db()
    assert schedule.next_fire_at == datetime(2026, 3, 2, 1, 5, tzinfo=UTC)


def test_with_catchup_every_missed_fire_runs_up_to_max_catchup(make_schedule):
    start = datetime(2026, 3, 2, 0, 0, 30, tzinfo=UTC)
    schedule = _cron(make_schedule, "catchup", "*/5 * * * *", start=start, catchup=True, max_catchup=4)
    assert fire_due_schedules(now=datetime(2026, 3, 2, 1, 2, tzinfo=UTC)) == 4
    assert _fires(schedule) == [datetime(2026, 3, 2, 0, 45, tzinfo=UTC) + timedelta(minutes=5 * i) for i in range(4)]
    small = _cron(make_schedule, "catchup-small", "*/5 * * * *", start=start, catchup=True, max_catchup=50)
    assert fire_due_schedules(now=datetime(2026, 3, 2, 0, 17, tzinfo=UTC)) == 3
    assert _fires(small) == [datetime(2026, 3, 2, 0, 5, tzinfo=UTC) + timedelta(minutes=5 * i) for i in range(3)]


def test_an_interval_schedule_fires_from_its_anchor_and_coalesces(make_schedule):
    schedule = make_schedule("iv", trigger_kind="interval",
                             trigger_config={"seconds": 600, "anchor": "2026-03-02T00:03:00+00:00"})
    Schedule.objects.filter(pk=schedule.pk).update(
        next_fire_at=compute_next_fire(schedule, after=datetime(2026, 3, 2, tzinfo=UTC)))
    assert fire_due_schedules(now=datetime(2026, 3, 2, 0, 3, tzinfo=UTC)) == 1
    assert fire_due_schedules(now=datetime(2026, 3, 2, 0, 50, tzinfo=UTC)) == 1
    assert _fires(schedule) == [datetime(2026, 3, 2, 0, 3, tzinfo=UTC), datetime(2026, 3, 2, 0, 43, tzinfo=UTC)]


def test_a_fire_already_taken_by_another_dispatcher_creates_no_second_run(make_schedule):
    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    schedule = _cron(make_schedule, "race", "0 * * * *", start=start)
    fire = datetime(2026, 3, 2, 12, tzinfo=UTC)
    # the other dispatcher inserted the run but this one read the row before it moved next_fire_at
    run_enqueue(
        schedule=schedule, trigger_kind="cron", trigger_key=f"cron:{fire.isoformat()}", logical_time=fire, now=fire
    )
    assert fire_due_schedules(now=fire) == 0
    assert Run.objects.filter(schedule=schedule).count() == 1


def test_disabled_and_not_yet_due_schedules_do_not_fire_and_the_query_reads_next_fire_at(make_schedule):
    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    _cron(make_schedule, "off", "0 * * * *", start=start)
    Schedule.objects.filter(name="off").update(enabled=False)
    _cron(make_schedule, "later", "0 18 * * *", start=start)
    make_schedule("manual-only")
    with CaptureQueriesContext(connection) as queries:
        assert fire_due_schedules(now=datetime(2026, 3, 2, 12, 1, tzinfo=UTC)) == 0
    assert len(queries) == 1 and "next_fire_at" in queries[0]["sql"].split("WHERE")[1]
    assert not Run.objects.exists()


def test_a_schedule_whose_plugin_disappeared_is_parked_instead_of_failing_every_tick(make_schedule, now):
    schedule = _cron(make_schedule, "orphan", "0 * * * *", start=now)
    Schedule.objects.filter(pk=schedule.pk).update(trigger_kind="uninstalled")
    healthy = _cron(make_schedule, "healthy", "0 * * * *", start=now)
    assert fire_due_schedules(now=now + timedelta(hours=1)) == 1
    schedule.refresh_from_db()
    assert schedule.next_fire_at is None
    assert Run.objects.get().schedule == healthy


def test_a_cron_run_carries_the_schedule_params(make_schedule, now):
    schedule = _cron(make_schedule, "with-params", "0 * * * *", start=now, params={"region": "eu"})
    fire_due_schedules(now=now + timedelta(hours=1))
    assert Run.objects.get(schedule=schedule).params == {"region": "eu"}


# --- many due schedules at once: one guarded statement ------------------------------

def _hourly(make_schedule, n, *, start, prefix="h", **fields):
    return [_cron(make_schedule, f"{prefix}{i:03d}", "0 * * * *", start=start, **fields) for i in range(n)]


def _fire_queries(now):
    with CaptureQueriesContext(connection) as queries:
        created = fire_due_schedules(now=now)
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT"))]
    return created, len(queries), writes


def test_firing_costs_the_same_statements_for_3_or_30_due_schedules(make_schedule):
    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    _hourly(make_schedule, 3, start=start, prefix="few")
    few = _fire_queries(datetime(2026, 3, 2, 12, 0, 5, tzinfo=UTC))
    _hourly(make_schedule, 30, start=datetime(2026, 3, 2, 12, 1, tzinfo=UTC), prefix="many")
    many = _fire_queries(datetime(2026, 3, 2, 13, 0, 5, tzinfo=UTC))

    assert (few[0], many[0]) == (3, 33)  # the three fire again at 13:00, with the thirty
    assert few[1] == many[1]
    # one guarded UPDATE moves every due schedule, one INSERT creates every run
    assert [w.split()[0] for w in many[2]] == ["UPDATE", "INSERT"]
    assert Run.objects.filter(logical_time=datetime(2026, 3, 2, 13, tzinfo=UTC)).count() == 33
    assert not Schedule.objects.filter(next_fire_at__lte=datetime(2026, 3, 2, 13, 0, 5, tzinfo=UTC)).exists()


def test_a_dispatcher_whose_read_went_stale_fires_only_the_schedules_nobody_moved(make_schedule, monkeypatch):
    from scheduler.services.admission import firing

    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    fire = datetime(2026, 3, 2, 12, tzinfo=UTC)
    now = fire + timedelta(seconds=3)
    # cancel_other makes a second fire of the same time visible: it would cancel the first one's run
    schedules = _hourly(make_schedule, 6, start=start, overlap_policy="cancel_other")
    real_plan = firing._plan

    def another_dispatcher_fires_half_of_them_first(due, *, now):
        plans = real_plan(due, now=now)  # this dispatcher has read all six as due ...
        monkeypatch.setattr(firing, "_plan", real_plan)
        later = [s.pk for s in schedules[3:]]
        Schedule.objects.filter(pk__in=later).update(enabled=False)
        assert fire_due_schedules(now=now) == 3  # ... and another one fires three of them before it writes
        Schedule.objects.filter(pk__in=later).update(enabled=True)
        return plans

    monkeypatch.setattr(firing, "_plan", another_dispatcher_fires_half_of_them_first)
    assert fire_due_schedules(now=now) == 3

    for schedule in schedules:
        assert list(Run.objects.filter(schedule=schedule).values_list("logical_time", "status")) == [(fire, "QUEUED")]
        schedule.refresh_from_db()
        assert schedule.next_fire_at == fire + timedelta(hours=1) and schedule.last_fire_at == fire


def test_without_bulk_update_support_each_schedule_is_moved_by_its_own_compare_and_set(make_schedule, monkeypatch):
    from scheduler.services.common import bulk

    monkeypatch.setattr(bulk, "supported", lambda: False)
    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    schedules = _hourly(make_schedule, 4, start=start)
    created, _, writes = _fire_queries(datetime(2026, 3, 2, 12, 0, 5, tzinfo=UTC))
    assert created == 4 and [w.split()[0] for w in writes].count("UPDATE") == 4
    assert fire_due_schedules(now=datetime(2026, 3, 2, 12, 0, 6, tzinfo=UTC)) == 0
    assert all(Run.objects.filter(schedule=s).count() == 1 for s in schedules)


@pytest.mark.django_db(transaction=True)
def test_concurrent_dispatchers_fire_every_due_schedule_exactly_once(make_schedule):
    """Four dispatchers (threads, each its own connection) fire the same 20 due schedules at once."""
    import threading

    start = datetime(2026, 3, 2, 11, 59, tzinfo=UTC)
    # cancel_other: a second fire of the same time would cancel the first one's run
    schedules = _hourly(make_schedule, 20, start=start, overlap_policy="cancel_other")
    now = datetime(2026, 3, 2, 14, 0, 5, tzinfo=UTC)  # 12:00 to 14:00 missed: one run for 14:00 each
    barrier = threading.Barrier(4)
    created, errors = [], []

    def dispatcher():
        try:
            barrier.wait(timeout=30)
            created.append(fire_due_schedules(now=now))
        except Exception as exc:  # noqa: BLE001  surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatcher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sum(created) == 20
    for schedule in schedules:
        assert list(Run.objects.filter(schedule=schedule).values_list("logical_time", "status")) == [
            (datetime(2026, 3, 2, 14, tzinfo=UTC), "QUEUED")]


def test_the_due_query_looks_ahead_and_names_the_first_fire_not_due_yet_without_firing_it(make_schedule):
    start = datetime(2026, 3, 2, 11, 59, 59, 950000, tzinfo=UTC)
    schedule = _cron(make_schedule, "every-second", "* * * * * *", start=start)
    noon = datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert schedule.next_fire_at == noon
    with CaptureQueriesContext(connection) as read:
        assert fire_due(now=start, lookahead=timedelta(seconds=0.1)) == Fired(0, noon)
    assert len(read) == 1, "the same one query as a tick with nothing due"
    assert fire_due(now=start, lookahead=timedelta(seconds=0.01)) == Fired(0, None)
    assert not Run.objects.filter(schedule=schedule).exists()
    assert fire_due(now=noon, lookahead=timedelta(seconds=0.1)) == Fired(1, None)
    second = noon.replace(second=1)
    assert fire_due(now=second, lookahead=timedelta(seconds=2)) == Fired(1, noon.replace(second=2)), (
        "the next fire it just set is the first within the look-ahead")
    assert fire_due(now=second + timedelta(seconds=0.95), lookahead=timedelta(seconds=0.1)) == Fired(0, noon.replace(
        second=2))
