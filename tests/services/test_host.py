"""SchedulerHost: the facade a script uses, over the same services as every other entry point."""
from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus, Schedule
from scheduler.services.common.errors import NotFound, ServiceError
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host():
    return SchedulerHost()


def test_trigger_manual_by_schedule_name_queues_a_run_with_override_params(host, make_schedule):
    make_schedule("orders")
    run_id = host.trigger_manual("orders", {"rows": 2}, actor="api:etl-bot")
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.QUEUED and run.params == {"rows": 2} and run.triggered_by == "api:etl-bot"


def test_trigger_manual_accepts_a_pipeline_id_targeted_by_exactly_one_schedule(host, make_schedule):
    make_schedule("only", target_id="demo.flaky")
    run_id = host.trigger_manual("demo.flaky")
    assert Run.objects.get(pk=run_id).schedule.name == "only"


def test_trigger_manual_refuses_an_ambiguous_or_unknown_id_and_creates_nothing(host, make_schedule):
    make_schedule("one")
    make_schedule("two")
    with pytest.raises(ServiceError, match=r"several schedules \(one, two\)"):
        host.trigger_manual("demo.noop")
    with pytest.raises(NotFound, match="no schedule or pipeline named 'nope'"):
        host.trigger_manual("nope")
    with pytest.raises(ServiceError, match="params"):
        host.trigger_manual("one", ["not", "a", "dict"])
    assert not Run.objects.exists()


def test_get_active_runs_lists_queued_and_running_runs_with_their_pipeline(host, make_schedule, now):
    make_schedule("a")
    make_schedule("b", target_id="demo.flaky")
    first = host.trigger_manual("a")
    second = host.trigger_manual("b")
    Run.objects.filter(pk=first).update(status=RunStatus.RUNNING)
    assert host.get_active_runs() == [(first, "demo.noop", "RUNNING"), (second, "demo.flaky", "QUEUED")]


def test_reset_circuit_breaker_closes_it_and_records_who(host, make_schedule):
    schedule = make_schedule("shaky")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    host.reset_circuit_breaker("shaky", reset_by="user:olivia")
    schedule.refresh_from_db()
    assert (schedule.breaker_status, schedule.breaker_failures) == (BreakerStatus.CLOSED, 0)
    assert host.audit_log.list(action="breaker.reset")[0].actor == "olivia"


def test_submit_backfill_returns_its_id_and_backfills_shows_progress(host, make_schedule, now):
    make_schedule("marked", watermark_config={"type": "integer", "column": "id"})
    backfill_id = host.submit_backfill("marked", 0, 30, 10, reason="replay", requested_by="api:etl-bot")
    assert host.backfills.get(backfill_id).total_windows == 3
    assert host.backfills.progress(backfill_id)["pending"] == 3
    assert [b.pk for b in host.backfills.list()] == [backfill_id]
    host.backfills.pause(backfill_id, reason="later")
    assert host.backfills.get(backfill_id).status == "PAUSED"
    with pytest.raises(NotFound):
        host.backfills.get(backfill_id + 1)


def test_submit_backfill_reprocesses_failed_windows_only_when_asked(host, make_schedule, now):
    schedule = make_schedule("marked", watermark_config={"type": "integer", "column": "id"})
    Run.objects.create(schedule=schedule, trigger_key="t0", trigger_kind="manual", status=RunStatus.SUCCEEDED,
                       workload_class=schedule.workload_class, queued_at=now, finished_at=now,
                       window_low="0", window_high="10")
    backfill_id = host.submit_backfill("marked", 0, 30, 10, reason="replay", reprocess="failed")
    assert host.backfills.get(backfill_id).total_windows == 2
    with pytest.raises(ServiceError) as info:
        host.submit_backfill("marked", 0, 30, 10, reason="replay", reprocess="failed only")
    assert info.value.field == "reprocess"


def test_storage_watermarks_and_audit_log_read_the_same_ledger(host, make_schedule, now):
    make_schedule("marked", watermark_config={"type": "integer", "column": "id"})
    run_id = host.trigger_manual("marked")
    tick_and_execute(now)
    assert host.storage.get(run_id).status == RunStatus.SUCCEEDED
    assert [r.pk for r in host.storage.list(schedule="marked", status="SUCCEEDED")] == [run_id]
    assert host.storage.last_success("marked").pk == run_id
    with pytest.raises(ServiceError, match="status"):
        host.storage.list(status="DONE")
    assert host.watermarks.set("marked", "42", reason="skip ahead", actor="user:olivia") == "42"
    assert host.watermarks.get("marked") == "42"
    assert host.watermarks.history("marked")[0].new_value == "42"
    host.watermarks.reset("marked", reason="start over")
    assert host.watermarks.get("marked") is None
    entry = host.audit_log.list(action="watermark.set")[0]
    assert host.audit_log.get(entry.pk).reason == "skip ahead"
    assert AuditEntry.objects.filter(action="run.trigger").count() == 1


def test_reload_recomputes_next_fire_for_enabled_time_based_schedules(host, make_schedule, now):
    tick = make_schedule("tick", trigger_kind="interval", trigger_config={"seconds": 60})
    manual = make_schedule("by-hand")
    Schedule.objects.filter(pk=tick.pk).update(next_fire_at=None)
    result = host.reload(now=now)
    tick.refresh_from_db()
    manual.refresh_from_db()
    assert tick.next_fire_at is not None and now < tick.next_fire_at <= now + timedelta(seconds=60)
    assert manual.next_fire_at is None
    assert result["schedules"] == 1 and result["pipelines"] >= 1


def test_start_runs_the_loops_in_process_and_stop_ends_them(host, make_schedule):
    host.start()
    try:
        assert host.running
        host.start()  # a second start does not start a second set of loops
        assert [loop.loop_name for loop in host._loops] == [
            "dispatch", "governance", "alerts", "lineage", "prune", f"reaper@{socket.gethostname()}"]
    finally:
        host.stop()
    assert not host.running


def test_next_fires_follow_debian_cron_on_spring_forward_day(host, make_schedule):
    from datetime import datetime, timezone

    make_schedule("every_two_hours", trigger_kind="cron", timezone="Europe/Berlin",
                  trigger_config={"cron": "0 */2 * * *"})
    fires = host.next_fires("every_two_hours", 2, after=datetime(2024, 3, 30, 22, 30, tzinfo=timezone.utc))
    # 00:00 CET, then 04:00 CEST: 02:00 does not exist and 03:00 is not named
    assert fires == [datetime(2024, 3, 30, 23, tzinfo=timezone.utc), datetime(2024, 3, 31, 2, tzinfo=timezone.utc)]


def test_next_fires_refuses_a_manual_schedule_and_a_bad_count(host, make_schedule):
    make_schedule("by_hand")
    with pytest.raises(ServiceError) as info:
        host.next_fires("by_hand")
    assert info.value.field == "schedule"
    make_schedule("hourly", trigger_kind="cron", trigger_config={"cron": "0 * * * *"})
    with pytest.raises(ServiceError) as info:
        host.next_fires("hourly", 0)
    assert info.value.field == "count"


def test_rerun_from_failure_returns_the_new_run(host, make_schedule):
    from scheduler.models import TargetKind

    make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="demo.nightly")
    failed = Run.objects.get(pk=host.trigger_manual("wf"))
    Run.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED)
    new_id = host.rerun_from_failure(failed.pk, actor="user:olivia", reason="fixed")
    assert Run.objects.get(pk=new_id).retry_of_id == failed.pk
    with pytest.raises(NotFound):
        host.rerun_from_failure(999999)
