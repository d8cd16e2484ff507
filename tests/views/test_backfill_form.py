"""The backfill form of a schedule: dates and times in the schedule's zone, a live preview with an ETA, the order
option, a visible action on the schedule page (issue 23, point 7)."""
from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse

from scheduler.models import Backfill, BackfillWindow, RunStatus
from scheduler.services.admission.backfills import backfill_pump

DAILY = {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00"}
IDS = {"type": "integer", "column": "id", "initial": 0}


@pytest.fixture
def berlin(make_schedule):
    return make_schedule("orders", watermark_config=DAILY, timezone="Europe/Berlin")


def _form(**overrides):
    return {"from_date": "2026-11-01", "from_time": "00:00", "to_date": "2026-12-02", "to_time": "00:00",
            "window_count": "1", "window_unit": "days", "max_parallel": "1", "order": "oldest",
            "reason": "replay November", **overrides}


def _text(response) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())))


def test_the_form_takes_dates_and_times_in_the_schedules_zone(operator_client, berlin):
    page = operator_client.get(reverse("scheduler:schedule_backfill", args=[berlin.pk])).content.decode()
    assert 'type="date"' in page and 'type="time"' in page and "Europe/Berlin" in page
    assert 'name="order"' in page and 'hx-get="' in page


def test_a_submitted_range_is_read_in_the_schedules_zone(operator_client, berlin):
    response = operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[berlin.pk]), _form())
    backfill = Backfill.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:backfill_detail",
                                                                            args=[backfill.pk])
    # midnight in Berlin (CET, UTC+1) is 23:00 UTC the day before
    assert (backfill.range_from, backfill.range_to) == ("2026-10-31T23:00:00+00:00", "2026-12-01T23:00:00+00:00")
    assert backfill.window_size == "86400" and backfill.total_windows == 31 and not backfill.newest_first


def test_the_preview_counts_the_windows_and_estimates_from_recent_runs(operator_client, berlin, make_run):
    t = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    for i in range(3):  # runs of one-day windows: 20 s each
        day = datetime(2026, 10, 1 + i, tzinfo=timezone.utc)
        make_run(berlin, RunStatus.SUCCEEDED, started_at=t + timedelta(hours=i),
                 finished_at=t + timedelta(hours=i, seconds=20), window_low=day.isoformat(),
                 window_high=(day + timedelta(days=1)).isoformat())
    for i in range(5):  # later runs of 5-minute windows (the live schedule) took 400 s: not a day's run time
        low = t + timedelta(hours=5, minutes=5 * i)
        make_run(berlin, RunStatus.SUCCEEDED, started_at=low, finished_at=low + timedelta(seconds=400),
                 window_low=low.isoformat(), window_high=(low + timedelta(minutes=5)).isoformat())
    url = reverse("scheduler:schedule_backfill_preview", args=[berlin.pk])
    text = _text(operator_client.get(url, _form(), HTTP_HX_REQUEST="true"))
    # 31 x 20 s, one at a time: only the runs of one-day windows count
    assert "31 windows of 1 day, about 10 min at the recent run time of windows of 1 day" in text
    text = _text(operator_client.get(url, _form(max_parallel="4"), HTTP_HX_REQUEST="true"))
    assert "31 windows of 1 day, about 3 min at the recent run time" in text  # 8 rounds of 20 s
    assert not Backfill.objects.exists()


def test_the_preview_without_history_says_it_cannot_estimate(operator_client, berlin):
    url = reverse("scheduler:schedule_backfill_preview", args=[berlin.pk])
    text = _text(operator_client.get(url, _form(window_count="6", window_unit="hours"), HTTP_HX_REQUEST="true"))
    assert "124 windows of 6 hours" in text and "no recent run of a window of 6 hours to estimate from" in text


def test_the_preview_names_a_bad_field(operator_client, berlin):
    url = reverse("scheduler:schedule_backfill_preview", args=[berlin.pk])
    text = _text(operator_client.get(url, _form(to_date="2026-10-01"), HTTP_HX_REQUEST="true"))
    assert "to: must be after from" in text


@pytest.mark.parametrize("overrides, field", [
    ({"to_date": "2026-10-01"}, "to"),
    ({"from_date": "11/01/2026"}, "from_date"),
    ({"window_count": "0"}, "window_count"),
    ({"window_unit": "fortnights"}, "window_unit"),
    ({"reason": ""}, "reason"),
    ({"order": "random"}, "order"),
    ({"max_parallel": "0"}, "max_parallel"),
])
def test_bad_input_names_the_field_and_creates_nothing(operator_client, berlin, overrides, field):
    submit = reverse("scheduler:schedule_backfill_submit", args=[berlin.pk])
    response = operator_client.post(submit, _form(**overrides))
    assert response.status_code == 400 and f"{field}: " in _text(response)
    assert not Backfill.objects.exists()


def test_newest_first_queues_the_latest_window_first(operator_client, berlin):
    operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[berlin.pk]), _form(order="newest"))
    backfill = Backfill.objects.get()
    assert backfill.newest_first
    backfill_pump(now=datetime(2026, 12, 4, tzinfo=timezone.utc))
    queued = BackfillWindow.objects.get(backfill=backfill, status="QUEUED")
    last = BackfillWindow.objects.filter(backfill=backfill).order_by("-seq").first()
    assert queued.pk == last.pk and queued.high == "2026-12-01T23:00:00+00:00"  # the last window of the range


def test_an_integer_mark_takes_numbers(operator_client, make_schedule):
    schedule = make_schedule("ids", watermark_config=IDS)
    url = reverse("scheduler:schedule_backfill", args=[schedule.pk])
    assert 'name="from_value"' in operator_client.get(url).content.decode()
    response = operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[schedule.pk]),
                                    {"from_value": "0", "to_value": "40", "window_size": "10",
                                          "max_parallel": "1", "order": "oldest", "reason": "reload"})
    assert response.status_code == 302 and Backfill.objects.get().total_windows == 4


def test_the_schedule_page_offers_a_visible_backfill_action_to_those_who_may(operator_client, viewer, berlin):
    from django.test import Client

    url = reverse("scheduler:schedule_detail", args=[berlin.pk])
    form_url = reverse("scheduler:schedule_backfill", args=[berlin.pk])
    assert f'href="{form_url}"' in operator_client.get(url).content.decode()
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert f'href="{form_url}"' not in viewer_client.get(url).content.decode()
    page = viewer_client.get(form_url)
    assert page.status_code == 200 and "but not submit one" in _text(page) and 'id="submit-backfill"' not in _text(page)
    submit = reverse("scheduler:schedule_backfill_submit", args=[berlin.pk])
    assert viewer_client.post(submit, _form()).status_code == 403 and not Backfill.objects.exists()


def test_a_schedule_without_a_watermark_says_it_cannot_be_backfilled(operator_client, make_schedule):
    schedule = make_schedule("plain")
    response = operator_client.get(reverse("scheduler:schedule_backfill", args=[schedule.pk]))
    assert response.status_code == 200 and "has no watermark" in _text(response)


def _day_window(day: int) -> tuple[str, str]:
    """The n-th day window (0-based) of _form()'s November, in UTC text (midnight Berlin is 23:00 UTC)."""
    low = datetime(2026, 10, 31, 23, tzinfo=timezone.utc) + timedelta(days=day)
    return low.isoformat(), (low + timedelta(days=1)).isoformat()


def _succeed_days(make_run, schedule, days):
    for day in days:
        low, high = _day_window(day)
        make_run(schedule, RunStatus.SUCCEEDED, window_low=low, window_high=high)


def test_the_form_offers_reprocess_all_or_failed_only(operator_client, berlin):
    page = operator_client.get(reverse("scheduler:schedule_backfill", args=[berlin.pk])).content.decode()
    assert 'name="reprocess"' in page and 'value="all"' in page and 'value="failed"' in page


def test_the_preview_counts_only_the_failed_and_missing_windows(operator_client, berlin, make_run):
    _succeed_days(make_run, berlin, range(19))
    url = reverse("scheduler:schedule_backfill_preview", args=[berlin.pk])
    text = _text(operator_client.get(url, _form(reprocess="failed"), HTTP_HX_REQUEST="true"))
    assert "12 of 31 windows of 1 day: 19 already succeeded" in text
    text = _text(operator_client.get(url, _form(reprocess="all"), HTTP_HX_REQUEST="true"))
    assert "31 windows of 1 day" in text and "already succeeded" not in text


def test_the_preview_says_when_every_window_already_succeeded(operator_client, berlin, make_run):
    _succeed_days(make_run, berlin, range(31))
    url = reverse("scheduler:schedule_backfill_preview", args=[berlin.pk])
    text = _text(operator_client.get(url, _form(reprocess="failed"), HTTP_HX_REQUEST="true"))
    assert "reprocess: all 31 windows already succeeded" in text


def test_submitting_failed_only_creates_the_failed_and_missing_windows(operator_client, berlin, make_run):
    _succeed_days(make_run, berlin, [0, 2])
    response = operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[berlin.pk]),
                                    _form(reprocess="failed"))
    backfill = Backfill.objects.get()
    assert response.status_code == 302 and backfill.total_windows == 29
    lows = set(BackfillWindow.objects.filter(backfill=backfill).values_list("low", flat=True))
    assert _day_window(0)[0] not in lows and _day_window(1)[0] in lows and _day_window(2)[0] not in lows


@pytest.mark.parametrize("value", ["some", "FAILED "])
def test_a_bad_reprocess_value_names_the_field(operator_client, berlin, value):
    response = operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[berlin.pk]),
                                    _form(reprocess=value))
    assert response.status_code == 400 and "reprocess: " in _text(response)
    assert not Backfill.objects.exists()


def test_every_window_already_succeeded_is_refused_under_reprocess(operator_client, berlin, make_run):
    _succeed_days(make_run, berlin, range(31))
    response = operator_client.post(reverse("scheduler:schedule_backfill_submit", args=[berlin.pk]),
                                    _form(reprocess="failed"))
    assert response.status_code == 400 and "reprocess: all 31 windows already succeeded" in _text(response)
    assert not Backfill.objects.exists()
