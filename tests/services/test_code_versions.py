"""Which code a run ran: recorded with the claim's own UPDATE, shown by the run page, the API and the audit entries
about the run; a run whose pipeline this worker's code does not know goes back to the queue (issue 32)."""
from __future__ import annotations

import os
import stat
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from scheduler.core import Pipeline
from scheduler.models import AuditEntry, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.code import file_digest, module_file
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.services.worker import code_versions
from scheduler.services.cluster import batch, execution
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
HERE = __name__


def sync(ctx):
    return Pipeline(NoopSource(n=1), None, NoopSink())


@pytest.fixture
def team_pipeline():
    """`team.sync`, registered from this module (its source is this file)."""
    registry.register_pipeline("team.sync", sync, replace=True)
    yield "team.sync"
    registry._pipelines.pop("team.sync", None)


def _script(path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_pipeline_run_records_its_module_digest_with_the_claim(make_schedule, team_pipeline, now):
    run = run_trigger_manual(schedule=make_schedule("sync", target_id=team_pipeline), actor="tests", now=now)
    with CaptureQueriesContext(connection) as queries:
        tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED
    assert run.code_version == file_digest(module_file(HERE))  # no installed distribution holds the tests
    assert len(run.code_version) == 12
    writes = [q["sql"] for q in queries if "code_version" in q["sql"] and q["sql"].lstrip().startswith("UPDATE")]
    assert len(writes) == 1 and "started_at" in writes[0], "written by the claim itself"


def test_recording_the_code_costs_no_statement(make_schedule, team_pipeline, now, monkeypatch):
    schedule = make_schedule("sync", target_id=team_pipeline)

    def statements() -> int:
        run_trigger_manual(schedule=schedule, actor="tests", now=now)
        sent = tick(now)
        with CaptureQueriesContext(connection) as queries:
            for run_id, token in sent:
                execution.execute_run(run_id, token, clock=lambda: now)
        return len(queries)

    recorded = statements()
    monkeypatch.setattr(execution, "run_code_or_hand_back", lambda run, **kw: None if run is None else "")
    assert statements() == recorded
    assert list(Run.objects.order_by("pk").values_list("code_version", flat=True)) == [
        file_digest(module_file(HERE)), ""]


def test_a_built_in_pipeline_names_the_schedulers_distribution(make_schedule, now):
    run = run_trigger_manual(schedule=make_schedule("noop", target_id="demo.noop"), actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    demo = file_digest(sys.modules["scheduler.pipelines.demo"].__file__)
    assert run.code_version.startswith("etl-scheduler ") and run.code_version.endswith(f" · {demo}")


def test_a_command_records_its_program_and_the_run_page_shows_when_it_changed(make_schedule, now, tmp_path,
                                                                             admin_client):
    program = _script(tmp_path / "job.sh", "#!/bin/sh\necho one\n")
    schedule = make_schedule("job", target_kind="command", target_id="", command={"argv": [program]})
    first = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    first.refresh_from_db()
    assert first.status == S.SUCCEEDED and first.code_version == file_digest(program)
    later = now + timedelta(minutes=1)
    same = run_trigger_manual(schedule=schedule, actor="tests", now=later)
    tick_and_execute(later)
    page = admin_client.get(reverse("scheduler:run_detail", args=[same.pk])).content.decode()
    assert f"the same code as <a href=\"/runs/{first.pk}/\">run #{first.pk}</a>" in page
    _script(tmp_path / "job.sh", "#!/bin/sh\necho two\n")
    os.utime(program, ns=(0, 0))  # a new modification time too: the cached digest is not reused
    later += timedelta(minutes=1)
    changed = run_trigger_manual(schedule=schedule, actor="tests", now=later)
    tick_and_execute(later)
    changed.refresh_from_db()
    assert changed.status == S.SUCCEEDED and changed.code_version == file_digest(program) != first.code_version
    page = admin_client.get(reverse("scheduler:run_detail", args=[changed.pk])).content.decode()
    assert 'id="code-changed"' in page and f"run #{same.pk}</a>, which ran <code>{first.code_version}</code>" in page
    api = admin_client.get(f"/api/v1/runs/{changed.pk}").json()
    assert api["code_version"] == changed.code_version


def test_a_shell_command_records_no_digest(make_schedule, now):
    schedule = make_schedule("sh", target_kind="command", target_id="", command={"shell": "true"})
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED and run.code_version == ""


def test_an_audit_entry_about_a_run_names_the_code_it_ran(make_schedule, team_pipeline, now):
    run = run_trigger_manual(schedule=make_schedule("sync", target_id=team_pipeline), actor="tests", now=now)
    ((run_id, _token),) = tick(now)
    Run.objects.filter(pk=run_id).update(started_at=now, code_version="team-etl 1.0.0 · 0123456789ab")
    run.refresh_from_db()
    run_cancel(run=run, actor="user:olivia", reason="wrong day", now=now)
    entry = AuditEntry.objects.get(action="run.stop.cancel")
    assert entry.after == {"status": "STOPPING", "stop": "cancel", "code_version": "team-etl 1.0.0 · 0123456789ab"}


def test_a_worker_that_does_not_know_the_pipeline_hands_the_run_back(make_schedule, team_pipeline, now):
    run = run_trigger_manual(schedule=make_schedule("sync", target_id=team_pipeline), actor="tests", now=now)
    ((run_id, token),) = tick(now)
    registry._pipelines.pop(team_pipeline)  # this worker runs code from before the pipeline existed
    assert execution.execute_run(run_id, token, clock=lambda: now) == "stale"
    run.refresh_from_db()
    assert (run.status, run.attempt, run.started_at, run.dispatch_token) == (S.QUEUED, 1, None, "")
    assert run.reason.startswith("cluster ") and "does not know pipeline team.sync yet" in run.reason
    assert run.not_before == now + code_versions.HAND_BACK_DELAY
    entry = AuditEntry.objects.get(action="run.handed_back")
    assert (entry.target_id, entry.after["status"], entry.reason) == (str(run.pk), S.QUEUED, run.reason)


def test_a_batch_hands_back_only_the_runs_it_does_not_know(make_schedule, team_pipeline, now):
    known = make_schedule("noop", target_id="demo.noop")
    unknown = make_schedule("sync", target_id=team_pipeline)
    runs = [run_trigger_manual(schedule=s, actor="tests", now=now) for s in (known, unknown)]
    pairs = tick(now)
    registry._pipelines.pop(team_pipeline)
    out = batch.execute_runs(pairs, clock=lambda: now)
    assert out == {runs[0].pk: S.SUCCEEDED, runs[1].pk: "stale"}
    assert Run.objects.get(pk=runs[1].pk).status == S.QUEUED
