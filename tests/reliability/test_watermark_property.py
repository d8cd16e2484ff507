"""Whatever fails when, the watermark never moves backwards and never passes data that was not loaded."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.models import Run, RunStatus, Schedule, WatermarkHistory, WatermarkState
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.lost import run_lost
from scheduler.services.cluster.governance import stuck_runs
from scheduler.services.runs.queue import run_trigger_manual
from tests.reliability.pipelines import FaultPlan

pytestmark = pytest.mark.django_db(transaction=True)
BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
FAULTS = ["none", "extract_error", "crash_after_load", "commit_crash", "lost_worker"]


def _mark(schedule) -> datetime | None:
    row = WatermarkState.objects.filter(schedule=schedule).first()
    return datetime.fromisoformat(row.value) if row and row.value else None


def _step(schedule, fault: str, now: datetime) -> None:
    FaultPlan.fault, FaultPlan.on_load = fault, None
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    sent = []
    with mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda r, t: sent.append((r, t))
    ):
        dispatch_tick(now=now, holder="prop")
    for run_id, token in sent:
        if fault == "lost_worker":
            # governance gives the run up while the worker is still loading
            FaultPlan.on_load = lambda rid=run_id: run_lost(run=Run.objects.get(pk=rid), now=now, why="lost")
        if fault == "commit_crash":
            # the process dies inside the final transaction, after the sink loaded
            # (where the mark is written: every advance goes through watermarks._advance)
            with mock.patch("scheduler.services.runs.watermarks._advance", side_effect=SystemExit("killed")):
                with pytest.raises(SystemExit):
                    execute_run(run_id, token, clock=lambda: now)
            stuck_runs(now=now + timedelta(hours=1))  # governance notices the silence
        else:
            execute_run(run_id, token, clock=lambda: now)
    # anything left queued (a re-queued attempt) is cancelled so each step is independent
    Run.objects.filter(schedule=schedule, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).update(
        status=RunStatus.CANCELLED)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=8),
    gaps=st.lists(st.integers(min_value=1, max_value=90), min_size=8, max_size=8),
    max_window=st.sampled_from([None, 600, 1800]),
)
def test_the_watermark_is_monotonic_and_never_passes_unloaded_data(standard_class, faults, gaps, max_window):
    import tests.reliability.pipelines  # noqa: F401

    from scheduler.services.definitions.schedules import schedule_save

    Run.objects.all().delete()
    WatermarkHistory.objects.all().delete()
    Schedule.objects.filter(name="prop").delete()
    FaultPlan.rows = [{"id": i, "ts": BASE + timedelta(minutes=i)} for i in range(1, 240)]
    FaultPlan.target = {}
    wm = {"type": "datetime", "column": "ts", "initial": BASE.isoformat()}
    if max_window:
        wm["max_window"] = max_window
    schedule = schedule_save(data={"name": "prop", "target_id": "reliability.faulty", "trigger_kind": "manual",
                                   "watermark_config": wm, "retry_max_attempts": 2,
                                   # the property is the watermark's: five failures in a row (one example in a few
                                   # hundred) would open the breaker, which then rightly blocks the clean run
                                   "breaker_threshold": 100}, actor="tests")
    now = BASE
    previous = None
    for fault, gap in zip(faults, gaps):
        now += timedelta(minutes=gap)
        _step(schedule, fault, now)
        mark = _mark(schedule)
        if fault == "none":
            assert mark is not None and (previous is None or mark > previous), "a clean run moves the watermark"
        if previous is not None:
            assert mark is not None and mark >= previous, "the watermark moved backwards"
        if mark is not None:
            # the mark is where the next window starts: every row before it was loaded
            missing = [r["id"] for r in FaultPlan.rows if r["ts"] < mark and r["id"] not in FaultPlan.target]
            assert not missing, f"the watermark {mark} passed rows that were never loaded: {missing[:5]}"
            assert mark <= now
        previous = mark
