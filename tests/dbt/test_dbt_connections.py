"""A dbt target maps its declared connections into its profile through env vars (issue 33, point 2)."""
from __future__ import annotations

import duckdb
import pytest
from cryptography.fernet import Fernet

from scheduler.models import RunLogLine, RunStatus, Team
from scheduler.services.access.connections import connection_set
from scheduler.services.runs.queue import run_trigger_manual
from tests.dbt.conftest import execute

# committed rows: a build outlasts a heartbeat, and the pump beats on its own connection, which sees only what is
# committed (inside a test's transaction its beat touches nothing on PostgreSQL and fences the run, as it should)
pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "duck-profile-secret-5511"


def test_a_dbt_profile_reads_the_connection_by_env_var_and_models_cannot_read_its_secret(
        make_schedule, tmp_path, settings, now):
    settings.ETL_CONNECTION_KEYS = [Fernet.generate_key().decode()]
    settings.ETL_DBT_RUNS_DIR = str(tmp_path / "runs")
    Team.objects.create(name="analytics")
    warehouse = tmp_path / "warehouse.duckdb"
    connection_set(name="duck", actor="tests", owner="analytics", kind="generic", scheme="duckdb",
                   database=str(warehouse), password=SECRET)
    project = tmp_path / "shop"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nconfig-version: 2\nprofile: shop\n"
                                             "models:\n  shop:\n    +materialized: table\n")
    # the profile takes the path by name, and the secret (dbt allows DBT_ENV_SECRET_* only here)
    (project / "profiles.yml").write_text(
        "shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        "      path: \"{{ env_var('ETL_CONN_DUCK_DATABASE') }}\"\n"
        "      threads: \"{{ (env_var('DBT_ENV_SECRET_ETL_CONN_DUCK_PASSWORD') | length > 0) | int }}\"\n")
    (project / "models" / "seen.sql").write_text(
        "select '{{ env_var(\"ETL_CONN_DUCK_KIND\") }}' as kind, '{{ env_var(\"ETL_CONN_DUCK_PASSWORD\", \"none\") }}'"
        " as password\n")
    schedule = make_schedule("marts", owner="analytics", target_kind="dbt", target_id="", retry_max_attempts=1,
                             dbt={"project_dir": str(project), "profiles_dir": str(project), "connections": ["duck"]})
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    with duckdb.connect(str(warehouse), read_only=True) as db:
        assert db.execute("select kind, password from seen").fetchone() == ("generic", "none")
    assert SECRET not in "\n".join(RunLogLine.objects.filter(run=run).values_list("message", flat=True))
