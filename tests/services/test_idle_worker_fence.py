"""A worker idle longer than ETL_FENCE_SECONDS must not fence the first run it claims.

The supervisor's `last_beat_ok` moves only when the heartbeat pump writes a beat, and the pump writes none
while the worker holds no run; a run is fenced for silence since the later of the last written beat and its
own start (found while testing issue 20's authoring part: it made workflow tests fail now and then).
"""
from __future__ import annotations

import time

import pytest
from django.conf import settings

from scheduler.core import IdentityTransform, Pipeline, stop
from scheduler.models import RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.worker import supervisor
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual


class Brief:
    """A source that takes a moment (a few supervisor ticks), as any real extract does."""

    def extract(self):
        stop.current().wait(0.5)
        stop.check()
        return [{"id": 1}]


@pytest.fixture
def brief_pipeline():
    registry.register_pipeline("test.brief", lambda ctx: Pipeline(Brief(), IdentityTransform(), NoopSink()),
                               replace=True)
    yield
    registry._pipelines.pop("test.brief", None)


@pytest.mark.django_db
def test_the_first_run_after_an_idle_spell_is_not_fenced(brief_pipeline, make_schedule, now, request):
    schedule = make_schedule("brief", target_id="test.brief", retry_max_attempts=1)
    watchdog = supervisor.Supervisor.get()
    watchdog.last_beat_ok -= settings.ETL_FENCE_SECONDS + 1  # the worker sat idle longer than the fence
    request.addfinalizer(lambda: setattr(watchdog, "last_beat_ok", time.monotonic()))  # later tests: not fenced
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.stop_kind, run.stop_reason, run.reason)
