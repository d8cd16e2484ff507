"""A run whose pipeline no running cluster knows yet waits QUEUED, saying so, for ETL_UNKNOWN_TARGET_SECONDS, then
fails with that reason; never at once as unknown with an alert (issue 32)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Alert, Cluster, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.services.admission import clusters
from scheduler.services.admission.waits import explain_wait
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture
def new_pipeline(make_schedule, settings):
    """A schedule of `team.new`, a pipeline this process no longer knows (applied from a newer process)."""
    settings.ETL_UNKNOWN_TARGET_SECONDS = 60
    settings.ETL_ALERTS_SYNC = True
    registry.register_pipeline("team.new", lambda ctx: None, replace=True)
    schedule = make_schedule("new", target_id="team.new")
    registry._pipelines.pop("team.new")
    clusters.forget_known_targets()
    yield schedule
    clusters.forget_known_targets()


def _cluster(holder: str, *, seen, targets) -> Cluster:
    return Cluster.objects.create(holder=holder, name=holder.split("@")[0], host="h", pid=1, started_at=seen,
                                  seen_at=seen, code_version="v", targets=targets)


def test_it_waits_queued_saying_why_then_fails_with_that_reason(new_pipeline, now):
    run = run_trigger_manual(schedule=new_pipeline, actor="tests", now=now)
    assert tick(now) == []
    run.refresh_from_db()
    assert (run.status, run.reason) == (S.QUEUED, "no cluster knows pipeline team.new yet")
    assert explain_wait(run, now).startswith("no cluster knows pipeline team.new yet (it waits for new code until ")
    with CaptureQueriesContext(connection) as queries:
        assert tick(now + timedelta(seconds=59)) == []
    assert not [q for q in queries if q["sql"].startswith("UPDATE") and "scheduler_run" in q["sql"]], "once"
    assert Run.objects.get(pk=run.pk).status == S.QUEUED and not Alert.objects.exists()
    clusters.forget_known_targets()
    tick(now + timedelta(seconds=60))
    run.refresh_from_db()
    assert run.status == S.FAILED
    assert run.reason == "no cluster knows pipeline team.new yet (waited 60 s for a cluster that does)"


def test_a_live_cluster_that_knows_it_gets_it(new_pipeline, now):
    _cluster("gone@h:1:a", seen=now - timedelta(hours=1), targets=["pipeline:team.new"])  # not beating any more
    run = run_trigger_manual(schedule=new_pipeline, actor="tests", now=now)
    assert tick(now) == []
    _cluster("new@h:2:b", seen=now, targets=["pipeline:team.new", "pipeline:demo.noop"])
    clusters.forget_known_targets()
    assert [rid for rid, _ in tick(now)] == [run.pk]
    assert Run.objects.get(pk=run.pk).status == S.RUNNING


def test_a_target_this_process_knows_costs_no_read_of_the_clusters(make_schedule, now):
    run_trigger_manual(schedule=make_schedule("noop", target_id="demo.noop"), actor="tests", now=now)
    clusters.forget_known_targets()
    with CaptureQueriesContext(connection) as queries:
        assert len(tick(now)) == 1
    assert not [q for q in queries if "scheduler_cluster" in q["sql"]]
