"""A run's OpenLineage events: START when it begins, then exactly one of COMPLETE, FAIL or ABORT, one runId."""
from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import LineageEvent, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.services.runs.transitions import run_refused
from scheduler.services.runs.end import run_cancel, run_lost
from scheduler.services.integrations.lineage import lineage_run_began, run_uuid
from scheduler.services.integrations.lineage_send import lineage_drain
from scheduler.services.runs.queue import run_trigger_manual
from tests.lineage.conftest import outbox
from tests.services.semantics_helpers import claim_then_go_silent, tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


def test_a_run_sends_start_then_complete_with_one_run_id(lineage_on, make_schedule, now, transport):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"rows": 3}, now=now)
    tick_and_execute(now)
    assert outbox() == [("START", "noop"), ("COMPLETE", "noop")]

    assert lineage_drain(client=transport.client, now=now)["sent"] == 2
    start, complete = transport.events()
    assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    assert start["run"]["runId"] == complete["run"]["runId"] == run_uuid(run)
    assert start["job"] == {**start["job"], "namespace": "etl-scheduler", "name": "noop"}
    facet = complete["run"]["facets"]["etlScheduler_run"]
    assert facet["runId"] == run.pk and facet["status"] == S.SUCCEEDED and facet["rowsLoaded"] == 3
    assert facet["_producer"] and facet["_schemaURL"].endswith("#/$defs/RunFacet")
    assert not LineageEvent.objects.filter(status="PENDING").exists()


def test_a_final_failure_sends_fail_with_the_error(lineage_on, make_schedule, now, transport):
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1)
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    assert [e for e, _ in outbox()] == ["START", "FAIL"]
    lineage_drain(client=transport.client, now=now)
    start, fail = transport.events()
    assert [start["eventType"], fail["eventType"]] == ["START", "FAIL"]
    assert start["run"]["runId"] == fail["run"]["runId"] == run_uuid(run)
    assert "failed on purpose" in fail["run"]["facets"]["errorMessage"]["message"]


def test_a_retried_attempt_sends_no_fail_and_its_next_claim_sends_running(lineage_on, make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=2)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    (run_id, token), = tick(now)
    lost = claim_then_go_silent(run_id, token, now)
    lineage_run_began(run=lost, now=now)  # the simulated claim's START, as execute_run writes it
    assert run_lost(run=lost, now=now + timedelta(minutes=5), why="worker lost") == "requeued"
    assert [e for e, _ in outbox()] == ["START"], "a re-queued attempt ends nothing"

    tick_and_execute(now + timedelta(minutes=6))
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED and run.attempt == 2
    assert [e for e, _ in outbox()] == ["START", "RUNNING", "COMPLETE"]
    assert set(LineageEvent.objects.values_list("run_uuid", flat=True)) == {run_uuid(run)}


def test_a_lost_run_out_of_attempts_sends_fail(lineage_on, make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=1)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    (run_id, token), = tick(now)
    lost = claim_then_go_silent(run_id, token, now)
    assert run_lost(run=lost, now=now + timedelta(minutes=5), why="worker lost") == "failed"
    assert [e for e, _ in outbox()] == ["FAIL"], "the claim was simulated without its START; the end still counts"


def test_a_cancel_while_running_sends_abort(lineage_on, make_schedule, now, transport):
    def cancelling(ctx):
        class CancelMe(NoopSource):
            def extract(self):
                run_cancel(run=Run.objects.select_related("schedule").get(pk=ctx.run_id), actor="user:olivia",
                           reason="wrong params", now=now)
                return [{"id": 1}]
        return Pipeline(CancelMe(), IdentityTransform(), NoopSink(), policy=RetryPolicy(max_attempts=1))

    registry.register_pipeline("test.cancelling", cancelling, replace=True)
    try:
        schedule = make_schedule("cancelled", target_id="test.cancelling")
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        tick_and_execute(now)
    finally:
        registry._pipelines.pop("test.cancelling", None)
    run.refresh_from_db()
    assert run.status == S.CANCELLED
    assert [e for e, _ in outbox()] == ["START", "ABORT"]
    assert lineage_drain(client=transport.client, now=now)["sent"] == 2
    start, abort = transport.events()
    assert [start["eventType"], abort["eventType"]] == ["START", "ABORT"]
    assert start["run"]["runId"] == abort["run"]["runId"] == run_uuid(run)
    assert abort["run"]["facets"]["etlScheduler_run"]["status"] == S.CANCELLED


def test_a_run_cancelled_while_queued_or_refused_sends_nothing(lineage_on, make_schedule, now):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    assert run_cancel(run=run, actor="user:olivia", reason="not today", now=now)
    run_refused(schedule=schedule, status=S.BLOCKED, reason="circuit open", trigger_kind="manual",
                trigger_key="b1", now=now)
    run_refused(schedule=schedule, status=S.SKIPPED, reason="still fresh", trigger_kind="manual",
                trigger_key="s1", now=now)
    assert outbox() == []


def test_a_requeued_run_cancelled_before_its_next_claim_sends_abort(lineage_on, make_schedule, now):
    schedule = make_schedule("noop", retry_max_attempts=2)
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    (run_id, token), = tick(now)
    lost = claim_then_go_silent(run_id, token, now)
    lineage_run_began(run=lost, now=now)
    run_lost(run=lost, now=now + timedelta(minutes=5), why="worker lost")
    lost.refresh_from_db()
    assert lost.status == S.QUEUED and lost.started_at is None
    run_cancel(run=lost, actor="user:olivia", reason="enough", now=now + timedelta(minutes=6))
    assert [e for e, _ in outbox()] == ["START", "ABORT"]


def test_lineage_off_writes_no_row_and_no_statement_touches_the_outbox(settings, make_schedule, now):
    settings.ETL_LINEAGE = "off"
    schedule = make_schedule("noop")
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    with CaptureQueriesContext(connection) as queries:
        tick_and_execute(now)
    assert Run.objects.get().status == S.SUCCEEDED
    assert not LineageEvent.objects.exists()
    assert not [q["sql"] for q in queries if "lineage" in q["sql"].lower()]


def test_an_event_that_cannot_be_built_never_fails_the_run(lineage_on, make_schedule, now, monkeypatch):
    def broken(**kwargs):
        raise ValueError("no such facet")

    monkeypatch.setattr("scheduler.services.integrations.lineage.build_event", broken)
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED
    assert outbox() == []


def test_a_failed_command_attempt_that_is_retried_sends_no_fail_only_its_last_does(lineage_on, make_schedule, now):
    schedule = make_schedule("cmd", target_kind="command", target_id="", retry_max_attempts=2,
                             retry_initial_delay=0, command={"argv": [sys.executable, "-c", "raise SystemExit(3)"]})
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert (run.status, run.attempt) == (S.QUEUED, 2)
    assert [e for e, _ in outbox()] == ["START"]
    tick_and_execute(now + timedelta(minutes=1))
    run.refresh_from_db()
    assert run.status == S.FAILED
    assert [e for e, _ in outbox()] == ["START", "RUNNING", "FAIL"]
    assert LineageEvent.objects.filter(event_type="FAIL").get().payload["run"]["facets"]["etlScheduler_run"][
        "attempt"] == 2


def test_the_namespace_comes_from_the_setting_and_the_job_is_the_schedule(lineage_on, make_schedule, now):
    from scheduler.models import NodeOutcome
    from scheduler.services.integrations.lineage import lineage_node_finished

    lineage_on.ETL_LINEAGE_NAMESPACE = "analytics-prod"
    schedule = make_schedule("orders_hourly")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    lineage_node_finished(run=run, task_id="load", outcome=NodeOutcome.SUCCESS, started_at=now, finished_at=now)
    events = [row.payload for row in LineageEvent.objects.order_by("id")]
    assert [(e["eventType"], e["job"]["namespace"], e["job"]["name"]) for e in events] == [
        ("START", "analytics-prod", "orders_hourly"), ("COMPLETE", "analytics-prod", "orders_hourly"),
        ("START", "analytics-prod", "orders_hourly.load"), ("COMPLETE", "analytics-prod", "orders_hourly.load")]
    parent = events[-1]["run"]["facets"]["parent"]
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("analytics-prod", "orders_hourly")
    assert parent["run"]["runId"] == run_uuid(run)


def test_the_run_path_never_calls_the_lineage_backend(lineage_on, make_schedule, now, monkeypatch):
    """A backend that hangs or is down cannot slow or fail a run: only the outbox's sender talks to it."""
    from openlineage.client import OpenLineageClient

    calls = []

    def hanging(self, event):
        calls.append(event)
        raise TimeoutError("the backend hangs")

    monkeypatch.setattr(OpenLineageClient, "emit", hanging)
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED and calls == []
    assert [e for e, _ in outbox()] == ["START", "COMPLETE"]
    assert lineage_drain(now=now)["failed"] == 1 and len(calls) == 1
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED
