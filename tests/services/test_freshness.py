"""Freshness skip: a run younger than refresh_after is SKIPPED and its source is never called."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.models import Run, RunStatus
from scheduler.services.runs.queue import run_enqueue
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_within_refresh_after_is_skipped_with_the_reason_and_never_extracts(make_schedule, now, counter):
    schedule = make_schedule("fresh", target_id="test.counting", refresh_after_seconds=3600)
    run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key="1", now=now)
    tick_and_execute(now)
    assert counter["extracts"] == 1

    later = now + timedelta(minutes=30)
    skipped = run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key="2", now=later)
    assert tick_and_execute(later) == []
    skipped.refresh_from_db()
    assert skipped.status == RunStatus.SKIPPED
    assert skipped.reason.startswith("still fresh: last success 2026-03-02 12:00:00 UTC, refresh_after 3600 s")
    assert counter["extracts"] == 1

    much_later = now + timedelta(hours=1, seconds=1)
    run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key="3", now=much_later)
    tick_and_execute(much_later)
    assert counter["extracts"] == 2
    assert list(Run.objects.filter(schedule=schedule).order_by("id").values_list("status", flat=True)) == [
        RunStatus.SUCCEEDED, RunStatus.SKIPPED, RunStatus.SUCCEEDED]


def test_a_manual_run_is_not_skipped_for_freshness(make_schedule, now, counter):
    from scheduler.services.runs.queue import run_trigger_manual

    schedule = make_schedule("fresh", target_id="test.counting", refresh_after_seconds=3600)
    run_enqueue(schedule=schedule, trigger_kind="cron", trigger_key="1", now=now)
    tick_and_execute(now)
    run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(minutes=1))
    tick_and_execute(now + timedelta(minutes=1))
    assert counter["extracts"] == 2
