"""A real cluster rolls out new code: it notices the edited module, finishes its running run, restarts on the new
code (same pid) and runs what only the new code knows; reload_workers and SIGHUP ask for the same (issue 32).
Runs are held by gate files the test opens, never by sleeps."""
from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from scheduler.models import AuditEntry, Cluster, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.code import file_digest
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
S = RunStatus

TEAM = '''\
import os
import time
from pathlib import Path

from scheduler.core import Pipeline
from scheduler.pipelines.noop import NoopSink
from scheduler.pipelines.registry import pipeline

VERSION = {version}
GATES = Path(os.environ.get("TEAM_DIR", "."))


class Gated:
    """Writes "start RUN VERSION PID" to TEAM_DIR/record, then waits for TEAM_DIR/open."""

    def __init__(self, ctx):
        self.ctx = ctx

    def extract(self):
        with open(GATES / "record", "a") as record:
            record.write(f"start {{self.ctx.run_id}} {{VERSION}} {{os.getpid()}}\\n")
        while not (GATES / "open").exists():  # the test opens the gate
            self.ctx.check_cancelled()
            time.sleep(0.05)
        return [{{"id": 1, "version": VERSION}}]


@pipeline("team.slow")
def slow(ctx):
    return Pipeline(Gated(ctx), None, NoopSink())
{extra}'''

NEW = '''

@pipeline("team.new")
def new(ctx):
    return Pipeline(Gated(ctx), None, NoopSink())
'''


def _records(path: Path) -> list[tuple[int, int, int]]:
    if not path.exists():
        return []
    return [tuple(map(int, line.split()[1:])) for line in path.read_text().splitlines()]


def _holders() -> set[str]:
    return set(Cluster.objects.values_list("holder", flat=True))


@pytest.fixture
def team(tmp_path):
    """team_rollout.py (version 1) importable here and by the cluster; `team.new` known here only as a name."""
    module = tmp_path / "team_rollout.py"
    module.write_text(TEAM.format(version=1, extra=""))
    sys.path.insert(0, str(tmp_path))
    importlib.import_module("team_rollout")
    registry.register_pipeline("team.new", lambda ctx: None, replace=True)  # so that its schedule can be saved
    yield module
    sys.path.remove(str(tmp_path))
    sys.modules.pop("team_rollout", None)
    for pipeline_id in ("team.slow", "team.new"):
        registry._pipelines.pop(pipeline_id, None)


def test_a_cluster_rolls_out_edited_code_between_runs_and_on_request(make_schedule, team, tmp_path, admin_client):
    slow = make_schedule("slow", target_id="team.slow")
    new = make_schedule("new", target_id="team.new")
    registry._pipelines.pop("team.new")
    gate, record = tmp_path / "open", tmp_path / "record"
    log = tmp_path / "cluster.log"
    proc = start_cluster("roll", log_path=log, extra_env={
        "PYTHONPATH": str(tmp_path), "ETL_PIPELINE_MODULES": "team_rollout", "TEAM_DIR": str(tmp_path),
        "ETL_CODE_CHECK_SECONDS": "0.3", "ETL_UNKNOWN_TARGET_SECONDS": "600"})
    try:
        first = wait_until(lambda: Cluster.objects.first(), timeout=90, what="the cluster's row", log_path=log)
        assert first.name == "roll" and first.pid == proc.pid and "pipeline:team.slow" in first.targets
        v1 = file_digest(team)

        # a run of a pipeline no running cluster knows yet waits, saying so
        waiting = run_trigger_manual(schedule=new, actor="tests")
        wait_until(lambda: Run.objects.get(pk=waiting.pk).reason == "no cluster knows pipeline team.new yet",
                   timeout=30, what="the unknown pipeline's run to wait", log_path=log)

        # a run begins on version 1; the module is edited under it (version 2, and team.new)
        running = run_trigger_manual(schedule=slow, actor="tests")
        wait_until(lambda: _records(record), timeout=60, what="the run to begin", log_path=log)
        team.write_text(TEAM.format(version=2, extra=NEW))
        wait_until(lambda: Cluster.objects.filter(pk=first.pk, draining_since__isnull=False).exists(), timeout=30,
                   what="the cluster to notice the new code", log_path=log)
        assert Run.objects.get(pk=running.pk).status == S.RUNNING, "the running run is not stopped"
        assert Run.objects.get(pk=waiting.pk).status == S.QUEUED
        gate.touch()
        wait_until(lambda: Run.objects.get(pk=running.pk).status == S.SUCCEEDED, timeout=60,
                   what="the running run to finish", log_path=log)
        second = wait_until(lambda: Cluster.objects.exclude(pk=first.pk).first(), timeout=90,
                            what="the cluster back on the new code", log_path=log)
        assert second.pid == proc.pid and proc.poll() is None, "the same process, executed again"
        assert second.code_version != first.code_version and "pipeline:team.new" in second.targets
        wait_until(lambda: Run.objects.get(pk=waiting.pk).status == S.SUCCEEDED, timeout=60,
                   what="the new pipeline's run", log_path=log)
        after = run_trigger_manual(schedule=slow, actor="tests")
        wait_until(lambda: Run.objects.get(pk=after.pk).status == S.SUCCEEDED, timeout=60,
                   what="a run on the new code", log_path=log)

        runs = {r.pk: r for r in Run.objects.all()}
        assert runs[running.pk].code_version == v1 and runs[after.pk].code_version == file_digest(team) != v1
        assert runs[waiting.pk].code_version == file_digest(team)
        assert all(r.attempt == 1 for r in runs.values())
        assert sorted((run, version) for run, version, _pid in _records(record)) == [
            (waiting.pk, 2), (running.pk, 1), (after.pk, 2)], "each run began once, on the code of its turn"
        restart = AuditEntry.objects.get(action="cluster.restart")
        assert restart.reason == f"newer code installed: team_rollout changed ({v1} -> {file_digest(team)})"
        page = admin_client.get(reverse("scheduler:run_detail", args=[after.pk])).content.decode()
        assert f"code changed since <a href=\"/runs/{running.pk}/\">run #{running.pk}</a>" in page

        # reload_workers: the same restart, asked for
        call_command("reload_workers", "--reason", "new settings", "--actor", "olivia")
        third = wait_until(lambda: Cluster.objects.exclude(pk__in=[first.pk, second.pk]).first(), timeout=90,
                           what="the restart reload_workers asked for", log_path=log)
        assert third.code_version == second.code_version and third.pid == proc.pid
        assert AuditEntry.objects.filter(action="cluster.restart", reason="asked by reload_workers: new settings"
                                         ).exists()

        # SIGHUP to the cluster while a run holds a worker: it finishes first, once
        gate.unlink()
        held = run_trigger_manual(schedule=slow, actor="tests")
        wait_until(lambda: any(run == held.pk for run, _v, _p in _records(record)), timeout=60,
                   what="the held run to begin", log_path=log)
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(lambda: Cluster.objects.filter(pk=third.pk, draining_since__isnull=False).exists(), timeout=30,
                   what="SIGHUP to start the restart", log_path=log)
        assert Run.objects.get(pk=held.pk).status == S.RUNNING
        gate.touch()
        wait_until(lambda: Cluster.objects.exclude(pk__in=[first.pk, second.pk, third.pk]).exists(), timeout=90,
                   what="the restart SIGHUP asked for", log_path=log)
        assert Run.objects.get(pk=held.pk).status == S.SUCCEEDED
        assert [run for run, _v, _p in _records(record)].count(held.pk) == 1
    finally:
        gate.touch()
        code = stop_cluster(proc)
    assert code == 0, log.read_text()[-3000:]
    assert not Cluster.objects.exists(), "a cluster that stops removes its row"
