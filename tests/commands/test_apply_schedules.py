"""`apply_schedules FILE [--dry-run] [--prune] [--json]` and `export_schedules`."""
import getpass
import io
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Schedule

pytestmark = pytest.mark.django_db

FILE = """\
version: 1
schedules:
  - name: orders_sync
    target_id: demo.orders_sync
    trigger_kind: cron
    trigger_config: {cron: "0 * * * *"}
    priority: 6
  - name: report
    target_id: demo.daily_report
    trigger_kind: upstream
    depends_on: [orders_sync]
"""


@pytest.fixture
def schedules_file(tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text(FILE)
    return path


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("apply_schedules", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_the_plan_and_applies_it(schedules_file, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # no such user: a shell trusted as before
    out, _ = run(schedules_file)
    assert "+ create orders_sync\n+ create report\n" in out
    assert "plan: 2 to create, 0 to update, 0 unchanged, 0 to delete" in out and "applied" in out
    assert Schedule.objects.count() == 2
    assert set(AuditEntry.objects.values_list("actor", flat=True)) == {"shelly"}


def test_an_update_shows_the_field_diff_and_json_has_it_too(schedules_file, make_schedule):
    run(schedules_file)
    schedules_file.write_text(FILE.replace("priority: 6", "priority: 7"))
    out, _ = run(schedules_file, "--dry-run")
    assert "~ update orders_sync\n    priority: 6 -> 7\n= unchanged report\n" in out
    assert "dry run: nothing was changed" in out
    assert Schedule.objects.get(name="orders_sync").priority == 6
    out, _ = run(schedules_file, "--json")
    data = json.loads(out)
    assert data["ok"] and data["applied"] and not data["dry_run"]
    assert data["summary"] == {"create": 0, "update": 1, "unchanged": 1, "delete": 0}
    assert data["plan"][0] == {"action": "update", "schedule": "orders_sync",
                               "changes": {"priority": {"old": 6, "new": 7}}}
    assert Schedule.objects.get(name="orders_sync").priority == 7


def test_twice_is_nothing_to_change(schedules_file):
    run(schedules_file)
    out, _ = run(schedules_file)
    assert "plan: 0 to create, 0 to update, 2 unchanged, 0 to delete\nnothing to change" in out


def test_prune_deletes_what_the_file_does_not_list(schedules_file, make_schedule):
    make_schedule("legacy")
    out, _ = run(schedules_file, "--prune")
    assert "- delete legacy" in out
    assert not Schedule.objects.filter(name="legacy").exists()


def test_an_invalid_file_exits_2_names_entry_and_field_and_changes_nothing(schedules_file):
    schedules_file.write_text(FILE.replace('"0 * * * *"', '"0 * * *"').replace("priority: 6", "priority: 12"))
    with pytest.raises(CommandError) as info:
        run(schedules_file)
    assert info.value.returncode == 2
    assert "nothing was changed" in str(info.value)
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(schedules_file), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["ok"] is False
    assert data["errors"] == [
        {
            "entry": "schedules[0] (orders_sync)",
            "field": "priority",
            "problem": "must be a whole number from 0 to 9, got 12",
        },
        {
            "entry": "schedules[0] (orders_sync)",
            "field": "trigger_config.cron",
            "problem": "cron: expected 5 fields (minute hour day month weekday) or 6 with seconds last, got 4",
        },
    ]
    assert not Schedule.objects.exists()


def test_the_text_output_of_an_invalid_file_goes_to_stderr(schedules_file):
    schedules_file.write_text("schedules:\n  - name: x\n    target_id: demo.noop\n    colour: red\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(schedules_file), stdout=StringIO(), stderr=err)
    assert "error: schedules[0] (x): colour: unknown field" in err.getvalue()


def test_a_missing_file_exits_2(tmp_path):
    with pytest.raises(CommandError) as info:
        run(tmp_path / "nope.yaml")
    assert info.value.returncode == 2 and "cannot read it" in str(info.value)


def test_dash_reads_standard_input(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(FILE))
    run("-")
    assert Schedule.objects.count() == 2


def test_export_writes_what_apply_reads_back_unchanged(schedules_file, tmp_path):
    run(schedules_file)
    target = tmp_path / "exported.yaml"
    call_command("export_schedules", "--output", str(target), stdout=StringIO(), stderr=StringIO())
    out, _ = run(target, "--prune")
    assert "2 unchanged, 0 to delete" in out
    stdout = StringIO()
    call_command("export_schedules", "report", stdout=stdout)
    assert "name: report" in stdout.getvalue() and "name: orders_sync" not in stdout.getvalue()


def test_export_of_an_unknown_schedule_exits_2():
    with pytest.raises(CommandError) as info:
        call_command("export_schedules", "ghost", stdout=StringIO())
    assert info.value.returncode == 2 and "unknown schedule 'ghost'" in str(info.value)
