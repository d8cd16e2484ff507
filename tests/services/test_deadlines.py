"""Deadlines: a live run not SUCCEEDED `deadline_seconds` after its logical time raises one alert, once."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from django.core import mail
from django.db import connection

from scheduler.models import Alert, AlertKind, AuditEntry, Backfill, Run, RunStatus, TriggerKind
from scheduler.services.oversight import alerts
from scheduler.services.oversight import deadlines
from scheduler.services.oversight.deadlines import deadline_mark, deadline_misses, deadlines_check
from scheduler.services.cluster.governance import governance_tick
from scheduler.services.access.teams import team_save

pytestmark = pytest.mark.django_db
_keys = count(1)
HOUR = timedelta(hours=1)
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def run_of(schedule, *, logical_time, status=RunStatus.QUEUED, **fields) -> Run:
    """A ledger row written directly: the deadline check reads rows, whoever wrote them."""
    values = {"trigger_kind": TriggerKind.CRON, "trigger_key": f"k{next(_keys)}", "queued_at": logical_time or NOW,
              "workload_class_id": schedule.workload_class_id, **fields}
    if status in RunStatus.final() and "finished_at" not in values:
        values["finished_at"] = (logical_time or NOW) + timedelta(minutes=5)
    return Run.objects.create(schedule=schedule, status=status, logical_time=logical_time, **values)


@pytest.fixture
def nightly(make_schedule):
    return make_schedule("nightly", deadline_seconds=3600)


def test_a_run_not_succeeded_past_its_deadline_is_marked_audited_and_alerted_once(nightly, now):
    run = run_of(nightly, logical_time=now - 2 * HOUR, status=RunStatus.RUNNING)
    ticks = [governance_tick(now=now + timedelta(minutes=m), holder="g") for m in range(5)]
    assert ticks[0].actions["deadlines_missed"] == [run.pk]
    assert all(t.actions["deadlines_missed"] == [] for t in ticks[1:])  # later ticks: nothing new
    run.refresh_from_db()
    assert run.deadline_missed_at == now
    [alert] = Alert.objects.all()
    assert (alert.kind, alert.run_id, alert.schedule_id) == (AlertKind.DEADLINE_MISSED, run.pk, nightly.pk)
    assert (f"Run {run.pk} of 'nightly' missed its deadline: not SUCCEEDED 3600 s after its logical time"
            in alert.message)
    assert "it is RUNNING" in alert.message
    [entry] = AuditEntry.objects.filter(action="run.deadline_missed")
    assert entry.actor == "governance" and entry.target_id == str(run.pk)
    assert entry.after["deadline_seconds"] == 3600 and entry.after["status"] == "RUNNING"


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING, RunStatus.FAILED,
                                    RunStatus.BLOCKED])
def test_every_state_short_of_success_misses_the_deadline(nightly, now, status):
    run = run_of(nightly, logical_time=now - 2 * HOUR, status=status, reason="why not")
    assert deadlines_check(now=now) == [run.pk]
    assert f"it is {status} (why not)" in Alert.objects.get().message


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.SKIPPED])
def test_a_run_that_succeeded_was_cancelled_or_skipped_raises_nothing(nightly, now, status):
    run_of(nightly, logical_time=now - 2 * HOUR, status=status)
    assert deadlines_check(now=now) == []
    assert not Alert.objects.exists()


def test_nothing_before_the_deadline_or_exactly_at_it(nightly, now):
    run = run_of(nightly, logical_time=now - HOUR + timedelta(seconds=1))
    at = run_of(nightly, logical_time=now - HOUR)
    assert deadlines_check(now=now) == []
    assert deadlines_check(now=now + timedelta(seconds=1)) == [at.pk]
    assert deadlines_check(now=now + timedelta(seconds=2)) == [run.pk]
    assert Alert.objects.count() == 2


def test_a_run_that_succeeded_in_time_never_alerts_on_any_later_tick(nightly, now):
    run = run_of(nightly, logical_time=now, status=RunStatus.RUNNING)
    governance_tick(now=now + timedelta(minutes=30), holder="g")
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, finished_at=now + timedelta(minutes=40))
    for hours in (1, 2, 12, 30):
        governance_tick(now=now + timedelta(hours=hours), holder="g")
    assert not Alert.objects.exists()
    run.refresh_from_db()
    assert run.deadline_missed_at is None


def test_backfill_windows_reruns_and_resumed_runs_have_no_deadline(nightly, now):
    backfill = Backfill.objects.create(schedule=nightly, range_from="2026-01-01T00:00:00+00:00",
                                       range_to="2026-01-02T00:00:00+00:00", window_size="3600", created_at=now,
                                       total_windows=1)
    old = now - 2 * HOUR
    run_of(nightly, logical_time=old, backfill=backfill, trigger_kind=TriggerKind.BACKFILL)
    run_of(nightly, logical_time=old, backfill=backfill)  # the window's column alone says it, whatever the kind
    run_of(nightly, logical_time=old, trigger_kind=TriggerKind.RERUN)
    run_of(nightly, logical_time=old, trigger_kind=TriggerKind.RETRY)
    run_of(nightly, logical_time=None)
    assert deadlines_check(now=now) == []
    assert not Alert.objects.exists()


def test_a_schedule_without_a_deadline_raises_nothing(make_schedule, now):
    plain = make_schedule("plain")
    run_of(plain, logical_time=now - timedelta(days=0.5), status=RunStatus.FAILED)
    assert deadlines_check(now=now) == []


def test_each_schedule_is_held_to_its_own_deadline(make_schedule, now):
    short = make_schedule("short", deadline_seconds=60)
    long = make_schedule("long", deadline_seconds=7200)
    a = run_of(short, logical_time=now - timedelta(minutes=5))
    run_of(long, logical_time=now - timedelta(minutes=5))
    b = run_of(long, logical_time=now - 3 * HOUR)
    assert sorted(deadlines_check(now=now)) == sorted([a.pk, b.pk])


def test_a_run_found_more_than_a_day_past_its_deadline_is_left_alone(nightly, now):
    """A deadline added to a schedule with a long history does not alert once per old run."""
    run_of(nightly, logical_time=now - HOUR - deadlines.LOOKBACK - timedelta(seconds=1), status=RunStatus.FAILED)
    recent = run_of(nightly, logical_time=now - HOUR - deadlines.LOOKBACK + timedelta(seconds=1),
                    status=RunStatus.FAILED)
    assert deadlines_check(now=now) == [recent.pk]


def test_a_tick_marks_at_most_a_batch_oldest_first_and_the_next_tick_the_rest(nightly, now, monkeypatch):
    monkeypatch.setattr(deadlines, "BATCH", 2)
    runs = [run_of(nightly, logical_time=now - 2 * HOUR - timedelta(minutes=m)) for m in range(5)]
    oldest_first = [r.pk for r in reversed(runs)]
    assert deadlines_check(now=now) == oldest_first[:2]
    assert deadlines_check(now=now) == oldest_first[2:4]
    assert deadlines_check(now=now) == oldest_first[4:]
    assert Alert.objects.count() == 5


def test_a_run_that_succeeds_after_it_was_read_is_not_marked(nightly, now):
    run_of(nightly, logical_time=now - 2 * HOUR, status=RunStatus.RUNNING)
    [seen] = deadline_misses(now=now)
    Run.objects.filter(pk=seen.pk).update(status=RunStatus.SUCCEEDED)  # the worker's verdict lands meanwhile
    assert deadline_mark(run=seen, now=now) is False
    assert not Alert.objects.exists() and not AuditEntry.objects.filter(action="run.deadline_missed").exists()


def test_two_loops_marking_one_run_raise_one_alert(nightly, now):
    run_of(nightly, logical_time=now - 2 * HOUR)
    [first] = deadline_misses(now=now)
    [second] = deadline_misses(now=now)
    assert deadline_mark(run=first, now=now) is True
    assert deadline_mark(run=second, now=now + timedelta(seconds=1)) is False
    assert Alert.objects.count() == 1
    assert AuditEntry.objects.filter(action="run.deadline_missed").count() == 1


@pytest.mark.django_db(transaction=True)  # delivery closes a connection the test's transaction would hold
def test_the_alert_goes_to_the_owning_team_not_the_global_channel(make_schedule, now, settings):
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    settings.ETL_ALERT_WEBHOOK_URL = ""
    team_save(data={"name": "analytics", "alert_channels": "mailto://analytics@example.com"}, actor="tests")
    theirs = make_schedule("dbt", owner="analytics", deadline_seconds=600)
    unowned = make_schedule("orders", deadline_seconds=600)  # the default team has no channels
    a = run_of(theirs, logical_time=now - HOUR)
    b = run_of(unowned, logical_time=now - HOUR)
    deadlines_check(now=now)
    ours, global_ = Alert.objects.get(run=a), Alert.objects.get(run=b)
    assert ours.channels == [
        {"url": "mailto://analytics@example.com", "source": "team", "team": ours.schedule.owner_id}
    ]
    assert global_.channels == [{"url": "mailto://ops@example.com", "source": "global"}]
    assert alerts.alert_deliver(ours.pk, now=now) == "SENT"
    assert [m.to for m in mail.outbox] == [["analytics@example.com"]]
    assert "missed its deadline" in mail.outbox[0].subject


def test_the_check_reads_the_partial_index(nightly, now):
    """Bounded per tick and indexed: among many finished runs and old failures, the check seeks the few live
    runs of its logical-time range by index."""
    Run.objects.bulk_create([
        Run(schedule=nightly, status=RunStatus.SUCCEEDED, trigger_kind=TriggerKind.CRON, trigger_key=f"done{i}",
            logical_time=now - timedelta(minutes=i), queued_at=now - timedelta(minutes=i), finished_at=now,
            workload_class_id=nightly.workload_class_id) for i in range(2000)])
    Run.objects.bulk_create([  # the failures of past weeks stay FAILED, unmarked: the range leaves them out
        Run(schedule=nightly, status=RunStatus.FAILED, trigger_kind=TriggerKind.CRON, trigger_key=f"old{i}",
            logical_time=now - timedelta(days=3, minutes=i), queued_at=now - timedelta(days=3), finished_at=now,
            workload_class_id=nightly.workload_class_id) for i in range(500)])
    run_of(nightly, logical_time=now - 2 * HOUR)
    query = deadlines._watched().filter(deadlines._overdue(now)).order_by("logical_time", "id").query
    sql, params = query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE scheduler_run")
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = " ".join(str(row) for row in cursor.fetchall())
    assert "run_deadline_watch_idx" in plan, plan


def test_a_run_asked_to_stop_is_said_to_be_stopping(nightly, now):
    run_of(nightly, logical_time=now - 2 * HOUR, status=RunStatus.RUNNING, stop_requested_at=now, stop_kind="cancel")
    deadlines_check(now=now)
    assert "it is STOPPING" in Alert.objects.get().message
