"""A command or dbt run starts with a clean environment, never the server's secrets (issue 33, point 3)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from scheduler.models import RunLogLine, RunStatus
from scheduler.services.worker.commands import base_env
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual

ROOT = Path(__file__).resolve().parents[2]
# what the probe found in a worker's environment, and a few more of the kind
SERVER = {
    "SECRET_KEY": "probe-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "DATABASE_URL": "postgres://etl:db-password-77@db.internal:5432/etl",
    "REDIS_URL": "redis://:redis-password-88@cache.internal:6379/0",
    "ETL_METRICS_TOKEN": "metrics-token-abcdef123456",
    "ETL_ALERT_WEBHOOK_SECRET": "alert-webhook-secret-4242",
    "ETL_CONN_WAREHOUSE": "postgres://wh:warehouse-pass-99@wh.internal/dwh",
    "ETL_CONNECTION_KEYS": "fernet-keys-are-secret-too",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-of-the-worker-host",
}
FACTS = {"ETL_RUN_ID", "ETL_SCHEDULE", "ETL_LOGICAL_TIME", "ETL_WINDOW_LOW", "ETL_WINDOW_HIGH", "ETL_PARAMS",
         "ETL_ATTEMPT", "ETL_BACKFILL_ID", "ETL_RESULT_FILE"}


@pytest.fixture
def worker_env(monkeypatch):
    """The worker's environment as the probe found it: the server's secrets beside the usual variables."""
    for name, value in {**SERVER, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/home/etl",
                        "LANG": "C.UTF-8", "LC_TIME": "en_GB.UTF-8", "TZ": "Europe/Amsterdam",
                        "MY_TOOL_HOME": "/opt/tool", "UNRELATED": "x"}.items():
        monkeypatch.setenv(name, value)
    return SERVER


def _run(schedule, now):
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    return run


def _printed_env(run) -> dict[str, str]:
    lines = RunLogLine.objects.filter(run=run, source="stdout").order_by("seq").values_list("message", flat=True)
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.mark.django_db
def test_a_command_printing_its_environment_shows_no_secret_of_the_server(make_schedule, now, worker_env, settings):
    settings.ETL_COMMAND_ENV_PASSTHROUGH = ["MY_TOOL_HOME"]
    schedule = make_schedule("printenv", target_kind="command", target_id="",
                             command={"argv": ["/usr/bin/env"], "env": {"REGION": "eu"}})
    run = _run(schedule, now)
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    env = _printed_env(run)
    assert set(env) == {"PATH", "HOME", "LANG", "LC_TIME", "TZ", "MY_TOOL_HOME", "REGION", *FACTS}
    assert (env["HOME"], env["TZ"], env["REGION"], env["MY_TOOL_HOME"]) == ("/home/etl", "Europe/Amsterdam", "eu",
                                                                            "/opt/tool")
    stored = "\n".join(RunLogLine.objects.filter(run=run).values_list("message", flat=True))
    for value in worker_env.values():
        assert value not in stored


@pytest.mark.django_db
def test_the_passthrough_never_passes_a_server_secret_even_when_set_behind_the_checks(worker_env, settings):
    settings.ETL_COMMAND_ENV_PASSTHROUGH = ["SECRET_KEY", "ETL_CONN_WAREHOUSE", "MY_TOOL_HOME"]
    assert set(base_env()) == {"PATH", "HOME", "LANG", "LC_TIME", "TZ", "MY_TOOL_HOME"}


@pytest.mark.parametrize("value, message", [
    ("SECRET_KEY", "SECRET_KEY holds a secret of the server or of a connection"),
    ("PATH,DATABASE_URL", "DATABASE_URL holds a secret"),
    ("ETL_CONN_WAREHOUSE", "ETL_CONN_WAREHOUSE holds a secret"),
    ("NOT A NAME", "is not a variable name"),
])
def test_a_passthrough_naming_a_secret_stops_start_up(value, message):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["ETL_COMMAND_ENV_PASSTHROUGH"] = value
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "ETL_COMMAND_ENV_PASSTHROUGH: " in result.stderr and message in result.stderr


@pytest.mark.django_db(transaction=True)  # a build outlasts a heartbeat: the pump must see the committed run
def test_a_dbt_build_sees_no_secret_of_the_server(make_schedule, now, worker_env, tmp_path, settings, monkeypatch):
    """A model that asks dbt's env_var() for the server's secrets gets the default: they are not there."""
    project = tmp_path / "probe"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: probe\nversion: '1.0'\nconfig-version: 2\nprofile: probe\n"
                                             "models:\n  probe:\n    +materialized: table\n")
    (project / "profiles.yml").write_text("probe:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
                                          f"      path: {tmp_path / 'probe.duckdb'}\n      threads: 1\n")
    (project / "models" / "seen.sql").write_text(
        "select '{{ env_var(\"SECRET_KEY\", \"absent\") }}' as secret_key,"
        " '{{ env_var(\"DATABASE_URL\", \"absent\") }}' as database_url,"
        " '{{ env_var(\"ETL_CONN_WAREHOUSE\", \"absent\") }}' as connection,"
        " '{{ env_var(\"ETL_SCHEDULE\", \"absent\") }}' as schedule\n")
    settings.ETL_DBT_RUNS_DIR = str(tmp_path / "runs")
    schedule = make_schedule("probe", target_kind="dbt", target_id="", retry_max_attempts=1,
                             dbt={"project_dir": str(project), "profiles_dir": str(project)})
    run = _run(schedule, now)
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    with duckdb.connect(str(tmp_path / "probe.duckdb"), read_only=True) as db:
        row = db.execute("select secret_key, database_url, connection, schedule from seen").fetchone()
    assert row == ("absent", "absent", "absent", "probe")
