"""Command targets run in-process (execute_run): argv, environment, output, exit codes, the result file."""
from __future__ import annotations

import json
import sys

import pytest

from scheduler.models import RunLogLine, RunStatus
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual

PY = sys.executable


def _run(schedule, now, params=None):
    run = run_trigger_manual(schedule=schedule, actor="tests", params=params, now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    return run


def _log(run):
    return [(line.source, line.message) for line in RunLogLine.objects.filter(run=run).order_by("seq")]


def _cmd(make_schedule, code, name="c1", **fields):
    return make_schedule(name, target_kind="command", target_id="", command={"argv": [PY, "-c", code]}, **fields)


@pytest.mark.django_db
def test_exit_zero_succeeds_and_stdout_and_stderr_reach_the_run_log(make_schedule, now):
    schedule = _cmd(make_schedule, "import sys; print('hello out'); print('hello err', file=sys.stderr)")
    run = _run(schedule, now)
    assert run.status == RunStatus.SUCCEEDED, run.reason
    assert run.exit_code == 0
    log = _log(run)
    assert ("stdout", "hello out") in log
    assert ("stderr", "hello err") in log


@pytest.mark.django_db
def test_a_non_zero_exit_fails_with_the_code_and_the_tail_of_the_log(make_schedule, now):
    schedule = _cmd(make_schedule, "print('step one'); print('boom: table missing'); raise SystemExit(3)",
                    retry_max_attempts=1)
    run = _run(schedule, now)
    assert run.status == RunStatus.FAILED
    assert run.exit_code == 3
    assert "exit code 3" in run.reason
    assert "boom: table missing" in run.error


@pytest.mark.django_db
def test_the_run_facts_reach_the_command_as_variables_and_params_only_as_json(make_schedule, now):
    code = ("import os, json, sys; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('ETL_') "
            "or k == 'MINE'})); print(json.dumps(sys.argv))")
    schedule = make_schedule("c1", target_kind="command", target_id="",
                             command={"argv": [PY, "-c", code], "env": {"MINE": "yes"}})
    run = _run(schedule, now, params={"day": "2026-03-01", "path": "/etc/passwd"})
    assert run.status == RunStatus.SUCCEEDED, run.reason
    lines = [m for s, m in _log(run) if s == "stdout"]
    env = json.loads(lines[0])
    assert env["MINE"] == "yes"
    assert env["ETL_RUN_ID"] == str(run.pk)
    assert env["ETL_SCHEDULE"] == "c1"
    assert env["ETL_ATTEMPT"] == "1"
    assert env["ETL_BACKFILL_ID"] == ""
    assert json.loads(env["ETL_PARAMS"]) == {"day": "2026-03-01", "path": "/etc/passwd"}
    assert env["ETL_RESULT_FILE"].endswith("result.json")
    assert json.loads(lines[1]) == ["-c"]  # params never reach argv


@pytest.mark.django_db
def test_the_result_file_reports_rows_and_moves_an_integer_watermark(make_schedule, now):
    code = ("import os, json; json.dump({'rows': 120, 'watermark': 5000}, open(os.environ['ETL_RESULT_FILE'], 'w'))")
    schedule = make_schedule("c1", target_kind="command", target_id="", command={"argv": [PY, "-c", code]},
                             watermark_config={"type": "integer", "column": "id", "initial": 0})
    run = _run(schedule, now)
    assert run.status == RunStatus.SUCCEEDED, run.reason
    assert run.rows_loaded == 120
    assert run.watermark_after == "5000"


@pytest.mark.django_db
def test_a_bad_result_file_fails_the_run_naming_the_file(make_schedule, now):
    code = "import os; open(os.environ['ETL_RESULT_FILE'], 'w').write('{\"rows\": -1}')"
    run = _run(_cmd(make_schedule, code, retry_max_attempts=1), now)
    assert run.status == RunStatus.FAILED
    assert "ETL_RESULT_FILE" in run.reason and "rows" in run.reason


@pytest.mark.django_db
def test_a_program_that_does_not_exist_fails_with_the_reason(make_schedule, now):
    schedule = make_schedule("c1", target_kind="command", target_id="", command={"argv": ["/no/such/program"]},
                             retry_max_attempts=1)
    run = _run(schedule, now)
    assert run.status == RunStatus.FAILED
    assert "could not start" in run.reason and "/no/such/program" in run.reason
