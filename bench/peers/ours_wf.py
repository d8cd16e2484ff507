"""Ours: a workflow of N no-op pipelines run through a worker's execute path, ledger in the database.

Usage: ours_wf.py chain|fanout N   (DATABASE_URL: an already migrated scratch database)
A fresh process, like the peers': Django set up, workflow registered, one
RUNNING run of a workflow schedule executed by `execute_run`.
"""
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "etlsite.settings")
os.environ.setdefault("ETL_LOG_LEVEL", "WARNING")

SHAPE, N = sys.argv[1], int(sys.argv[2])

if __name__ == "__main__":
    import django

    django.setup()
    from django.utils import timezone

    from bench import workflows
    from scheduler.models import Run, RunStatus, TargetKind
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_enqueue, run_transition
    from scheduler.services.definitions.schedules import schedule_save

    t0 = time.perf_counter()
    workflow_id = workflows.register(SHAPE, N)
    schedule = schedule_save(data={"name": f"peer-{uuid.uuid4().hex[:10]}", "target_kind": TargetKind.WORKFLOW,
                                   "target_id": workflow_id, "trigger_kind": "manual", "retry_max_attempts": 1},
                             actor="bench")
    now = timezone.now()
    run = run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key=f"peer:{uuid.uuid4().hex}", now=now)
    token = uuid.uuid4().hex
    run_transition(run, new=RunStatus.RUNNING, now=now, admitted_at=now, heartbeat_at=now, dispatch_token=token)
    assert execute_run(run.pk, token) == RunStatus.SUCCEEDED
    elapsed = time.perf_counter() - t0
    report = Run.objects.get(pk=run.pk).report
    assert len(report["records"]) == N, len(report["records"])
    print(f"ok {len(report['records'])} {elapsed:.6f}")
