"""The timeline under load (issue 37 point 1): a crowded 15 minutes is grouped by the minute, backfill windows can
be hidden, 7 days is a range, and every group's link opens the runs of its slice, which the runs list applies."""
from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.middleware import SESSION_KEY
from scheduler.models import Run, RunStatus, TriggerKind
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.history.hour_counts import runs_counted

URL = reverse("scheduler:timeline")
WM = {"type": "integer", "column": "id", "initial": 0}


def _crowd(schedule, n, *, seconds, key, backfill=None, failed_every=0):
    """n final runs of `schedule` spread over the last `seconds`, counted as finish.py counts them."""
    now = timezone.now()
    runs = []
    for i in range(n):
        at = now - timedelta(seconds=seconds * 0.95 * (i + 1) / (n + 1))
        status = RunStatus.FAILED if failed_every and i % failed_every == 0 else RunStatus.SUCCEEDED
        runs.append(Run(schedule=schedule, status=status, trigger_kind=TriggerKind.BACKFILL if backfill else
                        TriggerKind.MANUAL, trigger_key=f"{key}{i}", workload_class_id=schedule.workload_class_id,
                        queued_at=at, started_at=at, finished_at=at + timedelta(seconds=1), backfill=backfill))
    runs_counted([run.pk for run in Run.objects.bulk_create(runs, batch_size=2000)])


@pytest.fixture
def backfilled(make_schedule):
    """A schedule whose backfill ran 400 windows in the last 15 minutes, beside a live schedule's 30 runs."""
    replay = make_schedule("replay", watermark_config=WM)
    backfill = backfill_submit(schedule=replay, start="0", end="20", window="10", reason="r", requested_by="tests")
    _crowd(replay, 400, seconds=900, key="bf", backfill=backfill)
    live = make_schedule("live")
    _crowd(live, 30, seconds=900, key="live", failed_every=10)
    return replay, live


def _bars(page: str, schedule: str) -> list[tuple[str, int]]:
    start = page.index(f'data-schedule="{schedule}"')
    row = page[start:page.index("</g>", start)]
    return [(html.unescape(href), int(n)) for href, n in
            re.findall(r'<a href="([^"]+)" class="tl-run tl-group" data-count="(\d+)"', row)]


def test_a_crowded_15_minutes_is_grouped_by_the_minute_not_one_bar_per_schedule(viewer_client, backfilled):
    page = viewer_client.get(URL, {"range": "15m"}).content.decode()
    assert "430 runs in this range" in page
    assert re.search(r'id="timeline-slice">1 minute<', page)
    assert 'id="timeline-hours"' not in page  # not counted by the whole UTC hour
    bars = _bars(page, "replay")
    assert len(bars) >= 14 and sum(n for _, n in bars) == 400  # a bar a minute, every run in one
    # the live schedule's 30 runs would not overlap on screen: each is its own bar, linking to its run
    start = page.index('data-schedule="live"')
    live = page[start:page.index("</g>", start)]
    assert not _bars(page, "live") and live.count('data-run="') == 30
    assert 'id="timeline-one-by-one">1 schedule with few runs' in page


def test_a_group_link_opens_exactly_the_runs_of_its_slice(viewer_client, backfilled):
    page = viewer_client.get(URL, {"range": "15m"}).content.decode()
    href, n = _bars(page, "replay")[3]
    query = parse_qs(urlsplit(href).query)
    assert urlsplit(href).path == reverse("scheduler:runs")
    assert set(query) == {"schedule", "status", "from", "to", "team"} and query["schedule"] == ["replay"]
    low, high = (timezone.datetime.fromisoformat(query[k][0]) for k in ("from", "to"))
    assert high - low == timedelta(minutes=1)
    expected = set(Run.objects.filter(schedule__name="replay", status=query["status"][0], started_at__gte=low,
                                      started_at__lt=high).values_list("pk", flat=True))
    response = viewer_client.get(href)
    assert response.status_code == 200 and not response.context["form"].errors
    assert {r.pk for r in response.context["page"]["runs"]} == expected and len(expected) == n


def test_hiding_backfill_windows_leaves_the_live_runs(viewer_client, backfilled):
    replay, live = backfilled
    response = viewer_client.get(URL, {"range": "15m", "hide_backfills": "on"})
    page = response.content.decode()
    assert 'id="id_hide_backfills" checked' in page and 'id="timeline-no-backfills"' in page
    assert [row.label for row in response.context["chart"].rows] == ["live"]
    assert page.count('data-run="') == 30 and "grouped" not in page  # 30 runs: drawn one by one again


def test_hiding_backfill_windows_in_a_long_range_takes_their_runs_off_the_hour_counts(viewer_client, backfilled,
                                                                                      make_schedule):
    busy = make_schedule("busy")
    _crowd(busy, 300, seconds=6 * 3600, key="busy")
    response = viewer_client.get(URL, {"range": "6h", "hide_backfills": "on"})
    page = response.content.decode()
    assert "330 runs in this range" in page and 'id="timeline-hours"' in page
    assert {row.label for row in response.context["chart"].rows} == {"busy", "live"}
    href, _ = _bars(page, "busy")[0]
    assert parse_qs(urlsplit(href).query)["hide_backfills"] == ["on"]


def test_seven_days_is_a_range(viewer_client, backfilled):
    page = viewer_client.get(URL, {"range": "7d"}).content.decode()
    assert "Last 7 days" in page and 'id="range-error"' not in page
    assert re.search(r'<option value="7d" selected>7 days</option>', page)
    assert 7 * 86400 <= float(re.search(r'data-span-seconds="([\d.]+)"', page).group(1)) < 7 * 86400 + 3600


@pytest.mark.parametrize(("query", "field", "message"), [
    ({"from": "yesterday"}, "from", "from: 'yesterday' is not a date and time"),
    ({"to": "2026-13-01T00:00:00Z"}, "to", "to: '2026-13-01T00:00:00Z' is not a date and time"),
    ({"from": "2026-12-05T03:00:00Z", "to": "2026-12-05T02:00:00Z"}, "to", "to: must be after from"),
])
def test_a_bad_time_bound_on_the_runs_list_names_its_field(viewer_client, backfilled, query, field, message):
    response = viewer_client.get(reverse("scheduler:runs"), query)
    assert response.status_code == 200
    assert message in response.context["form"].errors[field][0]
    assert message in html.unescape(response.content.decode())
    assert field not in response.context["form"].filters()  # the bad bound filters nothing


def test_a_bound_without_an_offset_is_read_in_the_viewers_zone(viewer_client, make_schedule, make_run):
    session = viewer_client.session
    session[SESSION_KEY] = "Europe/Berlin"
    session.save()
    schedule = make_schedule("orders")
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    inside = make_run(schedule, queued_at=at, started_at=at, finished_at=at + timedelta(seconds=5))
    make_run(schedule, queued_at=at - timedelta(hours=1), started_at=at - timedelta(hours=1),
             finished_at=at - timedelta(hours=1))
    local = timezone.localtime(at, ZoneInfo("Europe/Berlin")).replace(tzinfo=None)  # Berlin's wall clock
    response = viewer_client.get(reverse("scheduler:runs"), {"from": (local - timedelta(seconds=1)).isoformat(),
                                                              "to": (local + timedelta(seconds=1)).isoformat()})
    assert [r.pk for r in response.context["page"]["runs"]] == [inside.pk]
    # a bound in UTC is shown back on Berlin's wall clock, to the second, and reads back as the same moment
    response = viewer_client.get(reverse("scheduler:runs"), {"from": "2026-12-05T02:10:49Z"})
    page = response.content.decode()
    assert 'value="2026-12-05 03:10:49"' in page and "Started from (CET)" in page
