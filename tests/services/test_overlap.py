"""Overlap and catch-up policies end to end: firing, the gate, cancel, dependencies, watermark slices."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.models import AuditEntry, Run, RunStatus, Schedule
from scheduler.services.runs import dependencies
from scheduler.services.admission.waits import explain_wait
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.firing import compute_next_fire, fire_due_schedules
from scheduler.services.runs.watermarks import watermark_state
from tests.services.semantics_helpers import tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def every_minute(make_schedule, name="iv", **fields):
    """An interval schedule firing every 60 s from START, whose clock starts at START."""
    schedule = make_schedule(name, trigger_kind="interval",
                             trigger_config={"seconds": 60, "anchor": START.isoformat()}, **fields)
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=START)
    schedule.refresh_from_db()
    return schedule


def statuses(schedule):
    return list(Run.objects.filter(schedule=schedule).order_by("id").values_list("status", flat=True))


def fire_and_admit(minute: int) -> list[int]:
    """Fire the interval at START + minute and admit what may start (nothing finishes)."""
    now = START + timedelta(minutes=minute)
    fire_due_schedules(now=now)
    return [rid for rid, _ in tick(now)]


def test_without_a_policy_a_plain_schedule_allows_overlap(make_schedule):
    schedule = every_minute(make_schedule)
    assert schedule.overlap == "allow_all"
    fire_and_admit(0)
    fire_and_admit(1)
    assert statuses(schedule) == [S.RUNNING, S.RUNNING]


def test_skip_records_a_fire_while_a_run_is_active_as_skipped_with_the_reason(make_schedule):
    schedule = every_minute(make_schedule, overlap_policy="skip")
    fire_and_admit(0)
    fire_and_admit(1)
    first, second = Run.objects.filter(schedule=schedule).order_by("id")
    assert (first.status, second.status) == (S.RUNNING, S.SKIPPED)
    assert second.reason == f"overlap policy skip: run {first.pk} is still RUNNING"
    assert second.logical_time == START + timedelta(minutes=1) and second.finished_at is not None


def test_skip_is_the_default_for_a_watermarked_schedule(make_schedule, counter):
    schedule = every_minute(make_schedule, target_id="test.counting", watermark_config={
        "type": "datetime", "column": "ts", "initial": (START - timedelta(hours=1)).isoformat()})
    assert schedule.overlap_policy == "" and schedule.overlap == "skip"
    fire_and_admit(0)
    fire_and_admit(1)
    assert statuses(schedule) == [S.RUNNING, S.SKIPPED]


def test_buffer_one_queues_one_run_behind_the_active_one_and_skips_the_rest(make_schedule):
    schedule = every_minute(make_schedule, overlap_policy="buffer_one")
    fire_and_admit(0)
    fire_and_admit(1)
    fire_and_admit(2)
    assert statuses(schedule) == [S.RUNNING, S.QUEUED, S.SKIPPED]
    running, buffered, skipped = Run.objects.filter(schedule=schedule).order_by("id")
    assert skipped.reason == (f"overlap policy buffer_one: run {running.pk} is still RUNNING and run {buffered.pk} "
                              "already waits its turn")
    assert explain_wait(buffered, START + timedelta(minutes=2)) == (
        "previous run of this schedule is still running (overlap policy buffer_one)")


def test_buffer_all_queues_every_fire_and_runs_them_one_at_a_time_oldest_first(make_schedule, counter):
    schedule = every_minute(make_schedule, target_id="test.counting", overlap_policy="buffer_all")
    fire_and_admit(0)
    fire_and_admit(1)
    fire_and_admit(2)
    assert statuses(schedule) == [S.RUNNING, S.QUEUED, S.QUEUED]
    # the running one finishes: exactly the next one, the oldest, starts
    first = Run.objects.filter(schedule=schedule).order_by("id").first()
    Run.objects.filter(pk=first.pk).update(status=S.SUCCEEDED, finished_at=START + timedelta(minutes=2))
    tick(START + timedelta(minutes=2, seconds=30))
    assert statuses(schedule) == [S.SUCCEEDED, S.RUNNING, S.QUEUED]


def test_cancel_other_cancels_the_active_run_through_the_cancel_service_and_starts_the_new_one(make_schedule):
    schedule = every_minute(make_schedule, overlap_policy="cancel_other")
    fire_and_admit(0)
    fire_and_admit(1)
    old, new = Run.objects.filter(schedule=schedule).order_by("id")
    assert (old.status, new.status) == (S.CANCELLED, S.RUNNING)
    assert old.reason == "overlap policy cancel_other: replaced by the fire at 2026-03-02 12:01:00 UTC"
    entry = AuditEntry.objects.get(action="run.cancel", target_id=str(old.pk))
    assert entry.actor == "scheduler"


def test_a_manual_run_is_never_skipped_but_waits_its_turn_under_a_serial_policy(make_schedule):
    from scheduler.services.runs.queue import run_trigger_manual

    schedule = every_minute(make_schedule, overlap_policy="skip")
    fire_and_admit(0)
    manual = run_trigger_manual(schedule=schedule, actor="tests", now=START + timedelta(seconds=10))
    tick(START + timedelta(seconds=20))
    manual.refresh_from_db()
    assert manual.status == S.QUEUED


def test_a_watermarked_schedule_refuses_allow_all_naming_the_field(make_schedule):
    with pytest.raises(ServiceError) as info:
        make_schedule("wm", watermark_config={"type": "integer", "column": "id"}, overlap_policy="allow_all")
    assert info.value.field == "overlap_policy"
    assert not Schedule.objects.filter(name="wm").exists()


@pytest.mark.parametrize("field, value", [("overlap_policy", "sometimes"), ("overlap_policy", 3),
                                          ("catchup", "maybe"), ("catchup", 1)])
def test_bad_policies_are_refused_naming_the_field(make_schedule, field, value):
    with pytest.raises(ServiceError) as info:
        make_schedule("bad", **{field: value})
    assert info.value.field == field


def test_the_old_boolean_catchup_still_reads(make_schedule):
    assert make_schedule("a", catchup=True).catchup == "all"
    assert make_schedule("b", catchup=False).catchup == "latest"


def test_dependencies_look_past_a_fire_its_overlap_policy_skipped(make_schedule):
    upstream = every_minute(make_schedule, "up", overlap_policy="skip")
    downstream = make_schedule("down", depends_on=["up"])
    fire_and_admit(0)
    fire_and_admit(1)
    assert statuses(upstream) == [S.RUNNING, S.SKIPPED]
    # a downstream run of the skipped fire's time is judged on the run still RUNNING, not on the skip
    at = START + timedelta(minutes=1)
    down_run = Run.objects.create(schedule=downstream, trigger_kind="cron", trigger_key="cron:1", logical_time=at,
                                  queued_at=at, workload_class_id=downstream.workload_class_id)
    verdict = dependencies.verdict_for(down_run)
    assert verdict.action == "wait" and "'up'" in verdict.reason
    assert [m.status for m in verdict.matches] == [S.RUNNING]


def hourly(make_schedule, name, start, **fields):
    schedule = make_schedule(name, trigger_kind="cron", trigger_config={"cron": "0 * * * *"}, **fields)
    Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=compute_next_fire(schedule, after=start))
    schedule.refresh_from_db()
    return schedule


def test_catch_up_none_records_the_missed_period_as_one_skipped_run_and_goes_on(make_schedule):
    schedule = hourly(make_schedule, "none", START, catchup="none")
    # down from 12:30 to 15:20: 13:00, 14:00 and 15:00 were missed
    fire_due_schedules(now=datetime(2026, 3, 2, 15, 20, tzinfo=UTC))
    [missed] = Run.objects.filter(schedule=schedule)
    assert missed.status == S.SKIPPED and missed.logical_time == datetime(2026, 3, 2, 15, tzinfo=UTC)
    assert missed.reason == ("catch-up policy none: the fire at 2026-03-02 15:00:00 UTC was missed (and every fire "
                             "since 2026-03-02 13:00:00 UTC); no run, the schedule goes on at its next fire")
    # back on time: 16:00 runs
    fire_due_schedules(now=datetime(2026, 3, 2, 16, 0, 2, tzinfo=UTC))
    assert statuses(schedule) == [S.SKIPPED, S.QUEUED]


def test_catch_up_latest_is_one_run_for_the_latest_missed_fire(make_schedule):
    schedule = hourly(make_schedule, "latest", START)
    assert schedule.catchup == "latest"
    fire_due_schedules(now=datetime(2026, 3, 2, 15, 20, tzinfo=UTC))
    [run] = Run.objects.filter(schedule=schedule)
    assert run.status == S.QUEUED and run.logical_time == datetime(2026, 3, 2, 15, tzinfo=UTC)


def test_catch_up_all_with_overlap_buffer_all_queues_every_missed_fire_up_to_the_bound(make_schedule):
    schedule = hourly(make_schedule, "all", START, catchup="all", max_catchup=2, overlap_policy="buffer_all")
    fire_due_schedules(now=datetime(2026, 3, 2, 15, 20, tzinfo=UTC))
    assert list(Run.objects.filter(schedule=schedule).order_by("id").values_list("logical_time", "status")) == [
        (datetime(2026, 3, 2, 14, tzinfo=UTC), S.QUEUED), (datetime(2026, 3, 2, 15, tzinfo=UTC), S.QUEUED)]


def test_a_watermarked_schedule_catching_up_runs_its_slices_back_to_back(make_schedule, counter):
    schedule = hourly(make_schedule, "slices", START - timedelta(minutes=1), target_id="test.counting",
                      watermark_config={"type": "datetime", "column": "ts", "max_window": 86400,
                                        "initial": (START - timedelta(days=3)).isoformat()})
    fire_due_schedules(now=START)
    # no further trigger: each success queues the next slice at once
    for _ in range(4):
        tick_and_execute(START)
    runs = list(Run.objects.filter(schedule=schedule).order_by("id"))
    assert [r.status for r in runs] == [S.SUCCEEDED] * 3
    assert [(r.window_low, r.window_high) for r in runs] == [
        ((START - timedelta(days=d)).isoformat(), (START - timedelta(days=d - 1)).isoformat()) for d in (3, 2, 1)]
    assert watermark_state(schedule).value == START


def test_a_fire_during_the_slices_is_skipped_by_the_default_policy(make_schedule, counter, settings):
    settings.ETL_CATCHUP_ON_WORKER = (
        False  # the next slice waits for the dispatch loop (tests/services/test_catchup.py)
    )
    schedule = hourly(make_schedule, "slices", START - timedelta(minutes=1), target_id="test.counting",
                      watermark_config={"type": "datetime", "column": "ts", "max_window": 86400,
                                        "initial": (START - timedelta(days=3)).isoformat()})
    fire_due_schedules(now=START)
    tick_and_execute(START)  # first slice done, the second queued
    fire_due_schedules(now=START + timedelta(hours=1))
    assert statuses(schedule) == [S.SUCCEEDED, S.QUEUED, S.SKIPPED]
