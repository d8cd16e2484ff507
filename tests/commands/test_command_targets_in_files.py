"""`apply_schedules` / `export_schedules` / `validate_schedules` with command targets, limits and deadlines."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Schedule

pytestmark = pytest.mark.django_db

FILE = """\
version: 1
schedules:
  - name: nightly_dbt
    target_kind: command
    command: {argv: [dbt, build, --select, "tag:nightly"], cwd: /srv/dbt, env: {DBT_TARGET: prod}}
    timeout_seconds: 3600
"""


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("apply_schedules", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_issues_example_applies_and_exports_back_unchanged(tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text(FILE)
    out, _ = run(path)
    assert "+ create nightly_dbt" in out and "applied" in out
    exported = tmp_path / "exported.yaml"
    call_command("export_schedules", "--output", str(exported), stdout=StringIO(), stderr=StringIO())
    assert "target_kind: command" in exported.read_text()
    out, _ = run(exported, "--prune")
    assert "0 to create, 0 to update, 1 unchanged, 0 to delete" in out


def test_a_bad_command_exits_2_naming_entry_and_field_and_changes_nothing(tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text(FILE.replace("cwd: /srv/dbt", "cwd: srv/dbt").replace("timeout_seconds: 3600",
                                                                          "timeout_seconds: 0"))
    err = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("apply_schedules", str(path), stdout=StringIO(), stderr=err)
    assert info.value.returncode == 2
    assert "error: schedules[0] (nightly_dbt): command.cwd: must be an absolute path" in err.getvalue()
    assert "error: schedules[0] (nightly_dbt): timeout_seconds: must be >= 1, got 0" in err.getvalue()
    assert not Schedule.objects.exists()


def test_validate_schedules_finds_a_command_broken_behind_the_services_back(make_schedule):
    schedule = make_schedule("dbt", target_kind="command", target_id="", command={"argv": ["dbt", "build"]})
    Schedule.objects.filter(pk=schedule.pk).update(command={"argv": "dbt build"})  # a raw SQL fix gone wrong
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("validate_schedules", "--json", stdout=out)
    assert info.value.returncode == 1
    [problem] = json.loads(out.getvalue())["problems"]
    assert problem["schedule"] == "dbt" and problem["field"] == "command.argv"
