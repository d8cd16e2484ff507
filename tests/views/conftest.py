"""Fixtures for the page tests: logged-in clients and a quick run factory."""

from __future__ import annotations

from datetime import timedelta
from itertools import count

import pytest

_keys = count(1)


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def make_run(db, now):
    """make_run(schedule, status=..., **fields): a ledger row written directly, for read-side tests.

    A final run is also recorded as ended (services/outcomes.py), as finish.py records every run it ends: the
    overview's failing schedules and failure work list read the schedule's kept latest success and failure."""
    from scheduler.models import Run, RunStatus, TriggerKind
    from scheduler.services.history.outcomes import outcomes_record

    def make(schedule, status=RunStatus.SUCCEEDED, **fields):
        defaults = {
            "trigger_kind": TriggerKind.MANUAL,
            "trigger_key": f"t{next(_keys)}",
            "workload_class_id": schedule.workload_class_id,
            "queued_at": now - timedelta(minutes=5),
            "priority": schedule.priority,
        }
        if status in RunStatus.final():
            defaults.update(started_at=now - timedelta(minutes=4), finished_at=now - timedelta(minutes=3))
        if status == RunStatus.RUNNING:
            defaults.update(
                started_at=now - timedelta(seconds=30),
                heartbeat_at=now - timedelta(seconds=2),
                admitted_at=now - timedelta(seconds=30),
                worker_id="cluster-a/1",
            )
        defaults.update(fields)
        run = Run.objects.create(schedule=schedule, status=status, **defaults)
        outcomes_record([run])
        return run

    return make
