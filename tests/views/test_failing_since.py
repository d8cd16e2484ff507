"""Since when a schedule fails, wherever it appears, and BLOCKED runs folded in its recent runs (issue 37, point 3)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from scheduler import worklist
from scheduler.models import BreakerStatus, RunStatus, Schedule
from scheduler.streaks import STREAK_LOOKBACK, failing_streaks

pytestmark = pytest.mark.django_db
S = RunStatus


def _failing(make_schedule, make_run, now, name="orders", *, failures=4, ok_before=True):
    """A schedule that succeeded at now-60 min, then failed `failures` times, 5 min apart from now-40 min."""
    schedule = make_schedule(name)
    if ok_before:
        make_run(schedule, S.SUCCEEDED, finished_at=now - timedelta(minutes=60))
    runs = [make_run(schedule, S.FAILED, reason=f"EtlError: source down {i}",
                     finished_at=now - timedelta(minutes=40 - 5 * i)) for i in range(failures)]
    return schedule, runs


def test_a_streak_counts_the_failures_since_the_last_success_and_names_the_first_and_last(make_schedule, make_run,
                                                                                           now):
    schedule = make_schedule("orders")
    make_run(schedule, S.FAILED, finished_at=now - timedelta(hours=3))  # before the success: not in the streak
    make_run(schedule, S.SUCCEEDED, finished_at=now - timedelta(hours=2))
    _, runs = _failing(make_schedule, make_run, now, "other")
    first = make_run(schedule, S.FAILED, reason="first", finished_at=now - timedelta(minutes=50))
    last = make_run(schedule, S.FAILED, reason="", error="Traceback ...\nEtlError: boom", finished_at=now)
    streaks = failing_streaks([schedule.pk, runs[0].schedule_id], now=now)
    mine = streaks[schedule.pk]
    assert (mine.count, mine.since, mine.run_id, mine.error, mine.longer) == (
        2, first.finished_at, last.pk, "Traceback ...\nEtlError: boom", False)
    assert (streaks[runs[0].schedule_id].count, streaks[runs[0].schedule_id].run_id) == (4, runs[-1].pk)


def test_a_schedule_that_recovered_has_no_streak_and_an_old_streak_says_it_is_longer(make_schedule, make_run, now):
    recovered, _ = _failing(make_schedule, make_run, now, "recovered")
    make_run(recovered, S.SUCCEEDED, finished_at=now)
    never = make_schedule("never")
    make_run(never, S.FAILED, finished_at=now - STREAK_LOOKBACK - timedelta(hours=1))
    recent = make_run(never, S.FAILED, finished_at=now - timedelta(minutes=1))
    streaks = failing_streaks([recovered.pk, never.pk], now=now)
    assert recovered.pk not in streaks
    assert (streaks[never.pk].count, streaks[never.pk].since, streaks[never.pk].longer) == (
        1, recent.finished_at, True)


def test_the_overview_says_since_when_also_once_the_breaker_is_open(operator_client, make_schedule, make_run, now):
    schedule, runs = _failing(make_schedule, make_run, now)
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=4,
                                                   breaker_opened_at=now)
    page = operator_client.get(reverse("scheduler:overview") + "?team=all")
    [item] = [i for i in page.context["attention"] if i["title"] == "orders"]
    assert item["kind"] == "breaker" and item["streak"].count == 4 and item["streak"].run_id == runs[-1].pk
    html = page.content.decode()
    assert '4 consecutive failures · <span class="streak" data-count="4">failing since <time' in html
    assert "(4 in a row)" in html and "EtlError: source down 3" in html
    assert f'href="{reverse("scheduler:run_detail", args=[runs[-1].pk])}">#{runs[-1].pk}</a>' in html


def test_the_failures_list_counts_only_the_failures_since_the_last_success(operator_client, make_schedule, make_run,
                                                                           now):
    schedule = make_schedule("orders")
    for minutes in (300, 290, 280):  # three failures in the day, then a success
        make_run(schedule, S.FAILED, finished_at=now - timedelta(minutes=minutes))
    make_run(schedule, S.SUCCEEDED, finished_at=now - timedelta(minutes=200))
    make_run(schedule, S.FAILED, finished_at=now - timedelta(minutes=20))
    make_run(schedule, S.FAILED, finished_at=now - timedelta(minutes=10))
    [item] = worklist.failure_worklist(now)["open"]
    assert item["count"] == 2
    html = operator_client.get(reverse("scheduler:overview") + "?team=all").content.decode()
    assert "2 failures</span>" in html and "(2 in a row)" in html


def test_the_schedule_page_and_the_list_say_since_when(operator_client, make_schedule, make_run, now):
    schedule, runs = _failing(make_schedule, make_run, now)
    detail = operator_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert 'id="failing-since"' in detail and "(4 in a row)" in detail and "EtlError: source down 3" in detail
    listed = operator_client.get(reverse("scheduler:schedules") + "?team=all")
    [row] = [r for r in listed.context["rows"] if r["schedule"].pk == schedule.pk]
    assert row["streak"].count == 4 and "(4 in a row)" in listed.content.decode()


def test_repeated_blocked_runs_are_one_row_and_leave_the_failures_in_sight(operator_client, make_schedule, make_run,
                                                                          now):
    schedule, runs = _failing(make_schedule, make_run, now, failures=3)
    for i in range(37):
        make_run(schedule, S.BLOCKED, reason="circuit open", queued_at=now - timedelta(minutes=20) + timedelta(
            seconds=30 * i))
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk]))
    rows = page.context["recent_rows"]
    assert rows[0]["blocked"].count == 37 and rows[0]["blocked"].reason == "circuit open"
    assert [r["run"].pk for r in rows[1:4]] == [r.pk for r in reversed(runs)]
    html = page.content.decode()
    assert "blocked 37 times since" in html and html.count('class="folded-blocked"') == 1


def _statements(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries.captured_queries)


@pytest.mark.parametrize("page", ["overview", "schedules", "schedule", "runs"])
def test_the_statements_of_a_page_stay_flat_with_more_failing_schedules_and_runs(operator_client, make_schedule,
                                                                                  make_run, now, page):
    first, _ = _failing(make_schedule, make_run, now, "a0", failures=2)
    make_run(first, S.BLOCKED, reason="circuit open", queued_at=now - timedelta(minutes=1))
    make_run(first, S.RUNNING, started_at=now - timedelta(minutes=1))  # elapsed beside typical
    make_run(first, S.QUEUED)  # why it waits
    urls = {"overview": reverse("scheduler:overview") + "?team=all",
            "schedules": reverse("scheduler:schedules") + "?team=all",
            "schedule": reverse("scheduler:schedule_detail", args=[first.pk]),
            "runs": reverse("scheduler:runs") + "?team=all"}
    _statements(operator_client, urls[page])  # the first request warms per-process caches
    few = _statements(operator_client, urls[page])
    for i in range(1, 8):
        schedule, _ = _failing(make_schedule, make_run, now, f"a{i}", failures=6)
        Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_opened_at=now)
    for i in range(30):
        make_run(first, S.BLOCKED, reason="circuit open" if i % 2 else "upstream x failed",
                 queued_at=now - timedelta(seconds=i))
        make_run(first, S.FAILED, finished_at=now - timedelta(seconds=i))
        make_run(first, (S.QUEUED, S.WAITING, S.RUNNING)[i % 3], started_at=now - timedelta(seconds=i))
    assert _statements(operator_client, urls[page]) == few
