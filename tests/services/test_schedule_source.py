"""Schedules as code both ways: the file that manages a schedule, edits elsewhere refused, detach, teams, drift."""
from __future__ import annotations

import hashlib
import textwrap
from datetime import timedelta

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule, Team
from scheduler.services.common.errors import Conflict, ServiceError
from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply
from scheduler.services.definitions.schedule_source import MANAGED_FIELDS, schedule_detach
from scheduler.services.definitions.schedules import schedule_save, schedule_set_enabled
from scheduler.services.integrations.channels import mask_url
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db

FILE = textwrap.dedent("""\
    version: 1
    schedules:
      - name: orders_sync
        target_id: demo.noop
        trigger_kind: cron
        trigger_config: {cron: "0 * * * *"}
        priority: 6
      - name: report
        target_id: demo.noop
        trigger_kind: manual
""")


def apply(text=FILE, **kw):
    kw.setdefault("actor", "user:ci")
    return schedules_apply(text=text, **kw)


def test_a_schedule_applied_from_a_file_records_the_file_its_digest_when_and_by_whom(standard_class, now):
    apply(now=now, source="schedules.yaml")
    orders = Schedule.objects.get(name="orders_sync")
    assert orders.source_file == "schedules.yaml" and orders.managed_by == "schedules.yaml"
    assert orders.source_digest == hashlib.sha256(FILE.encode()).hexdigest()
    assert (orders.source_applied_at, orders.source_applied_by) == (now, "ci")
    managed = AuditEntry.objects.filter(action="schedule.managed").order_by("id")
    assert [e.target_id for e in managed] == [str(orders.pk), str(Schedule.objects.get(name="report").pk)]
    assert managed[0].after == {"managed_by": "schedules.yaml", "digest": orders.source_digest}
    # the same file again changes nothing and writes nothing
    count = AuditEntry.objects.count()
    plan = apply(now=now + timedelta(hours=1), source="dir/schedules.yaml")  # the name, not the directory
    assert not plan.has_changes and not plan.drift and plan.managed == []
    assert AuditEntry.objects.count() == count
    assert Schedule.objects.get(name="orders_sync").source_applied_at == now


def test_an_edit_of_a_managed_field_elsewhere_is_refused_naming_the_field_and_the_file(standard_class):
    apply()
    orders = Schedule.objects.get(name="orders_sync")
    count = AuditEntry.objects.count()
    with pytest.raises(Conflict) as info:
        schedule_save(data={"priority": 9}, schedule=orders, actor="user:olivia")
    assert info.value.field == "priority"
    assert str(info.value).startswith("priority: is managed by schedules.yaml")
    assert "detach schedule 'orders_sync'" in str(info.value)
    with pytest.raises(Conflict, match="depends_on: is managed by schedules.yaml"):
        schedule_save(data={"depends_on": ["report"]}, schedule=orders, actor="user:olivia")
    with pytest.raises(Conflict, match="owner: is managed"):
        schedule_save(data={"owner": Team.objects.create(name="payments")}, schedule=orders, actor="tests")
    orders.refresh_from_db()
    assert orders.priority == 6 and not orders.depends_on.exists()
    assert AuditEntry.objects.count() == count
    # the same values are no edit; pause, resume and trigger are operations, not edits
    schedule_save(data={"priority": 6, "target_id": "demo.noop"}, schedule=orders, actor="user:olivia")
    schedule_set_enabled(schedule=orders, enabled=False, actor="tests")
    schedule_set_enabled(schedule=orders, enabled=True, actor="tests")
    assert run_trigger_manual(schedule=orders, actor="tests").pk
    assert "enabled" not in MANAGED_FIELDS and "priority" in MANAGED_FIELDS


def test_a_detach_is_audited_and_lets_the_edit_through_and_the_next_apply_manages_it_again(standard_class, now):
    apply(now=now)
    orders = Schedule.objects.get(name="orders_sync")
    schedule_detach(schedule=orders, actor="user:olivia", reason="hotfix the cron", now=now)
    orders.refresh_from_db()
    assert orders.source_file == "" and orders.source_digest == "" and orders.source_applied_at is None
    entry = AuditEntry.objects.get(action="schedule.detach")
    assert (entry.actor, entry.reason) == ("olivia", "hotfix the cron")
    assert entry.before["managed_by"] == "schedules.yaml" and entry.after == {"managed_by": None}
    schedule_save(data={"priority": 9}, schedule=orders, actor="user:olivia")
    with pytest.raises(Conflict, match="is not managed by a schedules file"):
        schedule_detach(schedule=orders, actor="tests")

    dry = apply(dry_run=True)
    assert dry.drift and dry.unmanaged == ["orders_sync"] and dry.summary["update"] == 1
    assert Schedule.objects.get(name="orders_sync").source_file == ""
    plan = apply()
    assert plan.managed == ["orders_sync"]
    orders.refresh_from_db()
    assert orders.priority == 6 and orders.source_file == "schedules.yaml"


def test_a_detach_with_bad_input_changes_nothing(standard_class):
    apply()
    orders = Schedule.objects.get(name="orders_sync")
    with pytest.raises(ServiceError, match="reason: must not contain the NUL"):
        schedule_detach(schedule=orders, actor="tests", reason="x\x00")
    assert Schedule.objects.get(pk=orders.pk).source_file == "schedules.yaml"
    assert not AuditEntry.objects.filter(action="schedule.detach").exists()


def test_a_changed_file_records_its_new_digest_on_every_schedule_it_lists(standard_class):
    apply()
    changed = FILE.replace("priority: 6", "priority: 7")
    plan = apply(changed)
    assert plan.summary["update"] == 1
    digest = hashlib.sha256(changed.encode()).hexdigest()
    assert set(Schedule.objects.values_list("source_digest", flat=True)) == {digest}


def test_the_host_applies_with_a_source_and_detaches(standard_class):
    host = SchedulerHost()
    host.schedules.apply(FILE, actor="tests", source="team.yaml")
    assert Schedule.objects.get(name="report").source_file == "team.yaml"
    with pytest.raises(Conflict, match="is managed by team.yaml"):
        host.schedules.update("report", actor="tests", priority=1)
    host.schedules.detach("report", actor="tests", reason="moving it")
    assert host.schedules.update("report", actor="tests", priority=1).priority == 1


TEAMS = textwrap.dedent("""\
    version: 1
    teams:
      - name: analytics
        description: Revenue and orders
        members: [olivia, sam]
        alert_channels: ["json://hooks.example.com/analytics?token=s3cret"]
    schedules:
      - name: revenue
        owner: analytics
        target_id: demo.noop
        trigger_kind: manual
""")


def test_teams_declared_in_the_file_are_applied_before_the_schedules_that_name_them(standard_class, make_user):
    make_user("olivia"), make_user("sam"), make_user("tom")
    plan = apply(TEAMS)
    team = Team.objects.get(name="analytics")
    assert team.description == "Revenue and orders"
    assert sorted(team.members.values_list("username", flat=True)) == ["olivia", "sam"]
    assert "token=s3cret" in team.alert_channels
    assert Schedule.objects.get(name="revenue").owner == team
    assert [(t["action"], t["name"]) for t in plan.teams] == [("create", "analytics")]
    assert "s3cret" not in str(plan.as_dict()), "channel secrets are masked in what is printed"
    assert AuditEntry.objects.filter(action="team.create", actor="ci").exists()
    assert AuditEntry.objects.get(action="team.members").after == {"members": ["olivia", "sam"]}

    # the file states the whole team: a member not listed goes, one listed comes; a masked URL keeps the secret
    url = "json://hooks.example.com/analytics?token=s3cret"
    again = apply(TEAMS.replace("[olivia, sam]", "[tom]").replace(url, mask_url(url)))
    assert [(t["action"], t["changes"]) for t in again.teams] == [
        ("update", {"members": {"old": ["olivia", "sam"], "new": ["tom"]}})]
    team.refresh_from_db()
    assert list(team.members.values_list("username", flat=True)) == ["tom"] and "token=s3cret" in team.alert_channels


@pytest.mark.parametrize("entry, field, problem", [
    ("{name: analytics, members: [nobody]}", "members", "unknown user 'nobody'"),
    ("{name: analytics, members: olivia}", "members", "must be a list of user names"),
    ("{name: analytics, members: [olivia, olivia]}", "members", "names a user twice"),
    ("{name: 'bad name!'}", "name", "must be 1-100 letters"),
    ("{name: analytics, colour: red}", "colour", "unknown key"),
    ("{name: analytics, alert_channels: [ftp://x]}", "alert_channels", ""),
])
def test_a_bad_team_entry_refuses_the_whole_file_naming_entry_and_field(standard_class, make_user, entry, field,
                                                                         problem):
    make_user("olivia")
    text = f"version: 1\nteams:\n  - {{name: first}}\n  - {entry}\nschedules: []\n"
    with pytest.raises(ScheduleFileError) as info:
        apply(text)
    found = [(p.entry, p.field, p.problem) for p in info.value.problems]
    assert len(found) == 1 and found[0][0].startswith("teams[1]") and found[0][1] == field
    assert problem in found[0][2]
    assert not Team.objects.filter(name__in=["first", "analytics"]).exists()


def test_a_teams_section_that_is_no_list_is_refused(standard_class):
    with pytest.raises(ScheduleFileError, match="teams: must be a list of teams"):
        apply("version: 1\nteams: {name: x}\nschedules: []\n")


def test_a_dry_run_with_teams_keeps_nothing_and_reports_drift(standard_class, make_user):
    make_user("olivia"), make_user("sam")
    plan = apply(TEAMS, dry_run=True)
    assert plan.drift and plan.summary["create"] == 1 and plan.teams[0]["action"] == "create"
    assert not Team.objects.filter(name="analytics").exists() and not Schedule.objects.filter(name="revenue").exists()
    apply(TEAMS)
    assert not apply(TEAMS, dry_run=True).drift
