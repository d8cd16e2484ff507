"""dbt as its users know it, on the real project (it has a deprecated construct and a unit test): exit 2 is dbt's
error alone and is not retried; a unit test is named and re-run as dbt names it; every node sends its lineage.

Four dbt builds in all.
"""
from __future__ import annotations

import shutil
from collections import defaultdict

import pytest

from scheduler.models import AuditEntry, LineageEvent, NodeRecord, Run, RunStatus
from scheduler.services.worker.dbt import dbt_permanent
from scheduler.services.integrations.lineage import lineage_reset, node_uuid, run_uuid
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.queue import run_trigger_manual
from tests.dbt.conftest import dbt_schedule, execute, log_of

# committed rows: a build outlasts a heartbeat, and the pump beats on its own connection, which sees only what is
# committed (inside a test's transaction its beat touches nothing on PostgreSQL and fences the run, as it should)
pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
UNIT = "unit_test.etl_test.customer_count.test_customers_count"
WORDS = " ".join(f"word{i}" for i in range(120))  # dbt's error, longer than a run's reason holds


def _records(run: Run) -> dict[str, NodeRecord]:
    return {n.task_id: n for n in NodeRecord.objects.filter(run=run)}


def test_a_project_that_does_not_compile_fails_once_with_dbts_error_alone(make_schedule, dbt_project, warehouse,
                                                                          now, tmp_path):
    """dbt met the project's deprecated construct, then stopped on a long compile error (exit 2), then printed its
    deprecation summary: the reason is the error alone, cut after a whole word; no attempt is made again."""
    broken = tmp_path / "broken"
    shutil.copytree(dbt_project, broken)
    (broken / "models" / "zz_broken.yml").write_text(
        "version: 2\nmodels:\n  - name: fragile\n    config:\n"
        f"      alias: \"{{{{ exceptions.raise_compiler_error('fragile cannot compile: {WORDS}') }}}}\"\n")
    schedule = dbt_schedule(make_schedule, broken)
    schedule.retry_max_attempts = 3
    schedule.save(update_fields=["retry_max_attempts"])
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert (run.status, run.exit_code, run.attempt) == (S.FAILED, 2, 1)  # not re-queued: attempts were left
    log = "\n".join(log_of(run))
    assert "Summary of encountered deprecations" in log and "MissingArgumentsPropertyInGenericTestDeprecation" in log
    assert "not retried" in log
    error = " ".join(log[log.rindex("Encountered an error:"):log.index("[DeprecationsSummary]")].split()[3:-1])
    assert error.startswith("Compilation Error Could not render") and "word119" in error
    assert len(run.reason) <= 500 and run.reason.endswith("…")
    kept = run.reason.removesuffix("…")
    assert error.startswith(kept) and error[len(kept)] == " "  # cut between two words, never inside one
    assert "deprecat" not in run.reason.lower() and "exit code" not in run.reason
    assert "not retried" in run.error and "word119" in run.error
    assert not NodeRecord.objects.filter(run=run).exists()


def test_only_a_project_that_does_not_parse_or_compile_is_a_permanent_failure():
    assert dbt_permanent(2, "Compilation Error Model 'model.x.y' depends on a node named 'z' which was not found")
    assert dbt_permanent(2, "Parsing Error Env var required but not provided: 'WAREHOUSE'")
    # the warehouse could not be reached when dbt started: the next attempt may reach it
    assert not dbt_permanent(2, "Database Error connection to server at \"wh\" (10.0.0.5), port 5432 failed")
    assert not dbt_permanent(1, "Compilation Error in model orders")  # a node's failure: retried like any
    assert not dbt_permanent(-9, "")


def test_a_failing_unit_test_is_named_as_dbt_names_it_and_rerun_by_its_own_selector(
        make_schedule, dbt_project, warehouse, now, monkeypatch):
    monkeypatch.setenv("ETL_TEST_DBT_UNIT_FAIL", "1")
    schedule = dbt_schedule(make_schedule, dbt_project, exclude="slow")
    failed = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert (failed.status, failed.exit_code) == (S.FAILED, 1)
    assert failed.reason == "1 of 11 failed: unit_test.customer_count::test_customers_count (1 skipped)"
    records = _records(failed)
    assert records[UNIT].outcome == "FAILED" and "actual differs from expected" in records[UNIT].reason
    assert records["model.etl_test.customer_count"].outcome == "SKIPPED"
    assert [UNIT, "model.etl_test.customer_count"] in failed.report["deps"] or \
        ["model.etl_test.customer_count", UNIT] in failed.report["deps"]
    monkeypatch.setenv("ETL_TEST_DBT_UNIT_FAIL", "0")  # the model is fixed
    again = run_rerun_from_failure(run=failed, actor="tests", reason="count fixed", now=now)
    assert AuditEntry.objects.get(action="run.rerun_from_failure").after == {
        "run": again.pk, "selects": ["unit_test:etl_test.test_customers_count", "customer_count+"],
        "code_version": failed.code_version}
    again = execute(again, now)
    assert again.status == S.SUCCEEDED, (again.reason, again.error)
    assert {uid: r.outcome for uid, r in _records(again).items()} == {
        UNIT: "SUCCESS", "model.etl_test.customer_count": "SUCCESS"}
    line = next(m for m in log_of(again) if m.startswith("command: "))
    assert "--select unit_test:etl_test.test_customers_count customer_count+ --exclude slow" in line


@pytest.fixture
def lineage_on(settings):
    settings.ETL_LINEAGE = "on"
    lineage_reset()
    yield
    lineage_reset()


def test_a_dbt_run_sends_start_and_complete_or_fail_per_node_with_its_datasets_and_parent(
        make_schedule, dbt_project, warehouse, now, monkeypatch, lineage_on):
    monkeypatch.setenv("ETL_TEST_DBT_FAIL", "1")
    schedule = dbt_schedule(make_schedule, dbt_project, exclude="slow window_probe")
    run = execute(run_trigger_manual(schedule=schedule, actor="tests", now=now), now)
    assert run.status == S.FAILED
    parent = run_uuid(run)
    by_job: dict[str, list[dict]] = defaultdict(list)
    for event in LineageEvent.objects.filter(run=run).order_by("id"):
        by_job[event.payload["job"]["name"]].append(event.payload)
    assert [e["eventType"] for e in by_job.pop("marts")] == ["START", "FAIL"]  # the run itself
    records = _records(run)
    ran = {uid for uid, r in records.items() if r.outcome != "SKIPPED"}
    assert set(by_job) == {f"marts.{uid}" for uid in ran}  # a skipped node ran nothing and sends nothing
    assert "model.etl_test.fragile_child" not in ran and len(ran) == 9
    for uid in ran:
        start, end = by_job[f"marts.{uid}"]
        record = records[uid]
        assert (start["eventType"], end["eventType"]) == ("START", "FAIL" if record.outcome == "FAILED" else "COMPLETE")
        assert start["run"]["runId"] == end["run"]["runId"] == node_uuid(parent, uid, 1)
        assert (start["eventTime"], end["eventTime"]) == (
            record.started_at.isoformat().replace("+00:00", "Z"), record.finished_at.isoformat().replace("+00:00", "Z"))
        facet = end["run"]["facets"]["parent"]
        assert (facet["run"]["runId"], facet["job"]["name"]) == (parent, "marts")
        job_type = end["job"]["facets"]["jobType"]
        assert (job_type["integration"], job_type["jobType"]) == (
            "DBT", {"model": "MODEL", "seed": "SEED", "snapshot": "SNAPSHOT"}.get(uid.split(".")[0], "TEST"))
    fail = by_job["marts.model.etl_test.fragile"][1]["run"]["facets"]["errorMessage"]
    assert "a_table_that_does_not_exist" in fail["message"] and fail["programmingLanguage"] == "SQL"
    # the datasets, from the manifest, named after the warehouse the profile connects to
    ns = f"duckdb://{warehouse}"

    def datasets(uid):
        _, end = by_job[f"marts.{uid}"]
        return ([(d["namespace"], d["name"]) for d in end["inputs"]],
                [(d["namespace"], d["name"]) for d in end["outputs"]])

    assert datasets("seed.etl_test.customers") == ([], [(ns, "warehouse.main.customers")])
    assert datasets("model.etl_test.stg_customers") == ([(ns, "warehouse.main.customers")],
                                                        [(ns, "warehouse.main.stg_customers")])
    assert datasets("snapshot.etl_test.customers_history") == ([(ns, "warehouse.main.stg_customers")],
                                                               [(ns, "warehouse.main.customers_history")])
    assert datasets("test.etl_test.not_null_stg_customers_id.6bd2c50f02") == (
        [(ns, "warehouse.main.stg_customers")], [])
    assert datasets("model.etl_test.fragile") == ([(ns, "warehouse.main.stg_customers")],
                                                  [(ns, "warehouse.main.fragile")])
    assert datasets(UNIT) == ([], [])  # a unit test reads its fixtures only
