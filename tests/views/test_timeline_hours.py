"""The grouped timeline reads the hour counts kept as runs end (issue 25): for any runs, however they ended, its
counts per schedule, whole-hour slice and status are the ledger's for the same hour-aligned slices, with the runs
that reach into the range from before it and the live ones."""
from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone as dj_timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import timeline
from scheduler.models import Run, RunHourCount, RunStatus, Schedule, Team, TriggerKind
from scheduler.services.runs.end import run_finish
from scheduler.services.runs.lost import run_stop_settled
from scheduler.services.runs.stop import run_cancel, run_stop_request
from scheduler.services.history.hour_counts import hour_counts_fold, runs_counted
from scheduler.services.runs.queue import run_build
from scheduler.services.definitions.schedules import schedule_save
from scheduler.views.timeline_charts import hour_step
from tests.services.test_hour_counts import hour, ledger_counts, rollup_counts

S = RunStatus
NOW = datetime(2026, 3, 2, 12, 17, 41, tzinfo=UTC)
URL = reverse("scheduler:timeline")
OUTCOMES = [S.SUCCEEDED, S.FAILED, S.CANCELLED, S.SKIPPED, S.BLOCKED, S.QUEUED, S.RUNNING]


def _make(schedule, *, queued_at, wait, ran, outcome, key) -> None:
    """One run queued at `queued_at` that starts `wait` later (None: never) and ends `ran` after that (or after
    its queue time) with `outcome`, through the service that ends runs that way; QUEUED and RUNNING stay live."""
    started = None if wait is None else queued_at + wait
    run = run_build(schedule=schedule, trigger_kind="manual", trigger_key=key, now=queued_at)
    if started is not None:
        run.status, run.admitted_at, run.started_at, run.heartbeat_at = S.RUNNING, started, started, started
        run.dispatch_token, run.worker_id = f"tok-{key}", "c1@host:1"
    run.save()
    if outcome in (S.QUEUED, S.RUNNING):
        return
    ended = (started or queued_at) + ran
    if outcome == S.CANCELLED and started is not None:  # asked to stop, settled when its work ended
        assert run_stop_request(run=run, kind="cancel", reason="enough", now=started)
        run.refresh_from_db()
        assert run_stop_settled(run=run, now=ended, why="its worker ended")
    elif outcome == S.CANCELLED:
        assert run_cancel(run=run, actor="tests", now=ended)
    elif outcome in (S.SUCCEEDED, S.FAILED) and started is not None:
        assert run_finish(run=run, status=outcome, now=ended, token=run.dispatch_token)
    else:  # skipped, blocked or failed (a dependency timeout) from the queue; a start for them is dropped
        if started is not None:
            Run.objects.filter(pk=run.pk).update(status=S.QUEUED, started_at=None, dispatch_token="")
            run.refresh_from_db()
        assert run_finish(run=run, status=outcome, now=ended, reason="why")


def ledger_slices(*, start: datetime, end: datetime, step: int) -> tuple[Counter, dict]:
    """The grouped range [start (on the hour), end) counted from the ledger: (schedule, slice, status) -> runs,
    and schedule -> (runs, failed or blocked)."""
    slices: Counter[tuple] = Counter()
    for sid, status, queued, started, finished in Run.objects.values_list(
            "schedule_id", "status", "queued_at", "started_at", "finished_at"):
        began = hour(started or queued)
        if status in S.final():
            if start <= began < end:
                slices[(sid, int((began - start).total_seconds()) // step, status)] += 1
            elif began < start <= (finished or began):
                slices[(sid, 0, status)] += 1  # reached into the range from before it: the first slice
        elif queued < end:
            slices[(sid, max(int((began - start).total_seconds()), 0) // step, status)] += 1
    totals: dict[int, list[int]] = {}
    for (sid, _, status), n in slices.items():
        row = totals.setdefault(sid, [0, 0])
        row[0] += n
        row[1] += n if status in timeline.TROUBLE else 0
    return slices, {sid: tuple(v) for sid, v in totals.items()}


def grouped(*, start: datetime, end: datetime, step: int) -> tuple[Counter, dict]:
    outside = timeline.outside_rows(start=start, end=end)
    counts = timeline.slice_counts(start=start, end=end, step=step, outside=outside)
    per = timeline.schedules(counts)
    some = {r["schedule_id"] for r in per[:2]}  # the rows of a few schedules alone are the same rows
    assert sorted(timeline.slice_counts(start=start, end=end, step=step, outside=outside, schedule_ids=some)) == sorted(
        c for c in counts if c[0] in some)
    slices: Counter[tuple] = Counter()
    for sid, index, status, n in counts:
        slices[(sid, int(index), status)] += n
    return slices, {r["schedule_id"]: (r["n"], r["trouble"]) for r in per}


RUNS = st.lists(st.tuples(
    st.integers(0, 2),  # schedule
    st.integers(-72 * 60, -1),  # queued, minutes from NOW
    st.one_of(st.none(), st.integers(0, 200)),  # wait before the start, minutes (None: never started)
    st.integers(0, 36 * 60),  # how long until its end, minutes
    st.sampled_from(OUTCOMES),
), max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=RUNS, back=st.integers(1, 60 * 60), step_hours=st.integers(1, 6), fold=st.booleans())
def test_the_grouped_counts_are_the_ledgers_for_the_same_hour_slices(standard_class, runs, back, step_hours, fold):
    Run.objects.all().delete()
    RunHourCount.objects.all().delete()
    schedules = list(Schedule.objects.filter(name__startswith="hyp-").order_by("name"))
    if not schedules:
        schedules = [schedule_save(data={"name": f"hyp-{i}", "target_id": "demo.noop", "trigger_kind": "manual"},
                                   actor="tests") for i in range(3)]
    for i, (s, queued, wait, ran, outcome) in enumerate(runs):
        at = NOW + timedelta(minutes=queued, seconds=i)
        waited = None if wait is None else timedelta(minutes=wait)
        if outcome in (S.RUNNING, S.SUCCEEDED) and waited is None:  # these have started
            waited = timedelta(0)
        if waited is not None and at + waited > NOW:
            waited = NOW - at  # nothing starts after now
        ran_for = min(timedelta(minutes=ran), NOW - (at + (waited or timedelta(0))))  # nor ends after it
        _make(schedules[s], queued_at=at, wait=waited, ran=ran_for, outcome=outcome, key=f"h{i}")
    if fold:
        hour_counts_fold(now=NOW)
    assert rollup_counts() == ledger_counts()
    start = timeline.hour_start(NOW - timedelta(minutes=back))
    assert grouped(start=start, end=NOW, step=step_hours * 3600) == ledger_slices(
        start=start, end=NOW, step=step_hours * 3600)


def test_slices_are_whole_hours_and_only_whole_hours():
    with pytest.raises(ValueError, match="whole number of hours"):
        timeline.slice_counts(start=NOW, end=NOW, step=1800, schedule_ids=[])
    assert timeline.hour_start(datetime(2026, 3, 2, 12, 59, 59, 999999, tzinfo=UTC)) == datetime(2026, 3, 2, 12,
                                                                                                  tzinfo=UTC)


@pytest.mark.parametrize(
    ("span_h", "rows", "step_h"),
    [
        (6.5, 40, 2),
        (6.5, 10, 1),
        (48.9, 40, 12),
        (48.9, 3, 1),
        (24.2, 40, 6),
        (1.1, 40, 1),
        (48.9, 200, 49),
        (100, 40, 24),
        (100, 200, 100),
    ],
)
def test_the_slice_is_the_fewest_round_hours_that_keep_the_page_bounded(span_h, rows, step_h):
    step = hour_step(span=span_h * 3600, rows=rows, max_groups=200)
    assert step == step_h * 3600
    assert rows * -(-span_h * 3600 // step) <= 200


def test_more_rows_than_bars_get_one_slice_each_the_floor():
    assert hour_step(span=49 * 3600, rows=400, max_groups=200) == 49 * 3600


# --- the page ---------------------------------------------------------------------------------------------------

def _crowd(schedules, n, now, *, hours):
    runs = []
    for i in range(n):
        schedule = schedules[i % len(schedules)]
        at = now - timedelta(seconds=hours * 3600 * 0.9 * (i + 1) / (n + 1))
        runs.append(Run(schedule=schedule, status=S.SUCCEEDED, trigger_kind=TriggerKind.MANUAL,
                        trigger_key=f"crowd{i}", workload_class_id=schedule.workload_class_id, queued_at=at,
                        started_at=at, finished_at=at + timedelta(seconds=2)))
    runs_counted([run.pk for run in Run.objects.bulk_create(runs)])  # as finish.py counts the runs it ends


def test_a_long_run_reaching_into_the_range_and_the_live_runs_are_drawn_in_the_grouped_chart(
        viewer_client, make_schedule):
    now = dj_timezone.now()
    feeds = [make_schedule(f"feed-{i}") for i in range(3)]
    long_one, live = make_schedule("a-long-one"), make_schedule("b-live")
    _crowd(feeds, 300, now, hours=6)
    start = timeline.hour_start(now - timedelta(hours=6))
    # started 30 hours before the range and ended in it
    _make(long_one, queued_at=start - timedelta(hours=30), wait=timedelta(0), ran=timedelta(hours=30, minutes=5),
          outcome=S.FAILED, key="long")
    _make(long_one, queued_at=start - timedelta(hours=3), wait=timedelta(0), ran=timedelta(hours=1),
          outcome=S.SUCCEEDED, key="over-before")  # ended before the range: not in it
    _make(live, queued_at=now - timedelta(days=3), wait=timedelta(0), ran=timedelta(0), outcome=S.RUNNING,
          key="running-for-days")
    _make(live, queued_at=now - timedelta(minutes=1), wait=None, ran=timedelta(0), outcome=S.QUEUED, key="queued")
    page = viewer_client.get(URL, {"range": "6h"}).content.decode()
    assert "303 runs in this range" in page and 'id="timeline-hours"' in page

    def row(name):
        begin = page.index(f'data-schedule="{name}"')
        return page[begin:page.index("</g>", begin)]

    long_row = row("a-long-one")
    assert re.findall(r'data-count="(\d+)"', long_row) == ["1"]
    assert 't-failed" x="170.0"' in long_row  # the first slice, coloured by its failure
    live_row = row("b-live")
    assert sorted(int(c) for c in re.findall(r'data-count="(\d+)"', live_row)) == [1, 1]
    assert 't-running" x="170.0"' in live_row  # running since before the range: the first slice
    assert "t-queued" in live_row
    # the ordering rules hold: the row with a failure comes first
    assert page.index('data-schedule="a-long-one"') < page.index('data-schedule="feed-0"')


def test_a_crowded_range_counts_only_the_picked_teams_runs(operator_client, make_schedule):
    now = dj_timezone.now()
    payments = Team.objects.create(name="payments")
    ours, theirs = make_schedule("ours-orders"), make_schedule("theirs-ledger")
    Schedule.objects.filter(pk=theirs.pk).update(owner=payments)
    _crowd([ours], 250, now, hours=6)
    _crowd([theirs], 150, now, hours=6)
    _make(theirs, queued_at=now - timedelta(days=2), wait=timedelta(0), ran=timedelta(0), outcome=S.RUNNING,
          key="theirs-live")

    def drawn(**query):
        response = operator_client.get(URL, query)
        return ({row.label for row in response.context["chart"].rows}, response.context["total"])

    assert drawn() == ({"ours-orders"}, 250)
    assert drawn(team="all") == ({"ours-orders", "theirs-ledger"}, 401)
    assert drawn(team="payments") == ({"theirs-ledger"}, 151)  # few enough to be drawn one by one
