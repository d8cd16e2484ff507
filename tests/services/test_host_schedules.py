"""`SchedulerHost.schedules`: create, update, delete, get, apply and export schedules from Python."""
from __future__ import annotations

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule
from scheduler.services.common.errors import NotFound, ServiceError

pytestmark = pytest.mark.django_db


@pytest.fixture
def host():
    return SchedulerHost()


def test_create_saves_through_the_service_with_next_fire_and_audit(host, standard_class):
    schedule = host.schedules.create("orders_sync", target_id="demo.orders_sync", trigger_kind="cron",
                                     trigger_config={"cron": "0 * * * *"}, timezone="Europe/Berlin",
                                     actor="api:etl-bot", reason="from code")
    assert schedule.pk and schedule.next_fire_at is not None
    entry = AuditEntry.objects.get(action="schedule.create")
    assert entry.actor == "api:etl-bot" and entry.reason == "from code"
    assert host.schedules.get("orders_sync") == schedule
    assert [s.name for s in host.schedules.list()] == ["orders_sync"]


def test_update_changes_only_the_given_fields(host, make_schedule):
    make_schedule("s", priority=3, description="before")
    host.schedules.update("s", priority=7)
    schedule = host.schedules.get("s")
    assert (schedule.priority, schedule.description) == (7, "before")
    assert host.schedules.spec("s")["priority"] == 7


def test_delete_removes_it_with_an_audit_entry(host, make_schedule):
    make_schedule("gone")
    host.schedules.delete("gone", reason="replaced")
    assert not Schedule.objects.filter(name="gone").exists()
    assert AuditEntry.objects.get(action="schedule.delete").reason == "replaced"


@pytest.mark.parametrize("fields, field", [
    ({"target_id": "demo.noop", "trigger_kind": "cron", "trigger_config": {"cron": "nope"}}, "trigger_config.cron"),
    ({"target_id": "demo.noop", "priorty": 3}, "priorty"),
    ({"target_id": "no.such.pipeline"}, "target_id"),
    ({"target_id": "demo.noop", "workload_class": "gpu"}, "workload_class"),
    ({"target_id": "demo.noop", "depends_on": ["ghost"]}, "depends_on"),
])
def test_bad_input_names_the_field_and_creates_nothing(host, standard_class, fields, field):
    with pytest.raises(ServiceError) as info:
        host.schedules.create("bad", **fields)
    assert info.value.field == field
    assert not Schedule.objects.exists()


def test_unknown_names_are_not_found(host, standard_class):
    for call in (lambda: host.schedules.get("ghost"), lambda: host.schedules.update("ghost", priority=1),
                 lambda: host.schedules.delete("ghost")):
        with pytest.raises(NotFound, match="unknown schedule 'ghost'"):
            call()


def test_apply_and_export_round_trip(host, make_schedule):
    make_schedule("a", trigger_kind="interval", trigger_config={"seconds": 60})
    text = host.schedules.export()
    plan = host.schedules.apply(text, prune=True)
    assert plan.summary == {"create": 0, "update": 0, "unchanged": 1, "delete": 0}
    plan = host.schedules.apply(text.replace("seconds: 60", "seconds: 120"), dry_run=True)
    assert plan.changes[0].changes == {"trigger_config": ({"seconds": 60}, {"seconds": 120})}
    assert host.schedules.get("a").trigger_config == {"seconds": 60}
