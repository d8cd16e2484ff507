"""A real cluster stores a run's log while it runs (the run page follows it) and completes it at the end."""
from __future__ import annotations

import pytest

from scheduler.models import Run, RunLogLine, RunStatus
from scheduler.services.runs.queue import run_trigger_manual
import tests.integration.pipelines_for_tests  # noqa: F401  (registers itest.gated here too)
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MODULES = "scheduler.pipelines.demo,tests.integration.pipelines_for_tests"


def _messages(run) -> list[str]:
    return list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))


def test_a_running_runs_log_is_stored_before_it_ends_and_completed_after(make_schedule, tmp_path):
    schedule = make_schedule("gated", target_id="itest.gated")
    release = tmp_path / "release"
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"release": str(release)})
    log = tmp_path / "cluster.log"
    proc = start_cluster("itest-logs", log_path=log, extra_env={"ETL_PIPELINE_MODULES": MODULES})
    try:
        wait_until(lambda: any(m.startswith("step 1") for m in _messages(run)), timeout=90,
                   what="the first line stored while the run is RUNNING", log_path=log)
        run.refresh_from_db()
        assert run.status == RunStatus.RUNNING
        assert not any(m.startswith("finished") for m in _messages(run))
        release.touch()
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=60,
                   what="the run to succeed", log_path=log)
        wait_until(lambda: any(m.startswith("finished SUCCEEDED") for m in _messages(run)), timeout=30,
                   what="the closing line", log_path=log)
    finally:
        code = stop_cluster(proc)
    assert code == 0, log.read_text()[-3000:]
    messages = _messages(run)
    assert messages[0].startswith("started on itest-logs@")
    order = [next(i for i, m in enumerate(messages) if m.startswith(p)) for p in ("step 1", "step 2", "finished")]
    assert order == sorted(order)
