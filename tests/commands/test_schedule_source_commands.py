"""`apply_schedules --check` (a CI gate on drift), `detach_schedule`, `delete_schedule [--stop-runs]`."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Run, RunStatus, Schedule, Team
from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

pytestmark = pytest.mark.django_db

FILE = """\
version: 1
teams:
  - name: analytics
    members: [olivia]
schedules:
  - name: orders_sync
    owner: analytics
    target_id: demo.noop
    trigger_kind: cron
    trigger_config: {cron: "0 * * * *"}
    priority: 6
"""


@pytest.fixture
def schedules_file(tmp_path, make_user, standard_class):
    make_user("olivia", "admin")
    path = tmp_path / "team-schedules.yaml"
    path.write_text(FILE)
    return path


def call(name, *args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(name, *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def check(path, *args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("apply_schedules", str(path), "--check", *args, stdout=out, stderr=StringIO())
    except SystemExit as exc:
        return exc.code, out.getvalue()
    return 0, out.getvalue()


def test_check_exits_1_printing_the_differences_and_0_once_the_database_matches(schedules_file):
    code, out = check(schedules_file)
    assert code == 1
    assert "+ create team analytics" in out and "+ create orders_sync" in out
    assert "drift: the database differs from team-schedules.yaml" in out
    assert not Schedule.objects.exists() and not Team.objects.filter(name="analytics").exists()

    out, _ = call("apply_schedules", schedules_file)
    assert Schedule.objects.get(name="orders_sync").source_file == "team-schedules.yaml"
    code, out = check(schedules_file)
    assert code == 0 and "no drift: the database matches team-schedules.yaml" in out

    Schedule.objects.filter(name="orders_sync").update(priority=2)  # a change behind the file's back
    code, out = check(schedules_file)
    assert code == 1 and "~ update orders_sync\n    priority: 2 -> 6" in out
    assert Schedule.objects.get(name="orders_sync").priority == 2, "a check changes nothing"


def test_check_reports_a_detached_schedule_and_json_says_drift(schedules_file):
    call("apply_schedules", schedules_file)
    out, _ = call("detach_schedule", "orders_sync", "--reason", "hotfix", "--actor", "olivia")
    assert out.strip() == "detached orders_sync from team-schedules.yaml"
    assert AuditEntry.objects.get(action="schedule.detach").actor == "olivia"
    code, out = check(schedules_file)
    assert code == 1 and "! orders_sync is not managed by team-schedules.yaml" in out
    code, out = check(schedules_file, "--json")
    data = json.loads(out)
    assert code == 1 and data["drift"] and data["unmanaged"] == ["orders_sync"] and not data["applied"]


def test_check_of_an_invalid_file_exits_2(schedules_file):
    schedules_file.write_text(FILE.replace("members: [olivia]", "members: [nobody]"))
    with pytest.raises(CommandError) as info:
        check(schedules_file)
    assert info.value.returncode == 2


def test_detach_of_an_unmanaged_or_unknown_schedule_exits_2(make_schedule):
    make_schedule("adhoc")
    for name, message in (("adhoc", "is not managed by a schedules file"), ("nope", "unknown schedule")):
        with pytest.raises(CommandError, match=message) as info:
            call("detach_schedule", name)
        assert info.value.returncode == 2


def test_delete_schedule_refuses_unfinished_runs_naming_them_then_stops_them(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    queued = make_run(schedule, RunStatus.QUEUED)
    running = make_run(schedule, RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    with pytest.raises(CommandError) as info:
        call("delete_schedule", "orders")
    assert info.value.returncode == 2
    assert f"unfinished runs: {queued.pk} (QUEUED), {running.pk} (RUNNING)" in str(info.value)
    assert Schedule.objects.filter(pk=schedule.pk).exists()

    out, _ = call("delete_schedule", "orders", "--stop-runs", "--reason", "retired", "--json")
    assert json.loads(out) == {"schedule": "orders", "status": "deleting", "stopping_runs": [running.pk]}
    assert Run.objects.get(pk=queued.pk).status == RunStatus.CANCELLED
    assert Run.objects.get(pk=running.pk).stopping


def test_delete_schedule_deletes_at_once_when_nothing_runs_and_holds_a_user_to_their_rights(make_schedule, operator):
    make_schedule("orders")
    with pytest.raises(CommandError, match="lacks the permission scheduler.delete_schedule"):
        call("delete_schedule", "orders", "--actor", "olivia")
    out, _ = call("delete_schedule", "orders")
    assert out.strip() == "deleted orders" and not Schedule.objects.exists()
    with pytest.raises(CommandError, match="unknown schedule"):
        call("delete_schedule", "orders")


def test_team_assign_of_a_managed_schedule_is_refused_before_any_change(schedules_file, make_schedule):
    call("apply_schedules", schedules_file)
    adhoc = make_schedule("adhoc")
    Team.objects.create(name="billing")
    with pytest.raises(CommandError, match="owner: is managed by team-schedules.yaml"):
        call("team", "assign", "billing", "adhoc", "orders_sync")
    assert Schedule.objects.get(pk=adhoc.pk).owner.name == "default"


def test_check_sees_a_connection_that_differs_from_the_file(schedules_file, settings):
    from cryptography.fernet import Fernet

    settings.ETL_CONNECTION_KEYS = [Fernet.generate_key().decode()]
    schedules_file.write_text(FILE.replace("schedules:\n", "connections:\n  - {name: warehouse, owner: analytics, "
                                                          "kind: postgres, host: db.example, port: 5432}\n"
                                                          "schedules:\n"))
    call("apply_schedules", schedules_file)
    assert check(schedules_file)[0] == 0
    from scheduler.models import Connection

    Connection.objects.filter(name="warehouse").update(host="db2.example")
    code, out = check(schedules_file)
    assert code == 1 and "~ update connection warehouse" in out and "host" in out
    assert Connection.objects.get(name="warehouse").host == "db2.example", "a check changes nothing"
