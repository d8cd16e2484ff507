"""Watermarks move with a run's success, in the same transaction, and never otherwise."""
from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest

from scheduler.models import AuditEntry, Run, RunStatus, WatermarkHistory
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.runs.watermarks import watermark_reset, watermark_set, watermark_state
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture
def marked(make_schedule, now, counter):
    return make_schedule("marked", target_id="test.counting", retry_max_attempts=1, watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(hours=1)).isoformat(),
    })


def test_a_success_moves_the_mark_to_the_window_high_end_with_a_history_entry(marked, now):
    run = run_trigger_manual(schedule=marked, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED
    assert watermark_state(marked).value == now
    assert run.window_low == (now - timedelta(hours=1)).isoformat() and run.window_high == now.isoformat()
    assert run.watermark_after == now.isoformat()
    (entry,) = WatermarkHistory.objects.filter(schedule=marked)
    assert entry.kind == "advance" and entry.run_id == run.pk


def test_a_failure_does_not_move_the_mark(marked, now):
    run_trigger_manual(schedule=marked, actor="tests", params={"fail": True}, now=now)
    tick_and_execute(now)
    assert Run.objects.get(schedule=marked).status == S.FAILED
    assert watermark_state(marked).value is None
    assert not WatermarkHistory.objects.filter(schedule=marked).exists()


def test_a_crash_between_load_and_commit_leaves_the_mark_and_the_run_unchanged(marked, now, counter):
    from scheduler.services.cluster.execution import execute_run

    run_trigger_manual(schedule=marked, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    # the last statement of the success transaction fails after the sink loaded
    crash = mock.patch("scheduler.services.runs.end.propagate", side_effect=RuntimeError("crash before commit"))
    with crash, pytest.raises(RuntimeError):
        execute_run(run_id, token, clock=lambda: now)
    assert counter["extracts"] == 1  # the pipeline did run
    run = Run.objects.get(pk=run_id)
    assert run.status == S.RUNNING  # governance re-queues it when the heartbeat stops
    assert watermark_state(marked).value is None
    assert not WatermarkHistory.objects.filter(schedule=marked).exists()


def test_max_window_splits_a_long_gap_into_consecutive_runs(make_schedule, now, counter):
    schedule = make_schedule("split", target_id="test.counting", retry_max_attempts=1, watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(hours=3)).isoformat(), "max_window": 3600,
    })
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    for _ in range(5):
        tick_and_execute(now)
    runs = list(Run.objects.filter(schedule=schedule).order_by("id"))
    assert [r.status for r in runs] == [S.SUCCEEDED] * 3, [(r.status, r.reason, r.trigger_kind) for r in runs]
    bounds = [(r.window_low, r.window_high) for r in runs]
    expected = [((now - timedelta(hours=h)).isoformat(), (now - timedelta(hours=h - 1)).isoformat()) for h in (3, 2, 1)]
    assert bounds == expected  # consecutive, no gap, no overlap
    assert watermark_state(schedule).value == now


def test_set_and_reset_are_audited_with_the_reason(marked, now):
    value = (now - timedelta(minutes=5)).isoformat()
    watermark_set(schedule=marked, value=value, actor="user:olivia", reason="skip a broken hour", now=now)
    assert watermark_state(marked).value == now - timedelta(minutes=5)
    watermark_reset(schedule=marked, actor="user:olivia", reason="reload everything", now=now)
    assert watermark_state(marked).value is None
    actions = list(AuditEntry.objects.filter(target_id=str(marked.pk), action__startswith="watermark.")
                   .order_by("id").values_list("action", "actor", "reason"))
    assert actions == [("watermark.set", "olivia", "skip a broken hour"),
                       ("watermark.reset", "olivia", "reload everything")]
    assert [h.kind for h in WatermarkHistory.objects.filter(schedule=marked).order_by("id")] == ["set", "reset"]


@pytest.mark.parametrize("value, reason, field", [
    ("yesterday", "why", "value"),
    ("2026-03-01T00:00:00+00:00", "  ", "reason"),
])
def test_a_bad_value_or_missing_reason_is_refused_and_changes_nothing(marked, now, value, reason, field):
    with pytest.raises(ServiceError) as info:
        watermark_set(schedule=marked, value=value, actor="tests", reason=reason, now=now)
    assert info.value.field == field
    assert watermark_state(marked).value is None
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()


def test_a_schedule_without_a_watermark_cannot_have_one_set(make_schedule, now):
    with pytest.raises(ServiceError) as info:
        watermark_set(schedule=make_schedule("plain"), value="1", actor="tests", reason="x", now=now)
    assert info.value.field == "schedule"


@pytest.fixture
def dated(make_schedule, now, counter):
    return make_schedule("dated", target_id="test.counting", watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(days=1)).isoformat()})


def test_a_mark_in_the_future_is_refused_unless_forced(dated, now):
    with pytest.raises(ServiceError) as info:
        watermark_set(schedule=dated, value=(now + timedelta(minutes=1)).isoformat(), actor="tests", reason="x",
                      now=now)
    assert info.value.field == "value" and "is in the future" in str(info.value)
    assert watermark_state(dated).value is None and not AuditEntry.objects.filter(action="watermark.set").exists()
    watermark_set(schedule=dated, value=now.isoformat(), actor="tests", reason="up to now", now=now)  # now is fine
    watermark_set(schedule=dated, value=(now + timedelta(days=1)).isoformat(), actor="tests", reason="planned",
                  now=now, force=True)
    assert watermark_state(dated).value == now + timedelta(days=1)
    entry = AuditEntry.objects.filter(action="watermark.set").latest("id")
    assert entry.after["forced"] is True


def test_the_host_refuses_a_future_mark_unless_forced(dated, now):
    from django.utils import timezone

    from scheduler.host import SchedulerHost

    later = (timezone.now() + timedelta(days=2)).isoformat()
    with pytest.raises(ServiceError) as info:
        SchedulerHost().watermarks.set("dated", later, reason="x")
    assert info.value.field == "value"
    assert SchedulerHost().watermarks.set("dated", later, reason="x", force=True).startswith(later[:10])
