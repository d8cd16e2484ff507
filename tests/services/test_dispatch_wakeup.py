"""The dispatch loop's wake-up: a committed queued run wakes the listener (PostgreSQL NOTIFY), nothing else does.

The listener tests commit for real (transactional_db: NOTIFY is delivered at commit); each `wait` has a long
timeout that only a failure reaches, so no test measures time.
"""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from scheduler.loops import LeasedLoop, quiet_for
from scheduler.models import Run, RunStatus
from scheduler.services.admission import wakeup
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.admission.events import event_emit
from scheduler.services.admission.firing import fire_due_schedules
from scheduler.services.admission.wakeup import RunQueuedListener, backend_pid
from scheduler.services.common.leases import lease_acquire
from scheduler.services.runs.lost import runs_lost
from scheduler.services.runs.queue import run_build, run_trigger_manual
from scheduler.services.runs.transitions import run_refused

pytestmark = pytest.mark.django_db(transaction=True)
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="NOTIFY is PostgreSQL's; SQLite polls")
LONG = 30.0  # a wait that should wake long before this; reaching it fails the test (slowly), never passes it


@pytest.fixture
def listener():
    stop = threading.Event()
    found = RunQueuedListener(stop)
    yield found
    stop.set()
    found.close()


@pytest.fixture
def schedule(make_schedule):
    return make_schedule("by-hand")


def _woken(listener, timeout: float = LONG) -> bool:
    return listener.wait(timeout, own_pid=None)


def _sent(listener) -> int:
    """How many notifications reached the listener, up to a marker sent now.

    PostgreSQL delivers notifications in commit order, a moment after the commit: the marker closes the count,
    however late the delivery, so "nothing" is never a wait that ended too soon."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, 'marker')", [wakeup.CHANNEL])
    count = 0
    for notice in listener._db.connection.notifies(timeout=LONG):
        if notice.payload == "marker":
            return count
        count += 1
    raise AssertionError("the marker never came")


@postgres_only
def test_a_run_queued_by_another_connection_wakes_the_wait_before_its_timeout(listener, schedule):
    assert listener.listen()
    run_trigger_manual(schedule=schedule, actor="tests")
    assert _woken(listener)
    assert listener.wakes == 1


@postgres_only
def test_without_a_queued_run_the_wait_ends_at_its_timeout(listener, schedule):
    assert listener.listen()
    assert not listener.wait(0.2, own_pid=None)
    assert listener.wakes == 0


@postgres_only
def test_a_burst_of_runs_queued_in_many_transactions_wakes_one_wait(listener, schedule):
    assert listener.listen()
    # a listening backend inside a transaction delivers nothing until it ends: then the whole burst at once
    listener._db.connection.execute("BEGIN")
    for _ in range(20):
        run_trigger_manual(schedule=schedule, actor="tests")
    listener._db.connection.execute("COMMIT")
    assert _woken(listener)
    assert _sent(listener) == 0, "the first wait took the whole burst with it: one tick serves it"
    assert listener.wakes == 1


@postgres_only
def test_a_run_queued_by_the_loops_own_connection_does_not_wake_it(listener, schedule):
    assert listener.listen()
    run_trigger_manual(schedule=schedule, actor="tests")  # the tick's own fires: admitted by the same tick
    assert not listener.wait(0.2, own_pid=backend_pid(connection))
    run_trigger_manual(schedule=schedule, actor="tests")
    assert _woken(listener)


@postgres_only
def test_the_doors_that_queue_a_run_each_notify_and_the_other_writes_do_not(listener, make_schedule, now):
    assert listener.listen()
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders"})
    assert _sent(listener) == 0, "saving a schedule"
    event_emit(topic="orders", payload={}, event_id="o-1", source="tests", actor="tests")
    assert _sent(listener) == 1, "an event"

    make_schedule("every-minute", trigger_kind="cron", trigger_config={"cron": "* * * * *"})
    assert fire_due_schedules(now=timezone.now() + timedelta(minutes=2)) == 1
    assert _sent(listener) == 1, "a cron fire"

    assert admit_runs(now=timezone.now(), holder="c1@host:1", send=lambda pairs: None)
    assert _sent(listener) == 0, "admitting a run"

    retried = make_schedule("retried", retry_max_attempts=3)
    run = run_build(schedule=retried, trigger_kind="manual", trigger_key="silent", now=now)
    run.status, run.admitted_at, run.started_at, run.heartbeat_at = RunStatus.RUNNING, now, now, now
    run.dispatch_token, run.worker_id = "tok-silent", "c1@host:1"
    run.save(force_insert=True)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=now, reason="beating")
    assert _sent(listener) == 0, "a run inserted RUNNING, a heartbeat"
    assert runs_lost(runs=[Run.objects.select_related("schedule").get(pk=run.pk)],
                     now=now + timedelta(hours=1))["requeued"] == [run.pk]
    assert _sent(listener) == 1, "a lost run queued again"


@postgres_only
def test_a_run_that_cannot_start_yet_or_is_born_final_notifies_nothing(listener, schedule):
    assert listener.listen()
    run_refused(schedule=schedule, status=RunStatus.SKIPPED, reason="paused", trigger_kind="manual",
                trigger_key="refused-1", triggered_by="tests", now=timezone.now())
    assert _sent(listener) == 0, "a run born final"
    run = run_trigger_manual(schedule=schedule, actor="tests")
    assert _sent(listener) == 1
    Run.objects.filter(pk=run.pk).update(reason="still waiting")  # QUEUED stays QUEUED
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED, not_before=timezone.now() + timedelta(hours=1))
    assert _sent(listener) == 0, "a retry in back-off: the poll admits it once its back-off is over"


@postgres_only
def test_etl_dispatch_wake_off_silences_the_trigger(listener, schedule):
    assert listener.listen()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL etl.dispatch_wake = 'off'")  # what ETL_DISPATCH_WAKE=0 sets per connection
        run_trigger_manual(schedule=schedule, actor="tests")
    assert _sent(listener) == 0


@postgres_only
def test_the_stop_event_ends_a_wait_at_once(listener):
    assert listener.listen()
    listener.stop.set()
    assert not listener.wait(LONG, own_pid=None)


@postgres_only
def test_a_listener_whose_connection_was_killed_polls_then_listens_again(listener, schedule, monkeypatch):
    monkeypatch.setattr(wakeup, "RECONNECT_FIRST", 0.0)
    assert listener.listen()
    pid = listener._db.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    for _ in range(100):  # the server ends the backend a moment after it answers; each wait ends without raising
        if not listener.wait(0.1, own_pid=None) and not listener.listening:
            break
    assert not listener.listening
    run_trigger_manual(schedule=schedule, actor="tests")  # lost with the connection: the poll admits it
    assert listener.listen() and listener._db.connection.info.backend_pid != pid
    run_trigger_manual(schedule=schedule, actor="tests")
    assert _woken(listener)


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="the SQLite fallback")
def test_on_sqlite_the_listener_never_listens_and_the_wait_is_the_poll(listener, schedule):
    assert not listener.listen()
    run_trigger_manual(schedule=schedule, actor="tests")
    assert not listener.wait(0.05, own_pid=None)


# --- the loop: only the lease holder listens, a wake starts the next tick, a woken loop keeps still a while -----

class FakeWaiter:
    """Stands for RunQueuedListener: every wait is woken at once."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.listens, self.closes, self.timeouts = 0, 0, []
        self.closed_thrice = threading.Event()

    def listen(self) -> bool:
        self.listens += 1
        return True

    def wait(self, timeout: float, *, own_pid: int | None = None) -> bool:
        self.timeouts.append(timeout)
        return True

    def close(self) -> None:
        self.closes += 1
        if self.closes >= 3:
            self.closed_thrice.set()


def test_a_woken_lease_holder_ticks_again_without_waiting_for_its_poll():
    ticks = []
    loop = LeasedLoop("dispatch", 3600.0, lambda **kw: ticks.append(kw) if len(ticks) < 2 else loop.stop(),
                      holder="one", lease_seconds=30, wake=FakeWaiter)
    loop.start()
    loop.join(LONG)  # with its hour-long poll, only the wake can bring the loop round three times
    assert not loop.is_alive() and len(ticks) == 2
    waiter = loop.waiter
    assert waiter.listens == 3, "listening before each tick's reads"
    assert len(waiter.timeouts) == 2 and all(3000 < t <= 3600 for t in waiter.timeouts), "the rest of the interval"


def test_a_loop_without_the_lease_never_listens_and_polls_at_its_own_pace():
    lease_acquire(name="dispatch", holder="one", ttl=60, now=timezone.now())
    ticks = []
    loop = LeasedLoop("dispatch", 0.02, lambda **kw: ticks.append(kw), holder="two", lease_seconds=30,
                      wake=FakeWaiter)
    loop.start()
    try:
        assert loop.waiter.closed_thrice.wait(LONG)  # three turns, each asking for the lease
    finally:
        loop.stop()
        loop.join(LONG)
    assert ticks == [] and loop.waiter.listens == 0 and loop.waiter.timeouts == []


def test_a_woken_loop_keeps_still_as_long_as_its_tick_took_within_the_interval():
    assert quiet_for(elapsed=0.004, interval=0.1) == 0.004
    assert quiet_for(elapsed=0.07, interval=0.1) == pytest.approx(0.03)
    assert quiet_for(elapsed=0.5, interval=0.1) == 0.0


def test_a_tick_that_names_a_fire_due_before_the_poll_has_the_next_tick_then():
    ticks = []

    def tick(**kw):
        ticks.append(kw["now"])
        if len(ticks) == 3:
            loop.stop()
        return {"next_fire_at": timezone.now() + timedelta(milliseconds=20)}

    loop = LeasedLoop("dispatch", 3600.0, tick, holder="one", lease_seconds=30)  # no listener: the poll's path
    loop.start()
    loop.join(LONG)  # with its hour-long poll, only the fire times can bring the loop round three times
    assert not loop.is_alive() and len(ticks) == 3
