"""A real dbt project (tests/dbt_project, dbt-duckdb) for the dbt target's tests.

dbt is slow to start (3-6 s a build), so each module copies the project once
and each test only points the duckdb file (ETL_TEST_DUCKDB_PATH, read by the
project's profiles.yml) and the per-run artifacts (ETL_DBT_RUNS_DIR) at its
own tmp_path.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scheduler.models import Run, RunLogLine
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run

PROJECT = Path(__file__).resolve().parent.parent / "dbt_project"
PASSTHROUGH = ("ETL_TEST_DUCKDB_PATH", "ETL_TEST_DBT_FAIL", "ETL_TEST_DBT_UNIT_FAIL")  # what tests/dbt_project reads


@pytest.fixture(scope="module")
def dbt_project(tmp_path_factory) -> Path:
    """A copy of tests/dbt_project for this module (dbt writes nothing into it: targets and logs go per run)."""
    copy = tmp_path_factory.mktemp("dbt") / "project"
    shutil.copytree(PROJECT, copy)
    return copy


@pytest.fixture
def warehouse(tmp_path, monkeypatch, settings) -> Path:
    """This test's duckdb file and run directories; the model `fragile` and the unit test succeed unless a test
    says otherwise."""
    path = tmp_path / "warehouse.duckdb"
    monkeypatch.setenv("ETL_TEST_DUCKDB_PATH", str(path))
    monkeypatch.setenv("ETL_TEST_DBT_FAIL", "0")
    monkeypatch.setenv("ETL_TEST_DBT_UNIT_FAIL", "0")
    settings.ETL_DBT_RUNS_DIR = str(tmp_path / "dbt-runs")
    # dbt starts with a clean environment (issue 33): the project's profile reads these two, so they pass
    settings.ETL_COMMAND_ENV_PASSTHROUGH = list(PASSTHROUGH)
    return path


def dbt_schedule(make_schedule, project: Path, name: str = "marts", **dbt):
    spec = {"project_dir": str(project), "profiles_dir": str(project), **dbt}
    return make_schedule(name, target_kind="dbt", target_id="", dbt=spec, retry_max_attempts=1)


def execute(run: Run, now) -> Run:
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    return run


def log_of(run: Run) -> list[str]:
    return list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))
