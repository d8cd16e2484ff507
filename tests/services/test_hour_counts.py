"""The timeline's hour counts (services/hour_counts.py): kept as runs end in every way they end, folded by
governance, taken back by a prune, so they always equal what the ledger holds (issue 25)."""
from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from scheduler.models import Run, RunHourCount, RunStatus, RunTally
from scheduler.services.history import hour_counts
from scheduler.services.runs.transitions import run_refused
from scheduler.services.runs.end import (
    Ending,
    run_cancel,
    run_finish,
    run_lost,
    run_stop_request,
    run_stop_settled,
    runs_finish,
    runs_lost,
)
from scheduler.services.cluster.governance import governance_tick
from scheduler.services.history.hour_counts import hour_counts_fold, runs_counted
from scheduler.services.history.prune import history_prune, retention_policy
from scheduler.services.runs.queue import run_build, run_trigger_manual
from tests.services.semantics_helpers import tick, tick_and_execute

S = RunStatus
ZERO = {column: 0 for column in RunHourCount.COLUMNS.values()}


def hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def ledger_counts() -> dict[tuple, int]:
    """What the rollup must hold, counted from the ledger: final runs by (schedule, start hour, start hour, status),
    and again by (schedule, start hour, end hour, status) those that ended in a later hour."""
    out: Counter[tuple] = Counter()
    for sid, status, queued, started, finished in Run.objects.filter(status__in=S.final()).values_list(
            "schedule_id", "status", "queued_at", "started_at", "finished_at"):
        begin = hour(started or queued)
        end = hour(finished or started or queued)
        out[(sid, begin, begin, status)] += 1
        if end > begin:
            out[(sid, begin, end, status)] += 1
    return dict(out)


def rollup_counts() -> dict[tuple, int]:
    out: Counter[tuple] = Counter()
    for sid, at, end, *counts in RunHourCount.objects.values_list("schedule_id", "hour", "end_hour",
                                                                 *RunHourCount.COLUMNS.values()):
        for status, n in zip(RunHourCount.COLUMNS, counts):
            out[(sid, at, end, status)] += n
    return {key: n for key, n in out.items() if n != 0}


def keys(counts: dict[tuple, int]) -> set[tuple]:
    """The rows a folded rollup holds for these counts: one per (schedule, hour, end hour)."""
    return {key[:3] for key in counts}


def started(counts: dict[tuple, int]) -> int:
    """The runs in these counts (each once: in the row of its start hour)."""
    return sum(n for (_, at, end, _), n in counts.items() if at == end)


def running(schedule, now, *, key, attempt=1, max_attempts=None) -> Run:
    """A run a worker claimed at `now` (RUNNING, with a dispatch token and a heartbeat)."""
    run = run_build(schedule=schedule, trigger_kind="manual", trigger_key=key, now=now)
    run.status, run.attempt = S.RUNNING, attempt
    if max_attempts:
        run.max_attempts = max_attempts
    run.admitted_at = run.started_at = run.heartbeat_at = now
    run.dispatch_token, run.worker_id = f"tok-{key}", "c1@host:1"
    run.save()
    return Run.objects.select_related("schedule").get(pk=run.pk)


def queued(schedule, now, *, key) -> Run:
    run = run_build(schedule=schedule, trigger_kind="manual", trigger_key=key, now=now)
    run.save()
    return Run.objects.select_related("schedule").get(pk=run.pk)


@pytest.mark.django_db(transaction=True)
def test_every_way_a_run_ends_is_counted_in_the_hours_the_ledger_holds(make_schedule, now, settings):
    settings.ETL_ALERTS_SYNC = True
    a = make_schedule("a")
    flaky = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1)
    child = make_schedule("child", depends_on=["flaky"])
    t = now - timedelta(hours=10)
    # executed by a worker: a success, a failure
    run_trigger_manual(schedule=a, actor="tests", now=t)
    tick_and_execute(t)
    failed = run_trigger_manual(schedule=flaky, actor="tests", params={"fail": True}, now=t + timedelta(hours=1))
    tick_and_execute(t + timedelta(hours=1))
    # blocked by its failed upstream at admission
    run_trigger_manual(schedule=child, actor="tests", now=t + timedelta(hours=2))
    tick(t + timedelta(hours=2))
    # cancelled in the queue two hours after it was queued: it reaches from one hour into another
    waiting = queued(a, t + timedelta(hours=2, minutes=50), key="cancel-me")
    assert run_cancel(run=waiting, actor="tests", now=t + timedelta(hours=4, minutes=10))
    # refused at the door: skipped, blocked
    assert run_refused(schedule=a, status=S.SKIPPED, reason="overlap policy", trigger_kind="manual",
                       trigger_key="refused-skip", now=t + timedelta(hours=5))
    assert run_refused(schedule=a, status=S.BLOCKED, reason="circuit open", trigger_kind="manual",
                       trigger_key="refused-block", now=t + timedelta(hours=5))
    # a finished verdict and a skip from the queue
    assert run_finish(run=queued(a, t + timedelta(hours=5), key="fresh"), status=S.SKIPPED,
                      now=t + timedelta(hours=5), reason="still fresh")
    # lost workers with no attempt left: in bulk (governance's path) and one by one
    lost = [running(a, t + timedelta(hours=6, minutes=55), key=f"lost{i}", max_attempts=1) for i in range(3)]
    assert len(runs_lost(runs=lost, now=t + timedelta(hours=7, minutes=5))["failed"]) == 3
    one = running(a, t + timedelta(hours=7), key="lost-one", max_attempts=1)
    assert run_lost(run=one, now=t + timedelta(hours=7, minutes=2), why="worker lost") == "failed"
    # a worker's batch of bare successes (one compare-and-set statement), and a stop settled by governance
    batch = [running(a, t + timedelta(hours=8), key=f"batch{i}") for i in range(3)]
    out = runs_finish(endings=[Ending(run=r, status=S.SUCCEEDED, now=t + timedelta(hours=8, minutes=1),
                                      token=r.dispatch_token) for r in batch])
    assert set(out.values()) == {S.SUCCEEDED}
    stopped = running(a, t + timedelta(hours=8, minutes=30), key="stop-me")
    assert run_stop_request(run=stopped, kind="cancel", reason="enough", now=t + timedelta(hours=8, minutes=31))
    stopped.refresh_from_db()
    assert run_stop_settled(run=stopped, now=t + timedelta(hours=9, minutes=1), why="its worker ended")
    # a failure through run_finish, and a run still live: counted when it ends, not before
    assert run_finish(run=running(a, t + timedelta(hours=9), key="fails"), status=S.FAILED,
                      now=t + timedelta(hours=9, minutes=5), token="tok-fails", reason="boom")
    queued(a, t + timedelta(hours=9), key="still-queued")

    expected = ledger_counts()
    assert set(Run.objects.values_list("status", flat=True)) == {*S.final(), S.QUEUED}
    assert rollup_counts() == expected
    assert started(expected) == Run.objects.filter(status__in=S.final()).count() == 16
    assert Run.objects.get(pk=failed.pk).status == S.FAILED
    assert any(key[1] != key[2] for key in expected), "a run reaching into a later hour is keyed by both hours"
    # the status counters and the hour counts are written together
    assert sum(RunTally.objects.values_list("n", flat=True)) == 16
    governance_tick(now=now, holder="tests")  # folds them: the sums stay
    assert not RunHourCount.objects.filter(folded=False).exists()
    assert rollup_counts() == expected
    assert RunHourCount.objects.count() == len(keys(expected))


def test_a_lost_compare_and_set_counts_nothing(make_schedule, now):
    run = running(make_schedule("a"), now, key="r")
    Run.objects.filter(pk=run.pk).update(status=S.CANCELLED, finished_at=now)  # someone else got there first
    assert not run_finish(run=run, status=S.SUCCEEDED, now=now, token=run.dispatch_token)
    assert not RunHourCount.objects.exists()


def test_counting_a_run_that_is_not_final_counts_nothing(make_schedule, now):
    runs_counted([queued(make_schedule("a"), now, key="q").pk])
    assert not RunHourCount.objects.exists()


# --- folding ------------------------------------------------------------------------------------------------

def _end(schedule, at, status, key):
    run = running(schedule, at, key=key)
    assert run_finish(run=run, status=status, now=at + timedelta(seconds=30), token=run.dispatch_token)


def test_a_fold_sums_the_rows_of_each_key_once_and_a_second_fold_changes_nothing(make_schedule, now):
    a, b = make_schedule("a"), make_schedule("b")
    for i in range(6):
        _end(a if i % 2 else b, now - timedelta(hours=i % 3), S.SUCCEEDED if i % 3 else S.FAILED, f"r{i}")
    expected = ledger_counts()
    assert RunHourCount.objects.filter(folded=False).count() == 6
    assert hour_counts_fold(now=now) == 6
    assert hour_counts_fold(now=now) == 0  # nothing left to fold
    assert rollup_counts() == expected and RunHourCount.objects.count() == len(keys(expected))
    # later ends of the same keys add to the folded rows
    for i in range(6, 9):
        _end(a, now - timedelta(hours=1), S.SUCCEEDED, f"r{i}")
    assert hour_counts_fold(now=now, batch=2) == 2  # the oldest two; the third waits
    assert RunHourCount.objects.filter(folded=False).count() == 1
    assert rollup_counts() == ledger_counts()
    assert hour_counts_fold(now=now) == 1
    assert rollup_counts() == ledger_counts() and RunHourCount.objects.count() == len(keys(ledger_counts()))
    assert RunHourCount.objects.filter(folded=True).count() == RunHourCount.objects.count()


@pytest.mark.django_db(transaction=True)
def test_folding_while_runs_end_on_another_connection_loses_and_doubles_nothing(make_schedule, now):
    schedule = make_schedule("busy")
    base = queued(schedule, now, key="base")  # noqa: F841 (a row of the schedule before the worker starts)
    errors: list[BaseException] = []
    done = threading.Event()

    def worker():
        try:
            for i in range(40):
                _end(schedule, now - timedelta(minutes=7 * i), S.SUCCEEDED if i % 5 else S.FAILED, f"w{i}")
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    folds = 0
    while not done.is_set():
        folds += hour_counts_fold(now=now, batch=7)
    thread.join()
    assert not errors, errors
    while hour_counts_fold(now=now):
        pass
    assert rollup_counts() == ledger_counts()
    assert started(ledger_counts()) == 40
    assert not RunHourCount.objects.filter(folded=False).exists()


@pytest.mark.django_db(transaction=True)
def test_a_fold_is_given_up_when_a_row_below_its_top_commits_while_it_folds(make_schedule, now, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's writers queue at BEGIN IMMEDIATE: no row can commit inside a fold's transaction")
    # two schedules: a run's end also locks its schedule's kept outcomes row (outcomes.py), and the fast end must
    # not wait for the slow one's commit
    schedule, other = make_schedule("a"), make_schedule("b")
    inserted, release = threading.Event(), threading.Event()

    def slow_end():  # a run's end that took its id first and commits after a later one
        try:
            with transaction.atomic():
                _end(schedule, now - timedelta(hours=1), S.SUCCEEDED, "slow")
                inserted.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_end)
    thread.start()
    assert inserted.wait(30)
    _end(other, now - timedelta(hours=2), S.FAILED, "fast")  # committed, with the higher id
    read = hour_counts._unfolded

    def read_then_let_the_slow_one_commit(batch):
        rows = read(batch)
        release.set()
        thread.join()
        return rows

    monkeypatch.setattr(hour_counts, "_unfolded", read_then_let_the_slow_one_commit)
    assert hour_counts_fold(now=now) == 0  # given up: it would have deleted a row it did not sum
    monkeypatch.setattr(hour_counts, "_unfolded", read)
    assert RunHourCount.objects.filter(folded=False).count() == 2
    assert hour_counts_fold(now=now) == 2
    assert rollup_counts() == ledger_counts() and started(ledger_counts()) == 2


# --- pruning ------------------------------------------------------------------------------------------------

def test_a_prune_takes_back_the_counts_of_the_runs_it_deletes(make_schedule, now):
    a, b = make_schedule("a"), make_schedule("b")
    for day in range(10):
        for i, schedule in enumerate((a, b)):
            _end(schedule, now - timedelta(days=day, hours=i), S.SUCCEEDED if day % 3 else S.FAILED, f"d{day}-{i}")
    assert hour_counts_fold(now=now) == 20
    before = Run.objects.count()
    deleted = history_prune(now=now, policy=retention_policy(older_than=timedelta(days=4)))["runs"]
    assert 0 < deleted < before  # the latest success of each schedule is kept, however old
    assert rollup_counts() == ledger_counts()
    assert hour_counts_fold(now=now) > 0  # the negative rows meet their folded rows
    assert rollup_counts() == ledger_counts()
    assert not RunHourCount.objects.filter(**ZERO).exists(), "a key whose runs are all gone has no row"
    assert RunHourCount.objects.count() == len(keys(ledger_counts()))


def test_a_prune_before_a_fold_leaves_the_same_sums(make_schedule, now):
    a = make_schedule("a")
    for day in range(6):
        _end(a, now - timedelta(days=day), S.SUCCEEDED, f"d{day}")
    history_prune(now=now, policy=retention_policy(older_than=timedelta(days=2)))
    assert RunHourCount.objects.filter(succeeded__lt=0).exists()  # taken back by rows of their own, until a fold
    assert rollup_counts() == ledger_counts()
    hour_counts_fold(now=now)
    assert rollup_counts() == ledger_counts() and not RunHourCount.objects.filter(**ZERO).exists()
