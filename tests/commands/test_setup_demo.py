import re
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from scheduler.models import Run, Schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_paths(settings, tmp_path):
    settings.ETL_DEMO_SOURCE_DB = str(tmp_path / "source.sqlite3")
    settings.ETL_DEMO_WAREHOUSE_DB = str(tmp_path / "warehouse.sqlite3")
    settings.ETL_DEMO_REPORT_DIR = str(tmp_path / "reports")
    settings.ETL_DEMO_LOGINS_FILE = str(tmp_path / "demo-logins.txt")
    return tmp_path


def test_it_creates_the_demo_schedules_a_login_shown_once_and_kicks_off_the_syncs(demo_paths):
    out = StringIO()
    call_command("setup_demo", stdout=out)
    text = out.getvalue()
    names = set(Schedule.objects.values_list("name", flat=True))
    assert {"customer_sync", "order_sync", "revenue_transform", "daily_report", "order_confirmed",
            "webhook_ingest", "nightly"} <= names
    transform = Schedule.objects.get(name="revenue_transform")
    assert set(transform.depends_on.values_list("name", flat=True)) == {"customer_sync", "order_sync"}
    password = re.search(r"login: operator / (\S+)", text).group(1)
    user = User.objects.get(username="operator")
    assert user.check_password(password) and user.groups.filter(name="operator").exists()
    assert not user.is_staff and not user.is_superuser and not user.groups.filter(name="admin").exists()
    admin_password = re.search(r"admin login: admin / (\S+)", text).group(1)
    admin = User.objects.get(username="admin")
    assert admin.check_password(admin_password) and admin.is_staff and admin.groups.filter(name="admin").exists()
    assert admin_password != password
    assert Run.objects.filter(schedule__name__in=["customer_sync", "order_sync"]).count() == 2
    assert (demo_paths / "source.sqlite3").exists()

    again = StringIO()
    call_command("setup_demo", stdout=again)
    assert password not in again.getvalue() and "0 created" in again.getvalue()
    assert Run.objects.count() == 2


def test_the_operator_and_admin_logins_cannot_be_one_user(demo_paths):
    with pytest.raises(CommandError) as info:
        call_command("setup_demo", "--admin-username", "operator", stdout=StringIO())
    assert info.value.returncode == 2 and "--admin-username" in str(info.value)
    assert not Schedule.objects.exists() and not User.objects.exists()


def test_no_admin_login_when_asked_for_none(demo_paths):
    out = StringIO()
    call_command("setup_demo", "--admin-username", "", "--no-kickoff", stdout=out)
    assert "admin login" not in out.getvalue()
    assert list(User.objects.values_list("username", flat=True)) == ["operator"]


def test_the_demo_has_a_command_target_that_runs_prints_and_reports_its_rows(demo_paths, now):
    from scheduler.models import RunLogLine, RunStatus
    from scheduler.services.admission.dispatch import admit_runs
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_trigger_manual

    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    schedule = Schedule.objects.get(name="warehouse_compact")
    assert schedule.target_kind == "command" and schedule.timeout_seconds == 300
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"steps": 2, "pause": 0}, now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert (run.status, run.rows_loaded, run.exit_code) == (RunStatus.SUCCEEDED, 2000, 0)
    lines = set(RunLogLine.objects.filter(run=run).values_list("source", "message"))
    assert ("stdout", "compacting partition 2/2") in lines and ("stderr", "warehouse compacted") in lines


DEMO_TEAMS = {
    "ingest": {"customer_sync", "order_sync", "order_confirmed", "webhook_ingest", "heartbeat", "flaky_feed",
               "warehouse_compact"},
    "analytics": {"revenue_transform", "daily_report", "nightly"},
}


def test_two_demo_teams_own_the_demo_schedules_and_the_operator_acts_on_its_teams_only(demo_paths):
    from scheduler.models import Team

    out = StringIO()
    call_command("setup_demo", "--no-kickoff", stdout=out)
    for team, names in DEMO_TEAMS.items():
        assert set(Schedule.objects.filter(owner__name=team).values_list("name", flat=True)) == names
    operator = User.objects.get(username="operator")
    assert list(operator.etl_teams.values_list("name", flat=True)) == ["ingest"]
    ours, theirs = Schedule.objects.get(name="flaky_feed"), Schedule.objects.get(name="nightly")
    for perm in ("trigger_schedule", "cancel_run", "manage_backfill", "reset_breaker", "manage_watermark",
                 "add_failureack"):
        assert operator.has_perm(f"scheduler.{perm}", ours), perm
        assert not operator.has_perm(f"scheduler.{perm}", theirs), perm
    admin = User.objects.get(username="admin")
    assert admin.has_perm("scheduler.trigger_schedule", theirs) and admin.has_perm("auth.add_user")
    # the login lines say what each login may do
    text = out.getvalue()
    assert "login: operator / " in text and "team ingest" in text and "analytics: view only" in text
    assert Team.objects.filter(name__in=DEMO_TEAMS).count() == 2


def test_an_older_demo_in_the_default_team_is_moved_into_the_demo_teams_once(demo_paths):
    from scheduler.models import AuditEntry, Team

    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    default = Team.objects.get(pk=Team.default_team_id())
    Schedule.objects.update(owner=default)  # what setup_demo made before it had teams
    User.objects.get(username="operator").etl_teams.clear()
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    analytics = set(Schedule.objects.filter(owner__name="analytics").values_list("name", flat=True))
    assert analytics == DEMO_TEAMS["analytics"]
    assert list(User.objects.get(username="operator").etl_teams.values_list("name", flat=True)) == ["ingest"]
    entries = AuditEntry.objects.count()
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    assert AuditEntry.objects.count() == entries  # idempotent: the third run changes nothing


def test_a_schedule_someone_gave_another_team_is_left_where_it_is(demo_paths):
    from scheduler.models import Team

    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    Schedule.objects.filter(name="nightly").update(owner=Team.objects.create(name="platform"))
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    assert Schedule.objects.get(name="nightly").owner.name == "platform"


def test_the_new_logins_are_written_to_a_file_only_the_owner_may_read(demo_paths):
    import stat

    path = demo_paths / "demo-logins.txt"
    path.write_text("old\n")
    path.chmod(0o644)
    out = StringIO()
    call_command("setup_demo", "--no-kickoff", stdout=out)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    password = re.search(r"login: operator / (\S+)", out.getvalue()).group(1)
    text = path.read_text()
    assert f"login: operator / {password}" in text and "admin login: admin / " in text and "old" not in text
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    assert path.read_text() == text  # no new login: the file is left as it was


def test_it_refuses_a_database_holding_other_schedules_naming_them_and_changes_nothing(demo_paths, make_schedule):
    from scheduler.models import AuditEntry, Team

    for name in ("orders_hourly", "invoices", "a_customers", *[f"extra_{i:02}" for i in range(10)]):
        make_schedule(name)
    entries = AuditEntry.objects.count()
    with pytest.raises(CommandError) as info:
        call_command("setup_demo", stdout=StringIO())
    message = str(info.value)
    assert info.value.returncode == 2 and message.startswith(
        "database: it holds schedules that are not the demo's (a_customers, extra_00, ")
    assert "extra_08 and 3 more)" in message and "init_production" in message and "--force" in message
    assert Schedule.objects.count() == 13 and not User.objects.exists() and AuditEntry.objects.count() == entries
    assert not Team.objects.filter(name__in=DEMO_TEAMS).exists() and not (demo_paths / "source.sqlite3").exists()


def test_force_adds_the_demo_beside_other_schedules_and_the_demos_own_schedules_never_count(demo_paths,
                                                                                            make_schedule):
    make_schedule("orders_hourly")
    call_command("setup_demo", "--no-kickoff", "--force", stdout=StringIO())
    assert Schedule.objects.filter(name="nightly").exists() and Schedule.objects.filter(name="orders_hourly").exists()
    Schedule.objects.filter(name="orders_hourly").delete()
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())  # the demo alone: no refusal


def test_make_run_keeps_the_demo_on_the_embedded_default_whatever_the_shell_exports():
    import subprocess

    from tests.integration.cluster import ROOT

    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgres://etl@db.internal/etl", "REDIS_URL": "redis://r/0"}
    plan = subprocess.run(["make", "-n", "run"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    steps = [line for line in plan.stdout.splitlines() if "manage.py" in line]
    assert [line.split("manage.py ")[1] for line in steps] == ["migrate --noinput", "setup_demo", "serve"]
    assert all(line.startswith("env -u DATABASE_URL -u REDIS_URL ") for line in steps), steps


def test_a_test_that_runs_setup_demo_writes_nothing_into_the_working_tree(db):
    """`make test` after `make run` replaced var/demo-logins.txt with a test database's passwords (a test ran
    setup_demo without pointing its files elsewhere): the suite gives every test process a directory of its own."""
    import os
    from pathlib import Path

    from django.conf import settings

    tree = Path(settings.BASE_DIR).resolve()
    for name in ("ETL_DEMO_LOGINS_FILE", "ETL_FILES_DIR", "ETL_DEMO_SOURCE_DB", "ETL_DEMO_WAREHOUSE_DB",
                 "ETL_DEMO_REPORT_DIR"):
        path = Path(getattr(settings, name)).resolve()
        assert not path.is_relative_to(tree), f"{name} = {path}"
        assert os.environ[name] == getattr(settings, name)  # the processes a test starts write there too
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    assert Path(settings.ETL_DEMO_LOGINS_FILE).is_file()
