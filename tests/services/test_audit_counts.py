"""The audit log's hourly counts (AuditCount): written with every entry, folded by governance, lowered by the
archive, backfilled by migration 0028; the sum over a key always equals the key's entries in the log."""
from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.db import connection, transaction

from scheduler.models import AuditCount, AuditEntry, Team
from scheduler.models.audit import audit_delete_archived, audit_hour
from scheduler.services.history import audit_counts
from scheduler.services.common.audit import audit_record, audit_record_many, audit_refusal
from scheduler.services.history.audit_archive import audit_archive_batch
from scheduler.services.history.audit_counts import audit_counts_fold, audit_counts_from_log
from scheduler.services.cluster.governance import governance_tick

UTC = dt_timezone.utc
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def _counted() -> dict:
    """The sum of n per (hour, team, actor, action), keys summing to 0 left out."""
    sums: Counter = Counter()
    for hour, team_id, actor, action, n in AuditCount.objects.values_list("hour", "team_id", "actor", "action", "n"):
        sums[(hour, team_id, actor, action)] += n
    return {key: n for key, n in sums.items() if n}


def _logged() -> dict:
    """The log's own entries per (hour, team, actor, action)."""
    return dict(Counter((audit_hour(at), team_id, actor, action) for at, team_id, actor, action in
                        AuditEntry.objects.values_list("at", "team_id", "actor", "action")))


def _entry(at, actor="ada", action="run.trigger", team_id=None):
    return AuditEntry(at=at, actor=actor, action=action, target_type="run", target_id="1", team_id=team_id)


def test_every_way_of_writing_an_entry_counts_it(db, make_schedule):
    team = Team.objects.create(name="billing")
    schedule = make_schedule("orders")  # schedule_save's own entry
    audit_record(actor="user:ada", action="run.trigger", target=schedule, at=T0 + timedelta(minutes=59, seconds=59))
    audit_record_many([_entry(T0, team_id=team.pk), _entry(T0 + timedelta(hours=1), actor="bob")])
    AuditEntry.objects.create(at="2026-03-01T10:30:00Z", actor="ada", action="run.trigger", target_type="run")
    AuditEntry.objects.bulk_create([_entry(T0), _entry(T0 - timedelta(microseconds=1))])
    audit_refusal(user="user:eve", perm="scheduler.change_schedule", target=schedule, reason="not yours", now=T0)
    assert _counted() == _logged() and sum(_logged().values()) == 8
    assert _counted()[(T0, None, "ada", "run.trigger")] == 2  # 10:00 and 10:30
    assert _counted()[(T0, schedule.owner_id, "ada", "run.trigger")] == 1  # 10:59:59, the schedule's team
    assert _counted()[(T0 - timedelta(hours=1), None, "ada", "run.trigger")] == 1
    # no hot row: every write inserted its own delta, nothing waited on another writer's row
    assert not AuditCount.objects.filter(folded=True).exists()


def test_an_entry_that_fails_to_save_counts_nothing(db):
    with pytest.raises(RuntimeError), transaction.atomic():
        audit_record_many([_entry(T0)])
        raise RuntimeError("the change it records failed")
    assert not AuditCount.objects.exists() and not AuditEntry.objects.exists()


def test_folding_keeps_the_sums_and_leaves_one_row_per_key(db):
    audit_record_many([_entry(T0 + timedelta(minutes=m), actor=("ada", "bob")[m % 2]) for m in range(10)])
    for m in range(5):
        audit_record(actor="ada", action="run.trigger", target=("run", m), at=T0 + timedelta(hours=2, minutes=m))
    before = _counted()
    assert audit_counts_fold() == 2 + 5  # deltas folded: one per key of the batch, one per single write
    assert _counted() == before == _logged()
    assert AuditCount.objects.count() == len(before) == 3 and not AuditCount.objects.filter(folded=False).exists()
    assert audit_counts_fold() == 0  # folding twice changes nothing
    assert _counted() == before and AuditCount.objects.count() == 3


def test_a_fold_in_small_batches_while_entries_arrive_keeps_the_sums(db):
    for round_ in range(6):
        audit_record_many([_entry(T0 + timedelta(minutes=round_ * 17 + i), actor=("ada", "bob", "cyd")[i % 3])
                           for i in range(round_ + 1)])
        audit_counts_fold(batch=2)  # the oldest two deltas; the newer ones wait for the next pass
        assert _counted() == _logged()
    while audit_counts_fold(batch=2):
        pass
    assert _counted() == _logged() and AuditCount.objects.count() == len(_logged())


def test_a_fold_gives_up_when_a_delta_below_its_top_appears_meanwhile(db, monkeypatch):
    base = 10**9  # explicit ids with a gap below the top, where a late writer's delta lands
    AuditCount.objects.create(id=base, hour=T0, actor="ada", action="run.trigger", n=1)
    AuditCount.objects.create(id=base + 20, hour=T0, actor="ada", action="run.trigger", n=1)
    real = audit_counts.Counter

    def with_a_late_delta(*args):
        AuditCount.objects.create(id=base + 10, hour=T0, actor="ada", action="run.trigger", n=1)
        return real(*args)

    monkeypatch.setattr(audit_counts, "Counter", with_a_late_delta)
    assert audit_counts_fold() == 0  # deleted 3 deltas where it had summed 2: rolled back
    monkeypatch.undo()
    assert AuditCount.objects.filter(folded=False).count() == 2 and not AuditCount.objects.filter(folded=True).exists()
    assert audit_counts_fold() == 2 and _counted() == {(T0, None, "ada", "run.trigger"): 2}


@pytest.mark.django_db(transaction=True)
def test_a_delta_committed_during_a_fold_is_not_lost(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers (IMMEDIATE transactions): nothing commits while a fold writes")
    opened, commit, committed = threading.Event(), threading.Event(), threading.Event()

    def late_writer():
        try:
            with transaction.atomic():
                AuditCount.objects.create(hour=T0, actor="ada", action="run.trigger", n=1)  # a lower id, uncommitted
                opened.set()
                commit.wait(30)
            committed.set()
        finally:
            connection.close()

    thread = threading.Thread(target=late_writer)
    thread.start()
    assert opened.wait(30)
    AuditCount.objects.create(hour=T0, actor="ada", action="run.trigger", n=1)  # committed, a higher id
    real = audit_counts.Counter

    def meanwhile(*args):
        commit.set()  # the fold has read its deltas: the late one commits now, below the fold's top
        assert committed.wait(30)
        return real(*args)

    monkeypatch.setattr(audit_counts, "Counter", meanwhile)
    assert audit_counts_fold() == 0  # given up
    monkeypatch.undo()
    thread.join(30)
    assert audit_counts_fold() == 2 and _counted() == {(T0, None, "ada", "run.trigger"): 2}


@pytest.mark.django_db(transaction=True)
def test_writers_and_folds_at_once_keep_the_counts_exact():
    errors = []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            barrier.wait(timeout=30)
            for k in range(15):
                with transaction.atomic():
                    audit_record(actor=f"user:u{k % 3}", action=("run.trigger", "run.cancel")[i % 2],
                                 target=("run", k), at=T0 + timedelta(minutes=k * 7 + i))
                if k % 2 == i % 2:
                    audit_counts_fold(batch=1 + (k + i) % 5)
                if k % 5 == 0:
                    audit_record_many([_entry(T0 + timedelta(hours=3, minutes=k), actor=f"w{i}") for _ in range(3)])
        except Exception as exc:  # noqa: BLE001  surfaced below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    while AuditCount.objects.filter(folded=False).exists():
        audit_counts_fold()
    assert _counted() == _logged() and sum(_logged().values()) == 4 * (15 + 3 * 3)


def test_the_archive_takes_its_entries_out_of_the_counts(db, tmp_path):
    # two whole hours and half of a third before the cutoff; the rest after it
    entries = [_entry(T0 + timedelta(minutes=20 * i), actor=("ada", "bob")[i % 2]) for i in range(9)]
    audit_record_many(entries)
    audit_counts_fold()
    cutoff = T0 + timedelta(hours=2, minutes=30)
    assert audit_archive_batch(cutoff=cutoff, batch=4, directory=tmp_path) == 4  # a batch ends mid-hour
    assert _counted() == _logged()
    assert audit_archive_batch(cutoff=cutoff, batch=100, directory=tmp_path) == 4
    assert _counted() == _logged() == {(T0 + timedelta(hours=2), None, "ada", "run.trigger"): 1}
    audit_counts_fold()
    # the rows of the hours wholly archived are gone; the partial hour keeps what is still in the log
    assert list(AuditCount.objects.values_list("hour", "actor", "n", "folded")) == [
        (T0 + timedelta(hours=2), "ada", 1, True)]


def test_an_archive_pass_beside_another_counts_each_entry_out_once(db):
    audit_record_many([_entry(T0), _entry(T0)])
    ids = list(AuditEntry.objects.values_list("id", flat=True))
    assert audit_delete_archived(ids) == 2
    assert audit_delete_archived(ids) == 0  # the second pass finds them gone: no second negative count
    assert _counted() == {} == _logged()


def test_the_migration_counts_the_log_it_finds(db):
    team = Team.objects.create(name="billing")
    audit_record_many([_entry(T0 + timedelta(minutes=m, microseconds=m), actor=("ada", "bob")[m % 2],
                              team_id=(None, team.pk)[m % 3 == 0]) for m in range(0, 150, 7)])
    audit_record_many([_entry(T0 - timedelta(days=400))])
    expected = _logged()
    AuditCount.objects.all().delete()  # the log as migration 0028 finds it: no counts yet
    migration = import_module("scheduler.migrations.0028_audit_counts")
    migration.backfill(None, SimpleNamespace(connection=connection))
    assert _counted() == expected
    assert AuditCount.objects.count() == len(expected) and not AuditCount.objects.filter(folded=False).exists()
    # the generator's variant: only entries above an id (the bench's bulk SQL bypasses the model)
    AuditCount.objects.all().delete()
    first = AuditEntry.objects.order_by("id").first()
    assert audit_counts_from_log(after_id=first.pk) == AuditCount.objects.count() > 0
    AuditCount.objects.create(hour=audit_hour(first.at), team_id=first.team_id, actor=first.actor,
                              action=first.action, n=1, folded=True)  # the one entry left out
    assert _counted() == expected


def test_governance_folds_the_counts(db):
    audit_record_many([_entry(T0), _entry(T0)])
    tick = governance_tick(now=T0 + timedelta(minutes=1), holder="c1")
    assert tick.actions["audit_counts_folded"] >= 1  # the batch's delta, and the tick's own entries if any
    assert not AuditCount.objects.filter(folded=False, hour=T0).exists() and _counted() == _logged()


def test_the_counts_are_not_offered_for_editing(db):
    assert AuditCount not in admin.site._registry
