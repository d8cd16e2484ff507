"""A real cluster, configured by OPENLINEAGE_URL alone, sends a run's START and COMPLETE to an HTTP receiver."""
from __future__ import annotations

import pytest

from scheduler.models import LineageEvent, LineageStatus, Run, RunStatus
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_cluster_writes_and_sends_a_runs_events(make_schedule, receiver, tmp_path, now):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    log = tmp_path / "cluster.log"
    cluster = start_cluster("lineage1", log_path=log, extra_env={
        "OPENLINEAGE_URL": receiver.url, "ETL_LINEAGE": "auto", "ETL_LINEAGE_INTERVAL": "0.2"})
    try:
        wait_until(lambda: len(receiver.events) >= 2, timeout=90, what="START and COMPLETE received", log_path=log)
    finally:
        stop_cluster(cluster)
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    assert [(e["eventType"], e["job"]["name"]) for e in receiver.events] == [("START", "noop"), ("COMPLETE", "noop")]
    assert len({e["run"]["runId"] for e in receiver.events}) == 1
    assert set(LineageEvent.objects.values_list("status", flat=True)) == {LineageStatus.SENT}
