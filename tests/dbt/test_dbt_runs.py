"""A dbt target runs a real `dbt build` (dbt-duckdb) in-process: node records, vars, failures, re-run from failure.

Each test runs dbt once or twice (a build takes seconds): five builds in all.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime
from io import StringIO
from pathlib import Path

import duckdb
import pytest
from django.core.management import call_command
from django.urls import reverse

from scheduler.models import AuditEntry, NodeRecord, Run, RunStatus, TriggerKind
from scheduler.services.worker.dbt import dbt_argv, dbt_rerun_select, dbt_spec_check, dbt_vars
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.queue import run_trigger_manual
from tests.dbt.conftest import dbt_schedule, execute, log_of

# committed rows: a build outlasts a heartbeat, and the pump beats on its own connection, which sees only what is
# committed (inside a test's transaction its beat touches nothing on PostgreSQL and fences the run, as it should)
pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
MARK = {"type": "datetime", "column": "updated_at", "initial": "2026-03-01T00:00:00+00:00"}
NODES = {
    "seed.etl_test.customers", "model.etl_test.stg_customers", "model.etl_test.window_probe",
    "model.etl_test.fragile", "model.etl_test.fragile_child", "model.etl_test.slow",
    "test.etl_test.not_null_stg_customers_id.6bd2c50f02", "test.etl_test.unique_stg_customers_id.a6a76acf47",
    "test.etl_test.accepted_values_stg_customers_id__False__1__2__3.f4eacb4b1f", "snapshot.etl_test.customers_history",
    "model.etl_test.customer_count", "unit_test.etl_test.customer_count.test_customers_count",
}


def _records(run: Run) -> dict[str, NodeRecord]:
    return {n.task_id: n for n in NodeRecord.objects.filter(run=run)}


def test_a_build_writes_a_node_record_per_node_and_the_window_and_params_reach_dbt_as_vars(
        make_schedule, dbt_project, warehouse, now, client, make_user, settings):
    schedule = dbt_schedule(make_schedule, dbt_project, vars={"region": "from-the-schedule", "keep": 1},
                            threads=1)
    schedule.watermark_config = MARK
    schedule.save(update_fields=["watermark_config"])
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", params={"region": "eu"}, now=now), now)
    assert run.status == S.SUCCEEDED, (run.reason, run.error)
    assert run.exit_code == 0
    records = _records(run)
    assert set(records) == NODES
    assert {r.outcome for r in records.values()} == {"SUCCESS"}
    seed = records["seed.etl_test.customers"]
    assert seed.rows == 3 and run.rows_loaded == 3  # adapter_response.rows_affected: duckdb reports a seed's
    # each record's start and end are dbt's own timing (what the run page's Gantt strip draws): the first
    # start and last completion of the node's steps in run_results.json, in build order within the run
    results = json.loads((Path(settings.ETL_DBT_RUNS_DIR) / f"run-{run.pk}" / "attempt-1" / "target"
                          / "run_results.json").read_text())
    for item in results["results"]:
        record = records[item["unique_id"]]
        starts = [datetime.fromisoformat(t["started_at"].replace("Z", "+00:00")) for t in item["timing"]]
        ends = [datetime.fromisoformat(t["completed_at"].replace("Z", "+00:00")) for t in item["timing"]]
        assert starts and (record.started_at, record.finished_at) == (min(starts), max(ends)), item["unique_id"]
        assert run.started_at <= record.started_at < record.finished_at <= run.finished_at
        assert record.run_attempt == 1
    assert records["seed.etl_test.customers"].finished_at <= records["model.etl_test.stg_customers"].started_at
    assert records["model.etl_test.stg_customers"].finished_at <= \
        records["snapshot.etl_test.customers_history"].started_at
    assert records["snapshot.etl_test.customers_history"].outcome == "SUCCESS"
    # what dbt saw in var(): the run's window and id, the params over the schedule's vars
    with duckdb.connect(str(warehouse), read_only=True) as db:
        low, high, run_id, region = db.execute(
            "select window_low, window_high, run_id, region from window_probe").fetchone()
    assert (low, high) == (run.window_low, run.window_high) and low.startswith("2026-03-01")
    assert (run_id, region) == (str(run.pk), "eu")
    # the argv: dbt build, no shell, this attempt's own target and log paths, the vars as one JSON item
    [line] = [m for m in log_of(run) if m.startswith("command: ")]
    assert " build --no-use-colors " in line and f"--project-dir {dbt_project} " in line
    assert f"run-{run.pk}/attempt-1/target" in line and f"run-{run.pk}/attempt-1/logs" in line
    assert '"keep": 1' in line and '"region": "eu"' in line and "--threads 1" in line
    assert any("Completed successfully" in m for m in log_of(run))  # dbt's output streamed into the run log
    # the run page shows dbt's nodes as a workflow's: the graph, the report and the node records
    client.force_login(make_user("ada", "admin", is_staff=True))
    body = client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="nodes"' in body and 'data-node="model.etl_test.fragile_child"' in body
    assert "dbt build: models, seeds, snapshots and tests" in body
    assert 'id="command"' in body and "build --no-use-colors" in body and "params as JSON" in body
    assert ["model.etl_test.stg_customers", "model.etl_test.fragile"] in run.report["deps"]


def test_a_failing_model_fails_the_run_with_a_summary_and_the_nodes_message(
        make_schedule, dbt_project, warehouse, now, monkeypatch, client, make_user):
    monkeypatch.setenv("ETL_TEST_DBT_FAIL", "1")
    schedule = dbt_schedule(make_schedule, dbt_project, exclude="slow window_probe")
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert run.status == S.FAILED and run.exit_code == 1
    assert run.reason == "1 of 10 failed: model.fragile (1 skipped)"
    records = _records(run)
    assert len(records) == 10
    fragile = records["model.etl_test.fragile"]
    assert fragile.outcome == "FAILED" and "a_table_that_does_not_exist does not exist" in fragile.reason
    assert records["model.etl_test.fragile_child"].outcome == "SKIPPED"
    assert records["model.etl_test.stg_customers"].outcome == "SUCCESS"
    assert "model.etl_test.fragile: Runtime Error in model fragile" in run.error
    assert run.report["blocked"] == ["model.etl_test.fragile_child"]
    client.force_login(make_user("ada", "admin", is_staff=True))
    body = client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="rerun-from-failure"' in body and "what failed or was skipped" in body
    assert "n-blocked" in body and "n-failed" in body  # the graph colours the failed node and the skipped child


def test_rerun_from_failure_builds_only_what_failed_and_its_children(
        make_schedule, dbt_project, warehouse, now, monkeypatch):
    monkeypatch.setenv("ETL_TEST_DBT_FAIL", "1")
    schedule = dbt_schedule(make_schedule, dbt_project, exclude=["slow"])
    failed = execute(run_trigger_manual(schedule=schedule, actor="tests", params={"day": "2026-03-01"}, now=now), now)
    assert failed.status == S.FAILED
    monkeypatch.setenv("ETL_TEST_DBT_FAIL", "0")  # the cause is fixed
    again = run_rerun_from_failure(run=failed, actor="tests", reason="table is back", now=now)
    assert (again.trigger_kind, again.retry_of_id, again.params) == (TriggerKind.RETRY, failed.pk, failed.params)
    entry = AuditEntry.objects.get(action="run.rerun_from_failure")
    assert failed.code_version.startswith("etl_test ")  # the dbt project's name and version, and its digest
    assert entry.after == {"run": again.pk, "selects": ["fragile+", "fragile_child+"],
                           "code_version": failed.code_version}
    again = execute(again, now)
    assert again.status == S.SUCCEEDED, (again.reason, again.error)
    assert set(_records(again)) == {"model.etl_test.fragile", "model.etl_test.fragile_child"}
    assert {r.outcome for r in _records(again).values()} == {"SUCCESS"}
    line = next(m for m in log_of(again) if m.startswith("command: "))
    assert "--select fragile+ fragile_child+ --exclude slow" in line
    assert any(f"re-run of run {failed.pk} from its failure" in m for m in log_of(again))


def test_rerun_from_failure_keeps_to_the_schedules_selection(make_schedule, dbt_project, now):
    """Recorded results suffice (no dbt run): a child the schedule does not select is not built by the re-run."""
    schedule = dbt_schedule(make_schedule, dbt_project, select=["stg_customers fragile"])
    failed = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    Run.objects.filter(pk=failed.pk).update(status=S.FAILED)
    failed.refresh_from_db()
    NodeRecord.objects.bulk_create([
        NodeRecord(run=failed, task_id=uid, outcome=outcome, started_at=now, finished_at=now)
        for uid, outcome in [("model.etl_test.stg_customers", "SUCCESS"), ("model.etl_test.fragile", "FAILED")]])
    again = run_rerun_from_failure(run=failed, actor="tests", reason="table is back", now=now)
    assert AuditEntry.objects.get(action="run.rerun_from_failure").after == {
        "run": again.pk, "selects": ["fragile+,stg_customers", "fragile+,fragile"]}
    argv = dbt_argv(spec=dbt_spec_check(schedule.dbt), variables={}, target_path="/t", log_path="/l",
                    select=dbt_rerun_select(failed))
    assert argv[argv.index("--select") + 1: argv.index("--vars")] == ["fragile+,stg_customers", "fragile+,fragile"]


def test_a_project_that_does_not_parse_fails_with_dbts_own_message(make_schedule, dbt_project, warehouse, now,
                                                                   tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(dbt_project, broken)
    (broken / "models" / "orphan.sql").write_text("select * from {{ ref('no_such_model') }}\n")
    schedule = dbt_schedule(make_schedule, broken)
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert run.status == S.FAILED and run.exit_code == 2
    # dbt's error alone: the deprecation summary dbt prints after it (the project has a deprecated test) is not in it
    assert run.reason == ("Compilation Error Model 'model.etl_test.orphan' (models/orphan.sql) depends on a node "
                          "named 'no_such_model' which was not found")
    assert any("Summary of encountered deprecations" in line for line in log_of(run))
    assert not NodeRecord.objects.filter(run=run).exists()
    # and a re-run from such a failure builds all of it (nothing recorded to narrow it to)
    out = StringIO()
    call_command("rerun_from_failure", str(run.pk), "--json", stdout=out)
    again = Run.objects.get(retry_of=run)
    assert json.loads(out.getvalue()) == {"run": again.pk, "rerun_of": run.pk, "schedule": "marts", "selects": []}
    assert AuditEntry.objects.get(action="run.rerun_from_failure").after == {
        "run": again.pk, "selects": [], "code_version": run.code_version}


def test_run_params_never_become_flags_or_paths(dbt_project):
    """Params named like the definition's keys are vars (data), one JSON argv item; no dbt run needed for that."""
    spec = dbt_spec_check({"project_dir": str(dbt_project), "select": "tag:daily orders+"})
    hostile = {"project_dir": "/etc", "select": "--profiles-dir /etc", "run_id": 0, "window_low": "1999"}
    variables = dbt_vars(spec=spec, run_id=7, schedule="marts", window=None, logical_time=None, params=hostile,
                         attempt=1, backfill=None)
    argv = dbt_argv(spec=spec, variables=variables, target_path="/t", log_path="/l")
    assert argv[argv.index("--project-dir") + 1] == str(dbt_project)
    assert argv[argv.index("--select") + 1: argv.index("--select") + 3] == ["tag:daily", "orders+"]
    assert "--profiles-dir" not in argv
    seen = json.loads(argv[argv.index("--vars") + 1])
    assert seen["run_id"] == 7 and seen["window_low"] == "" and seen["project_dir"] == "/etc"
