"""Retention: old history goes in bounded batches; what the scheduler stands on never does."""
from __future__ import annotations

import gzip
import json
import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.db.models.signals import pre_delete

from scheduler.models import (
    Alert, AlertKind, AlertStatus, AuditEntry, Backfill, BackfillStatus, BackfillWindow, Event, GovernanceTick,
    LineageEvent, LineageStatus, NodeRecord, RefusalCount, Run, RunLogLine, RunStatus, RunUpstream, Schedule,
    TriggerKind, WatermarkState,
)
from scheduler.services.common.audit import audit_record, audit_refusal
from scheduler.services.history.audit_archive import _append, audit_archive_read, entry_record
from scheduler.services.history.prune import history_prune, prune_tick, retention_policy

pytestmark = pytest.mark.django_db
S = RunStatus
OLD = timedelta(days=200)  # past the 90-day default


@pytest.fixture
def make_run(now):
    counter = iter(range(1, 10_000))

    def make(schedule, status=S.FAILED, age=OLD, **fields):
        at = now - age
        final = status in S.final()
        return Run.objects.create(
            schedule=schedule, trigger_key=f"k{next(counter)}", trigger_kind=TriggerKind.MANUAL,
            workload_class=schedule.workload_class, status=status, queued_at=at,
            finished_at=at if final else None, **fields)

    return make


def _backfill(schedule, now, status):
    return Backfill.objects.create(schedule=schedule, range_from="2025-01-01T00:00:00+00:00",
                                   range_to="2025-01-03T00:00:00+00:00", window_size="86400", reason="r",
                                   requested_by="tests", created_at=now - OLD, status=status)


def _alive(*runs):
    return set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", flat=True))


def test_a_prune_keeps_every_run_on_the_never_deleted_list(make_schedule, make_run, now):
    up, down = make_schedule("up"), make_schedule("down")
    success = make_run(up, S.SUCCEEDED)                 # its latest success (a later run failed)
    plain = make_run(up, S.FAILED)                      # nothing refers to it: the one that goes
    set_mark = make_run(up, S.SUCCEEDED, age=OLD + timedelta(days=1))
    WatermarkState.objects.update_or_create(schedule=up, defaults={"value": "5", "updated_by_run": set_mark})
    waited_on = make_run(up, S.SUCCEEDED, age=OLD + timedelta(days=2))
    waiting = make_run(down, S.WAITING)
    RunUpstream.objects.create(run=waiting, upstream_schedule=up, upstream_run=waited_on, pinned=True)
    retried = make_run(up, S.FAILED)
    make_run(up, S.QUEUED, retry_of=retried)             # a live retry refers to it
    active_bf, paused_bf = _backfill(up, now, BackfillStatus.ACTIVE), _backfill(up, now, BackfillStatus.PAUSED)
    in_active = make_run(up, S.FAILED, backfill=active_bf)
    in_paused = make_run(up, S.SUCCEEDED, age=OLD + timedelta(days=3))
    BackfillWindow.objects.create(backfill=paused_bf, seq=0, low="1", high="2", run=in_paused)
    running = make_run(up, S.RUNNING)
    stuck_queued = make_run(down, S.QUEUED)
    latest = make_run(down, S.FAILED)                   # down's latest run
    kept = [success, set_mark, waited_on, waiting, retried, in_active, in_paused, running, stuck_queued, latest]
    counts = history_prune(now=now)
    assert _alive(*kept) == {r.pk for r in kept}
    assert not Run.objects.filter(pk=plain.pk).exists()
    assert counts["runs"] == 1


def test_the_latest_run_and_the_latest_success_of_a_schedule_stay_however_old(make_schedule, make_run, now):
    s = make_schedule("nightly")
    older_success = make_run(s, S.SUCCEEDED, age=OLD + timedelta(days=3))
    success = make_run(s, S.SUCCEEDED, age=OLD + timedelta(days=2))
    latest = make_run(s, S.FAILED, age=OLD)
    history_prune(now=now)
    assert _alive(older_success, success, latest) == {success.pk, latest.pk}


def test_a_finished_backfills_runs_and_a_cancelled_ones_are_pruned_like_any(make_schedule, make_run, now):
    s = make_schedule("orders")
    done = make_run(s, S.SUCCEEDED, backfill=_backfill(s, now, BackfillStatus.COMPLETED))
    cancelled = make_run(s, S.CANCELLED, backfill=_backfill(s, now, BackfillStatus.CANCELLED))
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    history_prune(now=now)
    assert _alive(done, cancelled) == set()


def test_a_runs_log_lines_and_node_records_go_with_it_and_the_schedule_remembers(make_schedule, make_run, now):
    s = make_schedule("orders")
    old = make_run(s, S.FAILED)
    RunLogLine.objects.bulk_create([RunLogLine(run=old, seq=i, at=now - OLD, level="INFO", source="x", message="m")
                                    for i in range(1, 4)])
    NodeRecord.objects.create(run=old, task_id="t", outcome="succeeded", started_at=now - OLD, finished_at=now - OLD)
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    counts = history_prune(now=now)
    assert (counts["runs"], counts["log_lines"], counts["node_records"]) == (1, 3, 1)
    assert not RunLogLine.objects.exists() and not NodeRecord.objects.exists()
    assert Schedule.objects.get(pk=s.pk).runs_pruned_through == old.pk


def test_young_runs_stay_and_a_schedules_own_retention_replaces_the_default(make_schedule, make_run, now):
    keep_long = make_schedule("audit-trail", retention_days=400)
    short = make_schedule("chatty", retention_days=2)
    default = make_schedule("plain")
    long_old = make_run(keep_long, S.FAILED, age=OLD)
    short_old = make_run(short, S.FAILED, age=timedelta(days=3))
    default_young = make_run(default, S.FAILED, age=timedelta(days=30))
    for s in (keep_long, short, default):
        make_run(s, S.SUCCEEDED, age=timedelta(hours=1))
    history_prune(now=now)
    assert _alive(long_old, short_old, default_young) == {long_old.pk, default_young.pk}


def test_a_prune_goes_in_bounded_batches(make_schedule, make_run, now):
    s = make_schedule("orders")
    for _ in range(7):
        make_run(s, S.FAILED)
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    counts = history_prune(now=now, batch=2, max_batches=2)
    assert counts["runs"] == 4
    assert Run.objects.count() == 4
    assert history_prune(now=now, batch=2)["runs"] == 3  # without a bound: until nothing is left


def test_a_dry_run_counts_exactly_what_would_go_and_deletes_nothing(make_schedule, make_run, now):
    s = make_schedule("orders")
    for _ in range(3):
        run = make_run(s, S.FAILED)
        RunLogLine.objects.create(run=run, seq=1, at=now - OLD, level="INFO", source="x", message="m")
    make_run(s, S.SUCCEEDED)  # old, but its latest success and latest run
    GovernanceTick.objects.create(started_at=now - timedelta(days=8))
    before = (Run.objects.count(), RunLogLine.objects.count(), GovernanceTick.objects.count(),
              AuditEntry.objects.count())
    dry = history_prune(now=now, batch=2, dry_run=True)
    assert (dry["runs"], dry["log_lines"], dry["ticks"]) == (3, 3, 1)
    assert (Run.objects.count(), RunLogLine.objects.count(), GovernanceTick.objects.count(),
            AuditEntry.objects.count()) == before
    assert history_prune(now=now, batch=2) == dry


def test_ticks_events_alerts_and_the_lineage_outbox_each_keep_their_own_age(make_schedule, make_run, now):
    s = make_schedule("orders")
    GovernanceTick.objects.create(started_at=now - timedelta(days=8), holder="old")
    GovernanceTick.objects.create(started_at=now - timedelta(days=6), holder="young")
    old_event = Event.objects.create(topic="t", event_id="1", received_at=now - timedelta(days=31))
    used_event = Event.objects.create(topic="t", event_id="2", received_at=now - timedelta(days=31))
    make_run(s, S.QUEUED, event=used_event)  # a live run came from it
    Event.objects.create(topic="t", event_id="3", received_at=now - timedelta(days=29))

    def alert(key, status, age, **extra):
        return Alert.objects.create(kind=AlertKind.RUN_FAILED, incident_key=key, schedule=s, message="m",
                                    status=status, created_at=now - age, **extra)

    alert("sent", AlertStatus.SENT, timedelta(days=91))
    alert("given-up", AlertStatus.FAILED, timedelta(days=91))
    alert("retrying", AlertStatus.FAILED, timedelta(days=91), next_attempt_at=now)
    alert("pending", AlertStatus.PENDING, timedelta(days=91))
    alert("young", AlertStatus.SENT, timedelta(days=89))

    def lineage(status, sent_age):
        return LineageEvent.objects.create(run_uuid="u", event_type="COMPLETE", job_name="j", payload={},
                                           created_at=now - timedelta(days=3), status=status,
                                           next_attempt_at=now, sent_at=now - sent_age if sent_age else None)

    lineage(LineageStatus.SENT, timedelta(hours=25))
    lineage(LineageStatus.SENT, timedelta(hours=23))
    lineage(LineageStatus.PENDING, None)
    counts = history_prune(now=now)
    assert (counts["ticks"], counts["events"], counts["alerts"], counts["lineage"]) == (1, 1, 2, 1)
    assert set(GovernanceTick.objects.values_list("holder", flat=True)) == {"young"}
    assert set(Event.objects.values_list("event_id", flat=True)) == {"2", "3"}
    assert set(Alert.objects.values_list("incident_key", flat=True)) == {"retrying", "pending", "young"}
    assert LineageEvent.objects.count() == 2
    assert old_event.pk not in set(Event.objects.values_list("pk", flat=True))


def test_zero_days_keeps_a_kind_for_ever(settings, make_schedule, make_run, now):
    settings.ETL_RETENTION_RUNS_DAYS = 0
    s = make_schedule("orders")
    old = make_run(s, S.FAILED, age=timedelta(days=5000))
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    assert retention_policy().runs is None
    history_prune(now=now)
    assert Run.objects.filter(pk=old.pk).exists()


def test_a_prune_writes_one_audit_entry_with_its_counts(make_schedule, make_run, now):
    s = make_schedule("orders")
    make_run(s, S.FAILED)
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    history_prune(now=now, actor="prune")
    entry = AuditEntry.objects.get(action="history.prune")
    assert entry.actor == "prune" and entry.after["runs"] == 1
    assert entry.before["kept_seconds"]["runs"] == 90 * 86400
    history_prune(now=now)  # nothing left: the loop does not fill the log with empty prunes
    assert AuditEntry.objects.filter(action="history.prune").count() == 1


# --- the audit log --------------------------------------------------------------------------------------------

def _old_entries(now, n, age=timedelta(days=400)):
    return [audit_record(actor="tests", action="schedule.update", target=("schedule", i), at=now - age - timedelta(
        days=31 * i), after={"i": i}) for i in range(n)]


def test_without_an_archive_the_audit_log_is_never_pruned(settings, now):
    settings.ETL_AUDIT_ARCHIVE_DIR = ""
    _old_entries(now, 3)
    counts = history_prune(now=now, policy=retention_policy(older_than=timedelta(days=1)))
    assert counts["audit"] == 0
    assert AuditEntry.objects.filter(action="schedule.update").count() == 3


def test_old_audit_entries_are_archived_by_month_then_deleted_and_read_back(settings, tmp_path, now):
    settings.ETL_AUDIT_ARCHIVE_DIR = str(tmp_path)
    entries = _old_entries(now, 3)
    young = audit_record(actor="tests", action="schedule.update", target=("schedule", "y"), at=now - timedelta(days=1))
    counts = history_prune(now=now, batch=2)
    assert counts["audit"] == 3
    files = sorted(tmp_path.glob("audit-*.jsonl.gz"))
    assert [f.name for f in files] == sorted(f"audit-{e.at:%Y-%m}.jsonl.gz" for e in entries)
    read = [record for f in files for record in audit_archive_read(f)]
    assert sorted(r["id"] for r in read) == sorted(e.pk for e in entries)
    assert {r["after"]["i"] for r in read} == {0, 1, 2}
    assert set(AuditEntry.objects.filter(action="schedule.update").values_list("pk", flat=True)) == {young.pk}
    with gzip.open(files[0], "rt") as f:
        assert json.loads(f.readline())["action"] == "schedule.update"


def test_a_refusals_repeat_count_is_archived_with_its_entry_and_goes_with_it(settings, tmp_path, now):
    settings.ETL_AUDIT_ARCHIVE_DIR = str(tmp_path)
    old, young = now - timedelta(days=400), now - timedelta(days=1)
    for at in (old, old, old, young):  # three refusals in one old window: one entry, a count of 3
        audit_refusal(user="script", perm="scheduler.change_schedule", target=None, reason="no team", now=at)
    assert RefusalCount.objects.count() == 2
    counts = history_prune(now=now)
    assert counts["audit"] == 1
    read = [record for f in tmp_path.glob("audit-*.jsonl.gz") for record in audit_archive_read(f)]
    assert [(r["action"], r["refusals"]) for r in read] == [("permission.denied", 3)]
    # the old window's count went with its entry; the young one stays with its own
    assert list(RefusalCount.objects.values_list("last_at", "count")) == [(young, 1)]


def test_an_archive_written_twice_after_a_crash_reads_each_entry_once(settings, tmp_path, now):
    entry = _old_entries(now, 1)[0]
    path = tmp_path / "audit-2025-01.jsonl.gz"
    _append(path, [entry_record(entry)])
    _append(path, [entry_record(entry)])  # the rows were not deleted before a crash: the next pass wrote them again
    assert [r["id"] for r in audit_archive_read(path)] == [entry.pk]


def test_every_other_path_still_refuses_to_delete_or_change_an_audit_entry(now):
    entry = _old_entries(now, 1)[0]
    with pytest.raises(PermissionError):
        AuditEntry.objects.filter(pk=entry.pk).delete()
    with pytest.raises(PermissionError):
        AuditEntry.objects.all().update(reason="x")
    with pytest.raises(PermissionError):
        entry.delete()
    entry.reason = "rewritten"
    with pytest.raises(PermissionError):
        entry.save()
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_the_loops_tick_deletes_at_most_its_batches_and_the_next_tick_goes_on(settings, make_schedule, make_run, now):
    settings.ETL_PRUNE_BATCH, settings.ETL_PRUNE_MAX_BATCHES = 2, 1
    s = make_schedule("orders")
    for _ in range(5):
        make_run(s, S.FAILED)
    make_run(s, S.SUCCEEDED, age=timedelta(days=1))
    assert prune_tick(now=now, holder="c1")["runs"] == 2
    assert prune_tick(now=now, holder="c1")["runs"] == 2
    assert prune_tick(now=now, holder="c1")["runs"] == 1
    assert Run.objects.count() == 1
    assert AuditEntry.objects.filter(action="history.prune", actor="prune").count() == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: SQLite locks the whole database")
def test_a_prune_batch_holds_no_schedule_row_while_it_deletes(make_schedule, make_run, now):
    """Dispatch updates due schedules' rows every tick; a batch that held them through its delete deadlocked
    with it on PostgreSQL at 10,000,000 runs (issue 25)."""
    schedules = [make_schedule(f"s{i}") for i in range(3)]
    for s in schedules:
        make_run(s, S.FAILED)
        make_run(s, S.SUCCEEDED, age=timedelta(days=1))  # the latest: kept
    seen: list[str] = []

    def try_lock(sender, instance, **kwargs):
        # inside the batch's transaction, while its runs are being deleted: another session takes every row
        def other_session():
            try:
                with transaction.atomic():
                    list(Schedule.objects.select_for_update(nowait=True).values_list("pk", flat=True))
                seen.append("free")
            except OperationalError:
                seen.append("locked")
            finally:
                connections.close_all()

        thread = threading.Thread(target=other_session)
        thread.start()
        thread.join()

    pre_delete.connect(try_lock, sender=Run, dispatch_uid="test-lock")
    try:
        assert history_prune(now=now)["runs"] == 3
    finally:
        pre_delete.disconnect(dispatch_uid="test-lock", sender=Run)
    assert seen and set(seen) == {"free"}, seen
    # and the note still says how far each schedule's runs were pruned
    assert all(s.runs_pruned_through for s in Schedule.objects.filter(pk__in=[s.pk for s in schedules]))
