"""Workflows that resume: a row per node as it finishes, re-queued and re-run runs skip what succeeded."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler.core import IdentityTransform, Outcome, Pipeline, RetryPolicy, RunRecord
from scheduler.models import AuditEntry, NodeRecord, Run, RunStatus, TargetKind, TriggerKind
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.services.common.errors import ServiceError
from scheduler.services.cluster.governance import stuck_runs
from scheduler.services.runs.nodes import NodeLedger, node_records, nodes_done
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import CountingSource, tick, tick_and_execute
from scheduler.services.cluster.execution import execute_run

pytestmark = pytest.mark.django_db(transaction=True)
CHAIN = ["n1", "n2", "n3", "n4", "n5"]


class Switch:
    """What each node does this time: 'ok', 'fail' (an error) or 'die' (the worker process is killed)."""

    def __init__(self):
        self.mode = {name: "ok" for name in CHAIN}
        self.extracts = {name: 0 for name in CHAIN}


class _Sink(NoopSink):
    def __init__(self, switch, name):
        super().__init__()
        self.switch, self.name = switch, name

    def load(self, rows):
        if self.switch.mode[self.name] == "die":
            raise SystemExit(f"worker killed while loading {self.name}")  # not an Exception: nothing catches it
        return super().load(rows)


class _Source(CountingSource):
    def __init__(self, switch, name, fail_times=0):
        super().__init__({}, [{"id": 1}])
        self.switch, self.name, self.fail_times = switch, name, fail_times

    def extract(self):
        self.switch.extracts[self.name] += 1
        if self.switch.mode[self.name] == "fail":
            raise RuntimeError(f"{self.name} source down")
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError(f"{self.name} flaky")
        return [{"id": 1}]


@pytest.fixture
def chain():
    switch = Switch()

    def node(name):
        def factory(ctx):
            return Pipeline(_Source(switch, name), IdentityTransform(), _Sink(switch, name),
                            policy=RetryPolicy(max_attempts=1, initial_delay=0))
        return factory

    registry.register_workflow("test.chain", {n: node(n) for n in CHAIN}, list(zip(CHAIN, CHAIN[1:])), replace=True)
    yield switch
    registry._workflows.pop("test.chain", None)


@pytest.fixture
def wf(make_schedule, chain):
    return make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.chain", retry_max_attempts=3)


def _rows(run):
    return [(r.run_attempt, r.task_id, r.outcome, r.resumed) for r in node_records(run)]


def test_each_node_is_recorded_as_it_finishes_and_a_killed_worker_loses_none_of_them(wf, chain, now):
    chain.mode["n3"] = "die"
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    with pytest.raises(SystemExit):
        execute_run(run_id, token, clock=lambda: now)
    # the worker is gone mid-run; what it finished is in the database already
    assert _rows(run) == [(1, "n1", "SUCCESS", False), (1, "n2", "SUCCESS", False)]
    assert sorted(nodes_done(run)) == ["n1", "n2"]


def test_a_requeued_run_resumes_after_its_succeeded_nodes(wf, chain, now):
    chain.mode["n3"] = "die"
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    with pytest.raises(SystemExit):
        execute_run(run_id, token, clock=lambda: now)
    later = now + timedelta(hours=1)
    assert stuck_runs(now=later)["requeued"] == [run.pk]  # governance: the worker went silent
    chain.mode["n3"] = "ok"
    tick_and_execute(later)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.attempt == 2
    assert chain.extracts == {"n1": 1, "n2": 1, "n3": 2, "n4": 1, "n5": 1}  # n3 ran twice: it never finished
    assert _rows(run)[2:] == [(2, "n1", "SUCCESS", True), (2, "n2", "SUCCESS", True), (2, "n3", "SUCCESS", False),
                              (2, "n4", "SUCCESS", False), (2, "n5", "SUCCESS", False)]
    assert run.report["resumed"] == ["n1", "n2"] and run.rows_loaded == 5


def test_rerun_from_failure_runs_only_the_failed_and_blocked_nodes(wf, chain, now):
    chain.mode["n3"] = "fail"
    failed = run_trigger_manual(schedule=wf, actor="tests", now=now)
    tick_and_execute(now)
    failed.refresh_from_db()
    assert failed.status == RunStatus.FAILED and failed.report["blocked"] == ["n4", "n5"]
    chain.mode["n3"] = "ok"
    rerun = run_rerun_from_failure(run=failed, actor="user:olivia", reason="source back")
    assert (rerun.trigger_kind, rerun.retry_of_id, rerun.status) == (TriggerKind.RETRY, failed.pk, RunStatus.QUEUED)
    tick_and_execute(now + timedelta(minutes=5))
    rerun.refresh_from_db()
    assert rerun.status == RunStatus.SUCCEEDED
    assert chain.extracts == {"n1": 1, "n2": 1, "n3": 2, "n4": 1, "n5": 1}
    assert [(t, resumed) for _, t, _, resumed in _rows(rerun)] == [
        ("n1", True), ("n2", True), ("n3", False), ("n4", False), ("n5", False)]
    assert rerun.rows_loaded == 3  # the rows of the nodes it ran, not the whole workflow's 5 (issue 37)
    entry = AuditEntry.objects.get(action="run.rerun_from_failure")
    assert failed.code_version  # the entry about a run names the code it ran
    assert entry.after == {"run": rerun.pk, "skips": ["n1", "n2"], "code_version": failed.code_version}
    assert entry.reason == "source back"
    # and a re-run of the re-run resumes through the chain of records
    assert sorted(nodes_done(rerun)) == CHAIN


def test_a_node_retries_under_its_own_policy_and_its_record_counts_the_tries(make_schedule, now):
    sources = {}

    def flaky(ctx):
        sources["flaky"] = _Source(Switch(), "n1", fail_times=2)
        return Pipeline(sources["flaky"], None, NoopSink(), policy=RetryPolicy(max_attempts=3, initial_delay=0))

    def plain(ctx):  # no policy of its own: the schedule's retry settings
        return Pipeline(_Source(Switch(), "n2", fail_times=1), None, NoopSink())

    registry.register_workflow("test.flaky", {"flaky": flaky, "plain": plain}, [], replace=True)
    try:
        schedule = make_schedule("wf2", target_kind=TargetKind.WORKFLOW, target_id="test.flaky",
                                 retry_max_attempts=2, retry_initial_delay=0)
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        tick_and_execute(now)
        run.refresh_from_db()
    finally:
        registry._workflows.pop("test.flaky", None)
    assert run.status == RunStatus.SUCCEEDED and run.attempt == 1  # node tries are the node's, not the run's
    assert [(r.task_id, r.attempts) for r in node_records(run)] == [("flaky", 3), ("plain", 2)]
    assert [r["attempts"] for r in run.report["records"]] == [3, 2]


@pytest.mark.parametrize("case", ["pipeline", "running", "succeeded"])
def test_rerun_from_failure_refuses_what_cannot_resume_naming_the_field(make_schedule, wf, chain, now, case):
    if case == "pipeline":
        schedule = make_schedule("plain")
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    else:
        run = run_trigger_manual(schedule=wf, actor="tests", now=now)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING if case == "running" else RunStatus.SUCCEEDED)
    run.refresh_from_db()
    before = Run.objects.count()
    with pytest.raises(ServiceError) as info:
        run_rerun_from_failure(run=run, actor="tests")
    assert info.value.field == "run"
    assert Run.objects.count() == before and not NodeRecord.objects.exists()


def _noop_chain(workflow_id, size):
    nodes = [f"t{i}" for i in range(size)]
    registry.register_workflow(workflow_id, {n: lambda ctx: Pipeline(NoopSource(), None, NoopSink()) for n in nodes},
                               list(zip(nodes, nodes[1:])), replace=True)


def test_a_node_costs_one_statement_and_nothing_else(make_schedule, now):
    """No SELECT, savepoint or heartbeat per node: ten more nodes are ten more statements, all node records."""
    counted = {}
    for size in (5, 15):
        _noop_chain(f"test.noop{size}", size)
        schedule = make_schedule(f"noop{size}", target_kind=TargetKind.WORKFLOW, target_id=f"test.noop{size}")
        run_trigger_manual(schedule=schedule, actor="tests", now=now)
        ((run_id, token),) = tick(now)
        with CaptureQueriesContext(connection) as ctx:
            assert execute_run(run_id, token, clock=lambda: now) == RunStatus.SUCCEEDED
        registry._workflows.pop(f"test.noop{size}", None)
        counted[size] = [q["sql"] for q in ctx.captured_queries]
        assert NodeRecord.objects.filter(run_id=run_id).count() == size
    extra = len(counted[15]) - len(counted[5])
    assert extra == 10
    assert sum("scheduler_noderecord" in sql and "INSERT" in sql for sql in counted[15]) == 15


def test_a_node_record_is_one_statement_committed_at_once(wf, now):
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)
    with CaptureQueriesContext(connection) as ctx:
        NodeLedger(run).append(RunRecord("n1", Outcome.SUCCESS, now, now, rows=3))
    assert len(ctx.captured_queries) == 1
    # committed: a second connection sees it at once
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT task_id, rows FROM scheduler_noderecord WHERE run_id = %s", [run.pk])
            assert cursor.fetchall() == [("n1", 3)]
    finally:
        other.close()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's commit setting")
def test_on_postgresql_only_the_node_record_commits_without_waiting_for_the_wal_flush(wf, now):
    """SET LOCAL in the INSERT's own implicit transaction: the session and any caller's transaction keep theirs."""
    run = run_trigger_manual(schedule=wf, actor="tests", now=now)

    def setting():
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    before = setting()
    with CaptureQueriesContext(connection) as ctx:
        NodeLedger(run).append(RunRecord("n1", Outcome.SUCCESS, now, now))
    assert ctx.captured_queries[0]["sql"].startswith("SET LOCAL synchronous_commit = off; INSERT")
    assert setting() == before  # the run's own commits (its end, heartbeats) still wait for the flush
    with transaction.atomic():
        with CaptureQueriesContext(connection) as ctx:
            NodeLedger(run).append(RunRecord("n2", Outcome.SUCCESS, now, now))
        assert setting() == before  # a caller's transaction is the caller's: its commit is untouched
    assert ctx.captured_queries[0]["sql"].startswith("INSERT")
    assert [r.task_id for r in node_records(run)] == ["n1", "n2"]
