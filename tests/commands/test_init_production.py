"""`init_production` (issue 32, point 5): a real installation made ready with no demo; the password never from argv;
idempotent; bad input names the field and changes nothing. The first start runs on an empty database of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection

from scheduler.models import AuditEntry, Schedule, WorkloadClass
from tests.integration.cluster import ROOT, child_database_url

pytestmark = pytest.mark.django_db
PASSWORD = "Coral-Anchor-Lantern-58"


@pytest.fixture(autouse=True)
def no_password_in_env(monkeypatch):
    monkeypatch.delenv("ETL_ADMIN_PASSWORD", raising=False)


def _init(*args, stdin: str | None = None) -> str:
    out = StringIO()
    call_command("init_production", *args, stdout=out, stderr=StringIO(),
                 **({"stdin": StringIO(stdin)} if stdin is not None else {}))
    return out.getvalue()


def test_it_makes_the_classes_and_an_admin_from_the_environment_and_no_demo(monkeypatch):
    monkeypatch.setenv("ETL_ADMIN_PASSWORD", PASSWORD)
    WorkloadClass.objects.filter(name="critical").delete()
    text = _init()
    admin = User.objects.get(username="admin")
    assert admin.check_password(PASSWORD) and admin.is_staff and admin.groups.filter(name="admin").exists()
    assert set(WorkloadClass.objects.values_list("name", flat=True)) >= {"standard", "heavy", "critical"}
    assert "(created: critical)" in text and "admin login: admin created" in text
    assert "no demo: no schedules or logins of the demo" in text and PASSWORD not in text
    assert not Schedule.objects.exists() and list(User.objects.values_list("username", flat=True)) == ["admin"]
    entry = AuditEntry.objects.get(action="install.init")
    assert entry.after["admin_created"] is True and entry.after["classes_created"] == ["critical"]


def test_it_reads_the_password_from_stdin_and_a_second_run_changes_nothing():
    _init("--admin-username", "ops", "--password-stdin", stdin=PASSWORD + "\n")
    assert User.objects.get(username="ops").check_password(PASSWORD)
    WorkloadClass.objects.filter(name="heavy").update(concurrency_limit=3)  # a site's own setting stays
    out = StringIO()
    call_command("init_production", "--admin-username", "ops", "--json", stdout=out)  # no password: it exists
    report = json.loads(out.getvalue())
    assert report["admin"] == {"username": "ops", "created": False} and report["migrations_applied"] == []
    assert report["workload_classes"]["created"] == [] and report["demo_schedules"] == []
    assert WorkloadClass.objects.get(name="heavy").concurrency_limit == 3
    assert User.objects.get(username="ops").check_password(PASSWORD) and User.objects.count() == 1


def test_no_admin_needs_no_password_and_makes_no_login():
    text = _init("--no-admin")
    assert "admin login: none made (--no-admin)" in text and not User.objects.exists()
    assert WorkloadClass.objects.filter(name__in=["standard", "heavy", "critical"]).count() == 3


@pytest.mark.parametrize("args, env, stdin, message", [
    ((), None, None, "password: the admin login 'admin' does not exist yet and needs one: give it on stdin"),
    (("--password-stdin",), None, "\n", "password: the admin login 'admin' does not exist yet"),
    ((), "short", None, "password (ETL_ADMIN_PASSWORD): This password is too short."),
    (("--password-stdin",), None, "password123\n", "password (stdin): This password is too common."),
    (("--password-stdin",), PASSWORD, PASSWORD, "password: give it on stdin (--password-stdin) or in "
                                                 "ETL_ADMIN_PASSWORD, not both"),
    (("--admin-username", "bad name!"), PASSWORD, None, "--admin-username: Enter a valid username."),
    (("--admin-username", " "), PASSWORD, None, "--admin-username: must not be empty"),
])
def test_bad_input_names_the_field_and_changes_nothing(monkeypatch, args, env, stdin, message):
    if env is not None:
        monkeypatch.setenv("ETL_ADMIN_PASSWORD", env)
    WorkloadClass.objects.filter(name="critical").delete()
    with pytest.raises(CommandError) as info:
        _init(*args, stdin=stdin)
    assert info.value.returncode == 2 and str(info.value).startswith(message), str(info.value)
    assert not User.objects.exists() and not WorkloadClass.objects.filter(name="critical").exists()
    assert not AuditEntry.objects.filter(action="install.init").exists()


def test_a_password_on_the_command_line_is_refused():
    with pytest.raises(CommandError) as info:
        call_command("init_production", "--password", PASSWORD, stdout=StringIO())
    assert info.value.returncode == 2 and str(info.value).startswith("--password: never on the command line")
    assert PASSWORD not in str(info.value) and not User.objects.exists()


def _fresh_database(tmp_path) -> tuple[str, callable]:
    """(URL of an empty database of this test's own, drop())."""
    if connection.vendor == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.sqlite3'}", lambda: None
    import psycopg

    name = f"{connection.settings_dict['NAME']}_init"
    url = child_database_url()
    admin_url = url.rsplit("/", 1)[0] + "/postgres"

    def run(sql):
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql)

    run(f'DROP DATABASE IF EXISTS "{name}"')
    run(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}", lambda: run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.integration
def test_the_first_start_migrates_an_empty_database_and_a_second_start_is_a_no_op(tmp_path):
    url, drop = _fresh_database(tmp_path)
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "ETL_ADMIN_PASSWORD")}
    env.update(DATABASE_URL=url, ETL_VAR_DIR=str(tmp_path / "var"), PYTHONUNBUFFERED="1")

    def start(*args, stdin=""):
        return subprocess.run([sys.executable, "manage.py", "init_production", *args], cwd=ROOT, env=env,
                              input=stdin, capture_output=True, text=True, timeout=300)
    try:
        first = start("--password-stdin", "--json", stdin=PASSWORD + "\n")
        assert first.returncode == 0, first.stderr
        report = json.loads(first.stdout)
        assert "scheduler.0001_initial" in report["migrations_applied"] and report["admin"]["created"] is True
        assert {c["name"] for c in report["workload_classes"]["all"]} == {"standard", "heavy", "critical"}
        again = start()
        assert again.returncode == 0, again.stderr
        assert "migrations: none to apply" in again.stdout and "admin login: admin exists (unchanged" in again.stdout
        assert PASSWORD not in first.stdout + first.stderr + again.stdout + again.stderr
    finally:
        drop()
