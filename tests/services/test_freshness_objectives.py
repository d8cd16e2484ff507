"""Freshness objectives: governance stores the breach, alerts once per incident, clears it on recovery."""
from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core import mail
from django.core.management import call_command

from scheduler.host import SchedulerHost
from scheduler.models import Alert, AlertKind, AuditEntry, Run, RunStatus, Schedule, WatermarkState
from scheduler.services.oversight import alerts
from scheduler.services.common.errors import ServiceError
from scheduler.services.oversight.freshness import freshness_check, freshness_status
from scheduler.services.cluster.governance import governance_tick

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sync_alerts(settings, monkeypatch):
    settings.ETL_ALERTS_SYNC = True
    settings.ETL_ALERT_EMAILS = []
    settings.ETL_ALERT_WEBHOOK_URL = ""
    monkeypatch.setattr(alerts, "_last_watchdog", None)


def succeeded(schedule, at):
    return Run.objects.create(schedule=schedule, trigger_key=f"t{at.isoformat()}", trigger_kind="manual",
                              workload_class_id=schedule.workload_class_id, status=RunStatus.SUCCEEDED,
                              queued_at=at, started_at=at, finished_at=at)


@pytest.fixture
def hourly(make_schedule, now):
    schedule = make_schedule("orders", freshness_max_age_seconds=3600, alert_channels="mailto://data@example.com")
    succeeded(schedule, now)
    return schedule


def test_fresh_data_is_not_a_breach(hourly, now):
    assert freshness_check(now=now + timedelta(minutes=59)) == {"breached": [], "recovered": []}
    assert not Alert.objects.exists()


def test_a_breach_is_stored_audited_and_alerted_once_per_incident(hourly, now):
    late = now + timedelta(hours=1, minutes=1)
    assert freshness_check(now=late) == {"breached": ["orders"], "recovered": []}
    hourly.refresh_from_db()
    assert hourly.freshness_breached_at == late
    alert = Alert.objects.get()
    assert alert.kind == AlertKind.FRESHNESS_BREACHED and alert.schedule == hourly
    assert alert.message == ("'orders' breaks its freshness objective: last success at 2026-03-02 12:00:00 UTC is "
                             "1 h 01 min old (objective 1 h)")
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["data@example.com"]
    assert AuditEntry.objects.filter(action="schedule.freshness_breached", actor="governance").count() == 1
    # still stale an hour later: the same incident, no second alert
    assert freshness_check(now=late + timedelta(hours=1)) == {"breached": [], "recovered": []}
    assert Alert.objects.count() == 1 and len(mail.outbox) == 1


def test_recovery_clears_the_breach_and_the_next_breach_is_a_new_incident(hourly, now):
    freshness_check(now=now + timedelta(hours=2))
    succeeded(hourly, now + timedelta(hours=2, minutes=5))
    assert freshness_check(now=now + timedelta(hours=2, minutes=6)) == {"breached": [], "recovered": ["orders"]}
    hourly.refresh_from_db()
    assert hourly.freshness_breached_at is None
    assert AuditEntry.objects.get(action="schedule.freshness_recovered").reason.startswith("fresh again: last success")
    freshness_check(now=now + timedelta(hours=4))
    assert Alert.objects.count() == 2


def test_the_watermark_measure_reads_the_marks_lag(make_schedule, now):
    schedule = make_schedule("wm", freshness_max_age_seconds=7200, freshness_measure="watermark", watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(days=1)).isoformat()})
    [row] = freshness_status(now=now)
    assert row.freshness.age == timedelta(days=1) and row.breached  # nothing loaded: the initial value
    WatermarkState.objects.create(schedule=schedule, value=(now - timedelta(hours=1)).isoformat())
    [row] = freshness_status(now=now)
    assert row.freshness.age == timedelta(hours=1) and not row.breached
    # a recent success does not hide a lagging mark
    succeeded(schedule, now)
    WatermarkState.objects.filter(schedule=schedule).update(value=(now - timedelta(hours=3)).isoformat())
    assert freshness_check(now=now)["breached"] == ["wm"]


def test_a_schedule_that_never_succeeded_ages_from_its_creation(make_schedule, now):
    schedule = make_schedule("new", freshness_max_age_seconds=600)
    Schedule.objects.filter(pk=schedule.pk).update(created_at=now - timedelta(minutes=11))
    assert freshness_check(now=now)["breached"] == ["new"]


def test_disabling_the_schedule_or_removing_the_objective_ends_the_incident(hourly, make_schedule, now):
    from scheduler.services.definitions.schedules import schedule_save

    freshness_check(now=now + timedelta(hours=2))
    schedule_save(data={"enabled": False}, schedule=hourly, actor="tests")
    assert freshness_check(now=now + timedelta(hours=3)) == {"breached": [], "recovered": ["orders"]}
    assert AuditEntry.objects.get(action="schedule.freshness_recovered").reason == "schedule disabled"


def test_the_governance_tick_runs_the_check(hourly, now):
    tick = governance_tick(now=now + timedelta(hours=2), holder="test")
    assert tick.actions["freshness"] == {"breached": ["orders"], "recovered": []}


@pytest.mark.parametrize("fields, field", [
    ({"freshness_max_age_seconds": 0}, "freshness_max_age_seconds"),
    ({"freshness_max_age_seconds": "soon"}, "freshness_max_age_seconds"),
    ({"freshness_max_age_seconds": 60, "freshness_measure": "rows"}, "freshness_measure"),
    ({"freshness_max_age_seconds": 60, "freshness_measure": "watermark"}, "freshness_measure"),
    ({"freshness_max_age_seconds": 60, "freshness_measure": "watermark",
      "watermark_config": {"type": "integer", "column": "id"}}, "freshness_measure"),
])
def test_bad_objectives_are_refused_naming_the_field(make_schedule, fields, field):
    with pytest.raises(ServiceError) as info:
        make_schedule("bad", **fields)
    assert info.value.field == field
    assert not Schedule.objects.filter(name="bad").exists()


def test_the_command_and_the_host_show_the_same_rows(hourly, now):
    freshness_check(now=now + timedelta(hours=2))
    out = StringIO()
    call_command("freshness", "--json", stdout=out)
    [row] = json.loads(out.getvalue())
    assert row["schedule"] == "orders" and row["breached"] is True and row["objective_seconds"] == 3600
    assert row["breached_since"] == (now + timedelta(hours=2)).isoformat()
    assert SchedulerHost().freshness()[0]["schedule"] == "orders"
    out = StringIO()
    call_command("freshness", "--breached", stdout=out)
    assert out.getvalue().startswith("orders: BREACHED (since 2026-03-02 14:00:00 UTC): last success at")


def test_the_schedules_file_carries_the_objective(make_schedule):
    from scheduler.services.definitions.schedule_files import schedules_export

    make_schedule("obj", freshness_max_age_seconds=900)
    text = schedules_export()
    assert "freshness_max_age_seconds: 900" in text and "freshness_measure: last_success" in text
    assert "freshness_breached_at" not in text
