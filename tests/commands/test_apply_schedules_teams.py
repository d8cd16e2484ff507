"""`apply_schedules --actor`: a file acts as a named actor, only on the teams that actor may edit (issue 22)."""
import getpass
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule
from scheduler.services.definitions.schedule_files import schedules_apply
from scheduler.services.access.teams import PermissionRefused, team_save, team_set_members

pytestmark = pytest.mark.django_db

BILLING = """\
version: 1
schedules:
  - name: invoices
    target_id: demo.noop
    trigger_kind: manual
    owner: billing
"""


@pytest.fixture
def teams(make_user, make_schedule):
    """billing (bea may edit its schedules) and shipping (its schedule 'parcels')."""
    from django.contrib.auth.models import Permission

    billing = team_save(data={"name": "billing"}, actor="tests")
    shipping = team_save(data={"name": "shipping"}, actor="tests")
    bea = make_user("bea", "operator")
    bea.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="scheduler", codename__in=["add_schedule", "change_schedule", "delete_schedule"]))
    team_set_members(team=billing, add=[bea], actor="tests")
    make_schedule("parcels", owner=shipping)
    make_schedule("old_invoices", owner=billing)
    return {"billing": billing, "shipping": shipping, "bea": bea}


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("apply_schedules", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _state():
    return sorted(Schedule.objects.values_list("name", "owner__name", "priority"))


def test_an_apply_is_audited_as_the_shell_user_by_default(tmp_path, teams, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "bea")
    path = tmp_path / "s.yaml"
    path.write_text(BILLING)
    run(path)
    entry = AuditEntry.objects.filter(action="schedule.create").latest("id")
    assert entry.actor == "bea" and entry.actor_kind == "user"


def test_a_file_naming_another_team_is_refused_names_schedule_and_team_audited_and_changes_nothing(tmp_path,
                                                                                                  teams):
    path = tmp_path / "s.yaml"
    path.write_text(BILLING + BILLING.split("schedules:\n")[1].replace("invoices", "parcels")
                    .replace("billing", "shipping") + "    priority: 9\n")
    before = _state()
    with pytest.raises(CommandError) as info:
        run(path, "--actor", "bea")
    assert info.value.returncode == 2
    assert "parcels" in str(info.value) and "shipping" in str(info.value)
    assert _state() == before
    denied = AuditEntry.objects.filter(action="permission.denied", actor="bea")
    assert denied.count() == 1 and "parcels" in denied.get().reason
    assert not AuditEntry.objects.filter(action__startswith="schedule.", actor="bea").exists()


def test_moving_a_schedule_of_another_team_into_ones_own_is_refused(tmp_path, teams):
    path = tmp_path / "s.yaml"
    path.write_text(BILLING.replace("invoices", "parcels"))
    before = _state()
    with pytest.raises(CommandError, match="parcels"):
        run(path, "--actor", "bea", "--json")
    assert _state() == before


def test_prune_touches_only_the_files_teams_and_dry_run_shows_exactly_that(tmp_path, teams):
    path = tmp_path / "s.yaml"
    path.write_text(BILLING)
    out, _ = run(path, "--actor", "bea", "--prune", "--dry-run", "--json")
    plan = {(c["action"], c["schedule"]) for c in json.loads(out)["plan"]}
    assert plan == {("create", "invoices"), ("delete", "old_invoices")}
    assert Schedule.objects.filter(name="old_invoices").exists()
    out, _ = run(path, "--actor", "bea", "--prune")
    assert "- delete old_invoices" in out and "parcels" not in out
    assert set(Schedule.objects.values_list("name", flat=True)) == {"invoices", "parcels"}


def test_an_empty_file_prunes_nothing(tmp_path, teams):
    path = tmp_path / "s.yaml"
    path.write_text("version: 1\nschedules: []\n")
    out, _ = run(path, "--prune")
    assert "0 to delete" in out and Schedule.objects.count() == 2


def test_the_facade_asks_the_same_check(teams):
    before = _state()
    host = SchedulerHost()
    with pytest.raises(PermissionRefused, match="parcels"):
        host.schedules.apply(BILLING.replace("invoices", "parcels").replace("billing", "shipping")
                             + "    priority: 9\n", actor=teams["bea"])
    assert _state() == before
    assert AuditEntry.objects.filter(action="permission.denied", actor="bea").count() == 1
    plan = host.schedules.apply(BILLING, actor=teams["bea"])
    assert plan.applied and AuditEntry.objects.filter(action="schedule.create").latest("id").actor == "bea"


def test_a_viewer_may_not_apply(teams, viewer):
    with pytest.raises(PermissionRefused, match="add_schedule"):
        schedules_apply(text=BILLING, actor=viewer)
    assert not Schedule.objects.filter(name="invoices").exists()
