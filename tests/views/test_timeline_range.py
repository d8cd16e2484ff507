"""The timeline: the range select and the picture agree, 15 minutes is a range, and the page stays small whatever
the history (issue 23, point 6)."""
from __future__ import annotations

import re
from datetime import timedelta

from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from scheduler.models import Run, RunStatus, TriggerKind
from scheduler.services.history.hour_counts import runs_counted

URL = reverse("scheduler:timeline")


def _selected(page: str) -> str:
    select = page[page.index('name="range"'):]
    return re.search(r'<option value="([^"]+)" selected', select[:select.index("</select>")]).group(1)


def _drawn_seconds(page: str) -> float:
    return float(re.search(r'data-span-seconds="([\d.]+)"', page).group(1))


SECONDS = {"15m": 900, "1h": 3600, "3h": 3 * 3600, "6h": 6 * 3600, "12h": 12 * 3600, "24h": 86400, "48h": 2 * 86400}


def test_with_no_choice_the_select_shows_the_range_that_is_drawn(viewer_client, make_schedule, make_run):
    page = viewer_client.get(URL).content.decode()
    assert _selected(page) == "6h" and _drawn_seconds(page) == 6 * 3600  # ETL_TIMELINE_HOURS = 6


@override_settings(ETL_TIMELINE_HOURS=1)
def test_the_default_range_follows_the_setting_in_the_select_too(viewer_client, make_schedule, make_run):
    page = viewer_client.get(URL).content.decode()
    assert _selected(page) == "1h" and _drawn_seconds(page) == 3600


def test_every_range_drawn_is_the_one_selected_and_15_minutes_is_one(viewer_client, make_schedule, make_run):
    for value, seconds in SECONDS.items():
        page = viewer_client.get(URL, {"range": value}).content.decode()
        assert (_selected(page), _drawn_seconds(page)) == (value, seconds)
    assert "Last 15 minutes" in viewer_client.get(URL, {"range": "15m"}).content.decode()


def test_a_bad_range_is_named_and_the_select_shows_what_is_drawn_instead(viewer_client):
    page = viewer_client.get(URL, {"range": "1000h"}).content.decode()
    assert "range: Select a valid choice" in page
    assert _selected(page) == "6h" and _drawn_seconds(page) == 6 * 3600


def test_the_old_hours_parameter_still_works(viewer_client, make_schedule, make_run):
    page = viewer_client.get(URL, {"hours": "12"}).content.decode()
    assert (_selected(page), _drawn_seconds(page)) == ("12h", 12 * 3600)


def test_5000_runs_in_range_are_grouped_and_the_page_stays_under_100_kb(viewer_client, make_schedule):
    now = timezone.now()
    schedules = [make_schedule(f"feed-{i:02d}") for i in range(10)]
    runs = []
    for i in range(5000):
        schedule = schedules[i % 10]
        at = now - timedelta(seconds=4 * i + 30)
        runs.append(Run(schedule=schedule, status=RunStatus.FAILED if i % 97 == 0 else RunStatus.SUCCEEDED,
                        trigger_kind=TriggerKind.MANUAL, trigger_key=f"bulk{i}",
                        workload_class_id=schedule.workload_class_id, queued_at=at, started_at=at,
                        finished_at=at + timedelta(seconds=2)))
    runs_counted([run.pk for run in Run.objects.bulk_create(runs)])  # as if they had ended through finish.py
    response = viewer_client.get(URL, {"range": "6h"})
    page = response.content.decode()
    assert len(response.content) < 100_000
    assert "5,000 runs in this range" in page and "grouped" in page
    assert page.count('class="tl-run tl-group"') <= 400
    assert 'class="tl-bar t-failed"' in page  # a group with a failure shows it
    counts = [int(c) for c in re.findall(r'data-count="(\d+)"', page)]
    assert sum(counts) == 5000  # every run is in one group


def test_a_few_runs_are_still_drawn_one_by_one(viewer_client, make_schedule, make_run):
    at = timezone.now() - timedelta(minutes=5)
    run = make_run(make_schedule("orders"), queued_at=at, started_at=at, finished_at=at + timedelta(seconds=9))
    page = viewer_client.get(URL).content.decode()
    assert f'data-run="{run.pk}"' in page and "grouped" not in page


def _crowd(schedules, n, *, hours=48):
    now = timezone.now()
    span = hours * 3600 * 0.95  # inside the range the page computes a moment later
    runs = []
    for i in range(n):
        schedule = schedules[i % len(schedules)]
        at = now - timedelta(seconds=span * (i + 1) / (n + 1))
        runs.append(Run(schedule=schedule, status=RunStatus.FAILED if i % 97 == 0 else RunStatus.SUCCEEDED,
                        trigger_kind=TriggerKind.MANUAL, trigger_key=f"crowd{i}",
                        workload_class_id=schedule.workload_class_id, queued_at=at, started_at=at,
                        finished_at=at + timedelta(seconds=2)))
    runs_counted([run.pk for run in Run.objects.bulk_create(runs, batch_size=2000)])  # as finish.py counts them


def test_20000_runs_in_48_hours_are_counted_by_the_database_and_the_page_stays_under_100_kb(
        viewer_client, make_schedule, monkeypatch):
    from scheduler import timeline

    def refuse(**kwargs):
        raise AssertionError("a crowded range must not load its runs one by one")

    monkeypatch.setattr(timeline, "runs", refuse)
    schedules = [make_schedule(f"warehouse-feed-with-a-long-name-{i:03d}") for i in range(60)]
    _crowd(schedules, 20_000)
    response = viewer_client.get(URL, {"range": "48h"})
    page = response.content.decode()
    assert len(response.content) <= 100 * 1024, f"{len(response.content):,} bytes"
    # the select and the picture agree; grouped, the picture starts on the UTC hour the range begins in
    assert _selected(page) == "48h" and 48 * 3600 <= _drawn_seconds(page) < 49 * 3600
    assert re.search(r'data-start="[\d-]+T\d\d:00:00\+00:00"', page)
    assert "20,000 runs in this range" in page and "grouped" in page
    assert page.count('class="tl-run tl-group"') <= 200 + 40  # a row may split a slice at the range's end
    assert page.count('class="tl-row"') == 40
    assert 'class="tl-bar t-failed"' in page
    # the database put the runs in their time slices: a row spread over the 48 hours has many bars
    first_row = page[page.index('class="tl-row"'):page.index("</g>", page.index('class="tl-row"'))]
    assert len(set(re.findall(r'<rect class="tl-bar [^"]+" x="([\d.]+)"', first_row))) >= 4
    drawn = sum(int(c) for c in re.findall(r'data-count="(\d+)"', page))
    left_out = re.search(r'id="timeline-left-out">(\d+) more schedules\s+with ([\d,]+) runs', page)
    assert left_out and int(left_out.group(1)) == 20
    assert drawn + int(left_out.group(2).replace(",", "")) == 20_000  # every run is drawn or counted as left out


def test_the_largest_page_drawn_run_by_run_stays_under_100_kb(viewer_client, make_schedule):
    from scheduler.views.timeline_page import TIMELINE_MAX_BARS

    schedules = [make_schedule(f"warehouse-feed-with-a-long-name-{i:03d}") for i in range(40)]
    _crowd(schedules, TIMELINE_MAX_BARS)
    response = viewer_client.get(URL, {"range": "48h"})
    page = response.content.decode()
    assert "grouped" not in page and page.count('data-run="') == TIMELINE_MAX_BARS
    assert len(response.content) <= 100 * 1024, f"{len(response.content):,} bytes"
