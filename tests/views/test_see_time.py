"""Seeing time: the timeline, the schedules' status strips, durations on the runs list."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from scheduler.models import RunStatus
from scheduler.views import timeline_charts

URL = reverse("scheduler:timeline")


def test_the_timeline_draws_a_row_per_schedule_with_queue_wait_and_execution(viewer_client, make_schedule, make_run):
    now = timezone.now()
    orders, customers = make_schedule("orders"), make_schedule("customers")
    waited = make_run(orders, RunStatus.SUCCEEDED, queued_at=now - timedelta(minutes=30),
                      started_at=now - timedelta(minutes=20), finished_at=now - timedelta(minutes=10))
    running = make_run(customers, RunStatus.RUNNING, queued_at=now - timedelta(minutes=5),
                       started_at=now - timedelta(minutes=4))
    make_run(orders, RunStatus.SUCCEEDED, queued_at=now - timedelta(hours=30), started_at=now - timedelta(hours=30),
             finished_at=now - timedelta(hours=29))  # long before the window
    response = viewer_client.get(URL)
    chart = response.context["chart"]
    assert [row.label for row in chart.rows] == ["customers", "orders"]
    bars = {b.run_id: b for row in chart.rows for b in row.bars}
    assert set(bars) == {waited.pk, running.pk}
    assert bars[waited.pk].wait_w > 0 and bars[waited.pk].w > 0 and bars[waited.pk].status == "succeeded"
    assert "waited 600.0 s, ran 600.0 s" in bars[waited.pk].title
    assert abs(bars[running.pk].x + bars[running.pk].w - chart.now_x) < 1  # a running run reaches now
    page = response.content.decode()
    assert f'data-run="{waited.pk}"' in page and 'class="tl-wait"' in page
    assert reverse("scheduler:run_detail", args=[waited.pk]) in page


def test_the_timeline_period_is_chosen_and_a_bad_one_is_named(viewer_client, make_schedule, make_run):
    now = timezone.now()
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=now - timedelta(hours=10),
                   started_at=now - timedelta(hours=10), finished_at=now - timedelta(hours=9))
    assert viewer_client.get(URL).context["chart"].rows == []
    wide = viewer_client.get(URL, {"range": "12h"})
    assert [b.run_id for row in wide.context["chart"].rows for b in row.bars] == [run.pk]
    bad = viewer_client.get(URL, {"range": "1000h"})
    assert bad.status_code == 200 and "range: Select a valid choice" in bad.content.decode()
    assert bad.context["seconds"] == 6 * 3600


def test_a_run_that_never_started_is_a_thin_mark(now):
    from types import SimpleNamespace

    schedule = SimpleNamespace(name="orders")
    blocked = SimpleNamespace(pk=1, schedule_id=1, schedule=schedule, status="BLOCKED", queued_at=now,
                              started_at=None, finished_at=now)
    chart = timeline_charts.timeline_chart([blocked], start=now - timedelta(hours=1), end=now + timedelta(hours=1))
    bar = chart.rows[0].bars[0]
    assert bar.w == 2.0 and bar.wait_w == 0 and "never started" in bar.title
    assert len(chart.ticks) >= 4


def test_the_schedules_list_shows_a_status_strip_last_success_and_typical_duration(
    viewer_client, make_schedule, make_run
):
    now = timezone.now()
    orders = make_schedule("orders")
    for seconds, status in [(10, RunStatus.SUCCEEDED), (30, RunStatus.SUCCEEDED), (5, RunStatus.FAILED),
                            (20, RunStatus.SUCCEEDED)]:
        make_run(orders, status, started_at=now - timedelta(seconds=seconds + 60),
                 finished_at=now - timedelta(seconds=60))
    make_schedule("idle")
    response = viewer_client.get(reverse("scheduler:schedules"))
    rows = {row["schedule"].name: row for row in response.context["rows"]}
    assert [r.status for r in rows["orders"]["strip"]] == ["SUCCEEDED", "SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert rows["orders"]["typical_seconds"] == 20
    assert rows["orders"]["last_success"].pk == rows["orders"]["strip"][-1].pk
    assert rows["idle"]["strip"] == [] and rows["idle"]["last_success"] is None
    page = response.content.decode()
    assert 'class="tick t-failed"' in page and "none recent" in page


def test_the_strips_are_two_queries_for_all_schedules(viewer_client, make_schedule, make_run,
                                                      django_assert_max_num_queries):
    """Where each schedule's strip starts, then the runs from there: two queries however many schedules."""
    from scheduler import selectors

    schedules = [make_schedule(f"s{i}") for i in range(5)]
    for s in schedules:
        for _ in range(25):
            make_run(s, RunStatus.SUCCEEDED)
    with django_assert_max_num_queries(2):
        strips = selectors.recent_runs_by_schedule([s.pk for s in schedules])
    assert {len(v) for v in strips.values()} == {selectors.STRIP_LENGTH}


def test_the_runs_list_shows_start_end_and_duration(viewer_client, make_schedule, make_run):
    now = timezone.now()
    make_run(make_schedule("orders"), RunStatus.SUCCEEDED, started_at=now - timedelta(seconds=125),
             finished_at=now - timedelta(seconds=5))
    page = viewer_client.get(reverse("scheduler:runs")).content.decode()
    assert '<th class="moment">Started</th><th class="moment">Finished</th><th>Duration</th>' in page
    assert "2 min 0 s" in page
