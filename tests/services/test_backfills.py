"""Backfills: windows up front, oldest first through the queue, max_parallel, pause/resume/cancel/retry."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from scheduler.models import AuditEntry, Backfill, BackfillStatus, BackfillWindow, Run, RunStatus, WindowStatus
from scheduler.pipelines import registry
from scheduler.services.admission.backfills import (
    backfill_already_succeeded,
    backfill_cancel,
    backfill_pause,
    backfill_progress,
    backfill_resume,
    backfill_retry_failed,
    backfill_submit,
)
from scheduler.services.admission.waits import explain_wait
from scheduler.services.common.errors import ServiceError
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.watermarks import watermark_state
from tests.services.semantics_helpers import counting_factory, tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
W = WindowStatus


@pytest.fixture
def counter():
    counter: dict = {"fail_lows": set(), "window_status": []}

    def rows(ctx):
        if ctx.run_id:
            counter["window_status"].append(
                BackfillWindow.objects.filter(run_id=ctx.run_id).values_list("status", flat=True).first())
        if ctx.window is not None and str(ctx.window.low) in counter["fail_lows"]:
            raise RuntimeError(f"window starting {ctx.window.low} is broken")
        return [{"id": 1}]

    registry.register_pipeline("test.counting", counting_factory(counter, rows_from_window=rows), replace=True)
    yield counter
    registry._pipelines.pop("test.counting", None)


@pytest.fixture
def marked(make_schedule, now, counter):
    return make_schedule("marked", target_id="test.counting", retry_max_attempts=1, watermark_config={
        "type": "datetime", "column": "ts", "initial": now.isoformat(),
    })


def _submit(schedule, now, **kw):
    args = {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T05:30:00+00:00", "window": 3600,
            "reason": "replay after the outage", "requested_by": "user:olivia", "now": now, **kw}
    return backfill_submit(schedule=schedule, **args)


def _windows(backfill):
    return list(BackfillWindow.objects.filter(backfill=backfill).order_by("seq").values_list("low", "high", "status"))


def test_it_creates_every_window_up_front_contiguous_with_the_last_clipped(marked, now):
    backfill = _submit(marked, now)
    windows = _windows(backfill)
    assert backfill.total_windows == 6 and len(windows) == 6
    assert windows[0][:2] == ("2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00")
    assert windows[-1][:2] == ("2026-01-01T05:00:00+00:00", "2026-01-01T05:30:00+00:00")
    assert all(windows[i][1] == windows[i + 1][0] for i in range(5))
    assert {w[2] for w in windows} == {W.PENDING}
    (entry,) = AuditEntry.objects.filter(action="backfill.submit")
    assert entry.actor == "olivia" and entry.reason == "replay after the outage"


def test_an_integer_watermark_gets_integer_windows(make_schedule, now, counter):
    schedule = make_schedule("ids", target_id="test.counting", watermark_config={"type": "integer", "column": "id"})
    backfill = backfill_submit(schedule=schedule, start="0", end="250", window="100", reason="r",
                               requested_by="tests", now=now)
    assert [w[:2] for w in _windows(backfill)] == [("0", "100"), ("100", "200"), ("200", "250")]


@pytest.mark.parametrize("changes, field, text", [
    ({"start": "2026-01-02T00:00:00+00:00", "end": "2026-01-01T00:00:00+00:00"}, "to", "must be after from"),
    ({"end": "2026-01-01T00:00:00+00:00"}, "to", "must be after from"),
    ({"window": 0}, "window", "positive"),
    ({"window": "-5"}, "window", "positive"),
    ({"window": "hourly"}, "window", "seconds"),
    ({"start": "last tuesday"}, "from", "ISO 8601"),
    ({"reason": " "}, "reason", "required"),
    ({"max_parallel": 0}, "max_parallel", "whole number from 1"),
    ({"window": 60}, "window", "exceed the limit of 100"),
])
@override_settings(ETL_MAX_BACKFILL_WINDOWS=100)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_created(marked, now, changes, field, text):
    with pytest.raises(ServiceError) as info:
        _submit(marked, now, **changes)
    assert info.value.field == field and text in str(info.value)
    assert not Backfill.objects.exists() and not BackfillWindow.objects.exists()


def test_a_schedule_without_a_watermark_config_cannot_be_backfilled(make_schedule, now):
    with pytest.raises(ServiceError) as info:
        _submit(make_schedule("plain"), now)
    assert info.value.field == "schedule" and "no watermark config" in str(info.value)


def test_windows_run_oldest_first_at_most_max_parallel_and_never_move_the_live_mark(marked, now, counter, settings):
    settings.ETL_CATCHUP_ON_WORKER = False  # the dispatch loop carries each window (tests/services/test_catchup.py)
    backfill = _submit(marked, now, max_parallel=2)
    started = []
    for i in range(4):
        ids = tick_and_execute(now + timedelta(seconds=i))
        started.append([Run.objects.get(pk=rid).window_low[11:16] for rid in ids])
    assert started == [["00:00", "01:00"], ["02:00", "03:00"], ["04:00", "05:00"], []]
    assert counter["window_status"] == [W.RUNNING] * 6  # each window was RUNNING while its run ran
    backfill.refresh_from_db()
    assert backfill.status == BackfillStatus.COMPLETED
    assert backfill_progress(backfill) == {"total": 6, "done": 6, "failed": 0, "running": 0, "queued": 0,
                                           "pending": 0, "cancelled": 0}
    assert watermark_state(marked).value is None  # the live mark never moved


def test_failed_windows_can_be_retried(marked, now, counter):
    counter["fail_lows"].add("2026-01-01 01:00:00+00:00")
    backfill = _submit(marked, now, end="2026-01-01T03:00:00+00:00", max_parallel=3)
    tick_and_execute(now)
    tick_and_execute(now)
    backfill.refresh_from_db()
    assert backfill_progress(backfill)["failed"] == 1 and backfill.status == BackfillStatus.COMPLETED
    counter["fail_lows"].clear()
    assert backfill_retry_failed(backfill=backfill, actor="user:olivia", reason="source fixed", now=now) == 1
    tick_and_execute(now)
    backfill.refresh_from_db()
    progress = backfill_progress(backfill)
    assert (progress["done"], progress["failed"], backfill.status) == (3, 0, BackfillStatus.COMPLETED)
    window = BackfillWindow.objects.get(backfill=backfill, seq=1)
    assert window.attempts == 2 and window.run.trigger_key.endswith(":1:2")


def test_a_paused_backfill_starts_nothing_new_until_resumed(marked, now):
    backfill = _submit(marked, now, max_parallel=2)
    tick(now)  # windows 0 and 1 start (not executed yet)
    backfill_pause(backfill=backfill, actor="tests", reason="warehouse maintenance", now=now)
    for rid in Run.objects.filter(backfill=backfill, status=S.RUNNING).values_list("id", flat=True):
        token = Run.objects.get(pk=rid).dispatch_token
        execute_run(rid, token, clock=lambda: now)  # running windows finish
    sent = tick(now)
    assert sent == []
    assert backfill_progress(backfill)["done"] == 2 and backfill_progress(backfill)["pending"] == 4
    backfill_resume(backfill=backfill, actor="tests", reason="maintenance over", now=now)
    assert len(tick(now)) == 2
    actions = list(AuditEntry.objects.filter(target_type="backfill").order_by("id").values_list("action", flat=True))
    assert actions == ["backfill.submit", "backfill.pause", "backfill.resume"]


def test_a_queued_window_of_a_paused_backfill_says_so(marked, now):
    from scheduler.models import WorkloadClass

    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=0)  # hold everything queued
    backfill = _submit(marked, now, max_parallel=1)
    tick(now)
    backfill_pause(backfill=backfill, actor="tests", now=now)
    run = Run.objects.get(backfill=backfill)
    assert run.status == S.QUEUED
    assert explain_wait(run, now) == f"backfill {backfill.pk} paused"


def test_cancelling_leaves_no_run_stranded(marked, now):
    backfill = _submit(marked, now, max_parallel=2)
    ((first, token), (second, _)) = tick(now)
    Run.objects.filter(pk=second).update(status=S.QUEUED, admitted_at=None, dispatch_token="")  # one still queued
    backfill_cancel(backfill=backfill, actor="user:olivia", reason="wrong range", now=now)
    assert not Run.objects.filter(backfill=backfill, status__in=RunStatus.active()).exists()
    assert set(Run.objects.filter(backfill=backfill).values_list("status", flat=True)) == {S.CANCELLED}
    assert {w[2] for w in _windows(backfill)} == {W.CANCELLED}
    # the worker of the run that was running finds out at its final compare-and-set
    assert execute_run(first, token, clock=lambda: now) == "stale"
    assert tick(now) == []
    backfill.refresh_from_db()
    assert backfill.status == BackfillStatus.CANCELLED and backfill.finished_at == now
    with pytest.raises(ServiceError, match="CANCELLED"):
        backfill_resume(backfill=backfill, actor="tests", now=now)


def test_every_bad_input_is_reported_at_once_each_naming_its_field(marked, now):
    with pytest.raises(ServiceError) as info:
        _submit(marked, now, start="yesterday", end="soon", window="hourly", reason=" ")
    assert [e.field for e in info.value.errors] == ["from", "to", "window", "reason"]
    assert [e.problem for e in info.value.errors][0] == "'yesterday' is not an ISO 8601 date and time"
    assert not Backfill.objects.exists()


# --- reprocess: failed and missing windows only (issue 23, point 7) ---------------

def _ran(schedule, now, status, low, high, **fields):
    return Run.objects.create(schedule=schedule, trigger_key=f"t:{low}:{status}", trigger_kind="manual",
                              workload_class=schedule.workload_class, status=status, queued_at=now,
                              finished_at=now, window_low=low, window_high=high, **fields)


def _hour(h: int) -> str:
    return f"2026-01-01T{h:02d}:00:00+00:00"


def test_reprocess_failed_creates_only_the_windows_without_a_succeeded_run(marked, now):
    ok_first = _ran(marked, now, S.SUCCEEDED, _hour(0), _hour(1))
    _ran(marked, now, S.FAILED, _hour(1), _hour(2))  # failed: reprocessed
    ok_third = _ran(marked, now, S.SUCCEEDED, _hour(2), _hour(3))
    _ran(marked, now, S.SUCCEEDED, _hour(3), "2026-01-01T03:30:00+00:00")  # not exactly a window: reprocessed
    backfill = _submit(marked, now, reprocess="failed")
    assert [w[0] for w in _windows(backfill)] == [_hour(1), _hour(3), _hour(4), _hour(5)]
    assert backfill.total_windows == 4 and backfill_progress(backfill)["pending"] == 4 and backfill.skipped_windows == 2
    after = AuditEntry.objects.get(action="backfill.submit").after
    assert after["reprocess"] == "failed" and after["windows"] == 4 and after["skipped"] == 2
    assert after["already_succeeded"] == {_hour(0): ok_first.pk, _hour(2): ok_third.pk}


def test_reprocess_all_is_the_default_and_runs_every_window(marked, now):
    _ran(marked, now, S.SUCCEEDED, _hour(0), _hour(1))
    assert _submit(marked, now).total_windows == 6
    assert _submit(marked, now, reprocess="all").total_windows == 6


def test_reprocess_failed_ignores_other_schedules_runs(marked, make_schedule, now):
    other = make_schedule("other", watermark_config=marked.watermark_config)
    _ran(other, now, S.SUCCEEDED, _hour(0), _hour(1))
    assert _submit(marked, now, reprocess="failed").total_windows == 6


@pytest.mark.parametrize("value", ["some", "", None, True, 1])
def test_a_bad_reprocess_value_is_refused_naming_the_field(marked, now, value):
    with pytest.raises(ServiceError) as info:
        _submit(marked, now, reprocess=value)
    assert info.value.field == "reprocess" and "failed" in str(info.value) and "all" in str(info.value)
    assert not Backfill.objects.exists() and not BackfillWindow.objects.exists()


def test_reprocess_failed_with_every_window_succeeded_is_refused(marked, now):
    for h in range(5):
        _ran(marked, now, S.SUCCEEDED, _hour(h), _hour(h + 1))
    _ran(marked, now, S.SUCCEEDED, _hour(5), "2026-01-01T05:30:00+00:00")
    with pytest.raises(ServiceError) as info:
        _submit(marked, now, reprocess="failed")
    assert info.value.field == "reprocess" and "all 6 windows already succeeded" in str(info.value)
    assert not Backfill.objects.exists()


def test_backfill_plan_counts_what_a_submit_would_run(marked, now):
    run = _ran(marked, now, S.SUCCEEDED, _hour(0), _hour(1))
    pairs = [(_hour(0), _hour(1)), (_hour(1), _hour(2))]
    assert backfill_already_succeeded(marked, pairs) == {(_hour(0), _hour(1)): run.pk}
