"""A dbt run on a real `manage.py qcluster`: cancelled while dbt builds a long model, dbt's process is gone.

What the test knows of dbt's process comes from /proc (its argv names this
run's own target path), and every wait is a poll with a deadline.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.models import Run, RunLogLine, RunStatus, Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.end import run_cancel
from scheduler.services.runs.queue import run_trigger_manual
from tests.dbt.conftest import dbt_schedule
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
WAIT = 60  # a deadline, never reached when things work (dbt takes a few seconds to start)


def _dbt_pids(marker: str) -> list[int]:
    """Processes whose argv holds `marker` (this run's target path): dbt, and anything it started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\x00")
            except OSError:
                continue
            if any(marker.encode() in arg for arg in argv):
                found.append(int(entry.name))
    return found


def _final(run: Run, log: Path) -> Run:
    return wait_until(lambda: (r := Run.objects.get(pk=run.pk)).is_final and r, timeout=WAIT,
                      what=f"run {run.pk} to end", log_path=log)


def test_cancel_stops_dbt_mid_build_and_the_run_ends_cancelled(make_schedule, dbt_project, tmp_path, monkeypatch):
    monkeypatch.setenv("ETL_TEST_DUCKDB_PATH", str(tmp_path / "warehouse.duckdb"))
    runs_dir = tmp_path / "dbt-runs"
    schedule = dbt_schedule(make_schedule, dbt_project, select="slow")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"slow": True})
    marker = f"{runs_dir}/run-{run.pk}/attempt-1/target"
    log = tmp_path / "cluster.log"
    proc = start_cluster("dbt", log_path=log, extra_env={
        "ETL_DBT_RUNS_DIR": str(runs_dir), "ETL_HEARTBEAT_SECONDS": "0.3", "ETL_CANCEL_GRACE_SECONDS": "3",
        "ETL_STUCK_SECONDS": "60",
    })
    try:
        wait_until(lambda: RunLogLine.objects.filter(run_id=run.pk, message__contains="START sql table model")
                   .exists(), timeout=WAIT, what="dbt to start building the slow model", log_path=log)
        pids = _dbt_pids(marker)
        assert pids, "dbt's process, named by this run's target path"
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests", reason="not today")
        run = _final(run, log)
        left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    finally:
        Schedule.objects.update(enabled=False)
        for active in Run.objects.filter(status__in=RunStatus.active()):
            try:
                run_cancel(run=active, actor="tests", reason="test over", force=True)
            except ServiceError:
                pass
        code = stop_cluster(proc)
    assert (run.status, run.reason) == (RunStatus.CANCELLED, "not today")
    assert run.exit_code is not None
    assert left == [] and _dbt_pids(marker) == []
    assert not Run.objects.filter(pk=run.pk, nodes__isnull=False).exists()  # nothing dbt did after the ask counts
    assert code == 0, log.read_text()[-3000:]
