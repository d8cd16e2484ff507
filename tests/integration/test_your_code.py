"""The walk of docs/your-code.md, done: `new_project` -> installed into a venv beside the scheduler -> its own test
of one window passes -> its schedules applied -> its pipeline and command run on a real cluster -> its code is
changed -> the cluster restarts on it by itself and the new version runs (issue 32). On the suite's database:
SQLite, or PostgreSQL with DATABASE_URL."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from scheduler.models import Cluster, Run, RunStatus, Schedule
from scheduler.pipelines.code import file_digest
from scheduler.pipelines.values import iso_utc
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import ROOT, child_database_url, start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
S = RunStatus


def _venv(where: Path, project: Path) -> Path:
    """A venv that sees the scheduler's environment, with the project installed into it (editable, no deps)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the scheduler's environment under the team's: its .pth files (the editable scheduler) are read too
    Path(site, "_scheduler_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "-e",
                    str(project)], check=True, timeout=600)
    return python


def _env() -> dict:
    """The environment of the team's commands: not activated (its console scripts are found beside its Python)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return {**env, "DATABASE_URL": child_database_url()}


def _stamp(when):
    return when if connection.vendor == "postgresql" else iso_utc(when)


def _warehouse() -> dict[int, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, kind FROM acme_events")
        return dict(cursor.fetchall())


def test_a_scaffolded_package_runs_on_the_scheduler_and_its_next_version_too(tmp_path, admin_client):
    project = tmp_path / "acme-etl"
    call_command("new_project", "acme", "--dir", str(project))
    now = timezone.now()
    schedules = project / "schedules.yaml"
    # where this team's history begins: an hour ago (the scaffold starts at today's midnight)
    schedules.write_text(re.sub(r'initial: "[^"]+"', f'initial: "{(now - timedelta(hours=1)).isoformat()}"',
                                schedules.read_text()))
    python = _venv(tmp_path / "venv", project)
    env = _env()

    # its own test of one window, in its venv
    tested = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project,
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr

    stamp = "TIMESTAMP WITH TIME ZONE" if connection.vendor == "postgresql" else "TEXT"
    real = "DOUBLE PRECISION" if connection.vendor == "postgresql" else "REAL"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, amount {real}, updated_at {stamp})")
        for pk, kind, minutes in [(1, "Signup", 50), (2, "Order", 30), (3, "Refund", 10)]:
            cursor.execute("INSERT INTO events VALUES (%s, %s, %s, %s)",
                           [pk, kind, pk * 1.5, _stamp(now - timedelta(minutes=minutes))])
    proc = None
    log = tmp_path / "cluster.log"
    try:
        applied = subprocess.run([str(python), "manage.py", "apply_schedules", str(schedules)], cwd=ROOT,
                                 env=env, capture_output=True, text=True, timeout=120, check=False)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "+ create acme_events\n+ create acme_export\n" in applied.stdout
        # the scaffold's sync also fires every 5 minutes on the clock's boundaries: a boundary before or between the
        # manual syncs below ran one of its own (0 rows left for the first, or the page compared with it)
        Schedule.objects.filter(name="acme_events").update(next_fire_at=timezone.now() + timedelta(days=1))
        db = child_database_url()
        proc = start_cluster("acme", log_path=log, python=str(python), extra_env={
            "ACME_SOURCE_DB": db, "ACME_WAREHOUSE_DB": db, "ETL_CODE_CHECK_SECONDS": "0.3",
            # as the scaffold's README says: the export command gets the warehouse only when it is passed on
            "ETL_COMMAND_ENV_PASSTHROUGH": "ACME_WAREHOUSE_DB"})
        first_cluster = wait_until(lambda: Cluster.objects.first(), timeout=90, what="the cluster", log_path=log)
        assert "acme-etl 0.1.0" in first_cluster.code_version and "pipeline:acme.events" in first_cluster.targets

        sync, export = Schedule.objects.get(name="acme_events"), Schedule.objects.get(name="acme_export")
        first = run_trigger_manual(schedule=sync, actor="tests")
        wait_until(lambda: Run.objects.get(pk=first.pk).is_final, timeout=90, what="the first sync", log_path=log)
        first.refresh_from_db()
        pipelines = project / "src" / "acme_etl" / "pipelines.py"
        assert (first.status, first.rows_loaded) == (S.SUCCEEDED, 3), (first.reason, first.error)
        assert first.code_version == f"acme-etl 0.1.0 · {file_digest(pipelines)}"
        assert _warehouse() == {1: "signup", 2: "order", 3: "refund"}
        exported = wait_until(lambda: Run.objects.filter(schedule=export, status__in=S.final()).first(),
                              timeout=90, what="the command after the sync", log_path=log)
        assert (exported.status, exported.rows_loaded) == (S.SUCCEEDED, 3), (exported.reason, exported.error)
        assert exported.code_version == f"acme-etl 0.1.0 · {file_digest(pipelines.with_name('export.py'))}"

        # the team changes its code; a row arrives late, stamped behind the mark (inside the overlap)
        pipelines.write_text(pipelines.read_text().replace('row["kind"].lower()', 'row["kind"].upper()'))
        mark = timezone.now() - timedelta(seconds=120)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO events VALUES (%s, %s, %s, %s)",
                           [99, "Late", 9.0, _stamp(mark - timedelta(seconds=100))])
        wait_until(lambda: Cluster.objects.exclude(pk=first_cluster.pk).exists(), timeout=90,
                   what="the cluster to restart on the new code", log_path=log)
        second = run_trigger_manual(schedule=sync, actor="tests")
        wait_until(lambda: Run.objects.get(pk=second.pk).is_final, timeout=90, what="the second sync", log_path=log)
        second.refresh_from_db()
        assert second.status == S.SUCCEEDED, (second.reason, second.error)
        assert second.code_version == f"acme-etl 0.1.0 · {file_digest(pipelines)}" != first.code_version
        assert _warehouse() == {1: "signup", 2: "order", 3: "refund", 99: "LATE"}
        page = admin_client.get(reverse("scheduler:run_detail", args=[second.pk])).content.decode()
        assert f"code changed since <a href=\"/runs/{first.pk}/\">run #{first.pk}</a>" in page
    finally:
        if proc is not None:
            code = stop_cluster(proc)
            assert code == 0, log.read_text()[-3000:]
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS events")
            cursor.execute("DROP TABLE IF EXISTS acme_events")
