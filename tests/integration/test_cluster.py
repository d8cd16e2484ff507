"""A real qcluster process runs an interval schedule end to end and stops cleanly."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduler.models import Run, RunStatus, WatermarkHistory
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_interval_schedule_produces_succeeded_runs_with_a_moving_watermark_and_sigterm_leaves_nothing_running(
    make_schedule, tmp_path
):
    initial = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    schedule = make_schedule(
        "every_second", target_id="demo.noop", trigger_kind="interval", trigger_config={"seconds": 1},
        watermark_config={"type": "datetime", "column": "ts", "initial": initial},
    )
    log = tmp_path / "cluster.log"
    proc = start_cluster("itest", log_path=log)
    try:
        wait_until(lambda: Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED).count() >= 3,
                   timeout=90, what="three SUCCEEDED runs", log_path=log)
    finally:
        code = stop_cluster(proc)
    assert code == 0, log.read_text()[-3000:]

    marks = list(WatermarkHistory.objects.filter(schedule=schedule).order_by("id").values_list("new_value", flat=True))
    assert len(marks) >= 3
    values = [datetime.fromisoformat(v) for v in marks]
    assert values == sorted(values) and len(set(values)) == len(values), "the watermark only moves forward"
    assert values[0] > datetime.fromisoformat(initial)
    succeeded = Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED)
    assert all(r.started_at and r.finished_at and r.worker_id.startswith("itest@") for r in succeeded)
    assert not Run.objects.filter(status=RunStatus.RUNNING).exists(), "SIGTERM left a run RUNNING"
