"""A schedule's own retention_days at every door that edits a schedule: set, exported, bad values refused."""
from __future__ import annotations

import textwrap

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply, schedules_export
from scheduler.services.definitions.schedules import schedule_save

pytestmark = pytest.mark.django_db


def _file(extra: str) -> str:
    entry = "- name: orders\n  target_id: demo.noop\n  trigger_kind: manual\n" + textwrap.indent(extra, "  ")
    return "version: 1\nschedules:\n" + textwrap.indent(entry, "  ")


def test_the_schedules_file_sets_exports_and_clears_retention_days(standard_class):
    schedules_apply(text=_file("retention_days: 400\n"), actor="tests")
    assert Schedule.objects.get(name="orders").retention_days == 400
    assert "retention_days: 400" in schedules_export()
    schedules_apply(text=_file(""), actor="tests")  # left out: the settings' default again
    assert Schedule.objects.get(name="orders").retention_days is None


@pytest.mark.parametrize("value, words", [
    ("0", "must be >= 1"), ("-3", "must be >= 1"), ("soon", "must be a whole number"),
    ("36501", "must be <= 36500"),
])
def test_a_bad_retention_days_in_the_file_is_refused_naming_it_and_changes_nothing(standard_class, value, words):
    with pytest.raises(ScheduleFileError) as info:
        schedules_apply(text=_file(f"retention_days: {value}\n"), actor="tests")
    [problem] = info.value.problems
    assert problem.field == "retention_days" and words in problem.problem
    assert not Schedule.objects.exists() and not AuditEntry.objects.exists()


def test_the_python_facade_sets_and_refuses_retention_days(standard_class):
    host = SchedulerHost()
    host.schedules.create("orders", target_id="demo.noop", trigger_kind="manual", retention_days=30)
    assert host.schedules.spec("orders")["retention_days"] == 30
    with pytest.raises(ServiceError) as info:
        host.schedules.update("orders", retention_days=10**9)
    assert "retention_days" in {e.field for e in info.value.errors}
    assert Schedule.objects.get(name="orders").retention_days == 30


def test_the_service_records_the_change_in_the_audit_log(standard_class):
    schedule_save(data={"name": "orders", "target_id": "demo.noop", "trigger_kind": "manual"}, actor="tests")
    schedule_save(data={"retention_days": 14}, schedule=Schedule.objects.get(name="orders"),
                  actor="tests")
    entry = AuditEntry.objects.filter(action="schedule.update").latest("id")
    assert entry.after["retention_days"] == 14
