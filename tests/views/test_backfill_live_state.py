"""The backfill page tells one live state (issue 37 point 2): the windows table reloads with the summary and the
grid, a completed backfill with a failed window says so in the failure colour, and windows read in the viewer's
zone with their size in words."""
from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from scheduler.middleware import SESSION_KEY
from scheduler.models import Backfill, BackfillStatus, BackfillWindow, WindowStatus
from scheduler.services.admission.backfills import backfill_submit

DAILY = {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00"}


@pytest.fixture
def backfill(make_schedule) -> Backfill:
    schedule = make_schedule("orders", watermark_config=DAILY, timezone="Europe/Berlin")
    # seven Berlin days: midnight CET is 23:00 UTC the day before
    return backfill_submit(schedule=schedule, start="2026-10-31T23:00:00+00:00", end="2026-11-07T23:00:00+00:00",
                           window="86400", reason="replay a week", requested_by="tests")


def _berlin(client):
    session = client.session
    session[SESSION_KEY] = "Europe/Berlin"
    session.save()
    return client


def _text(response) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


def _finish(backfill, failed_seq: int) -> None:
    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.SUCCEEDED, attempts=1)
    BackfillWindow.objects.filter(backfill=backfill, seq=failed_seq).update(status=WindowStatus.FAILED, attempts=3)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)


def test_the_windows_table_reloads_with_the_summary(viewer_client, backfill):
    url = reverse("scheduler:backfill_detail", args=[backfill.pk])
    page = viewer_client.get(url).content.decode()
    table = page[page.index('id="windows"') - 30:]
    assert 'hx-trigger="backfill-changed from:body"' in table[:400] and "part=windows" in table[:400]
    _finish(backfill, failed_seq=3)
    seen = viewer_client.get(url, {"part": "summary"}, HTTP_HX_REQUEST="true")
    assert "backfill-changed" in seen.get("HX-Trigger", "")  # the summary says the windows changed ...
    rows = viewer_client.get(url, {"part": "windows", "from": "0"}, HTTP_HX_REQUEST="true")  # ... and they reload
    body = rows.content.decode()
    assert rows.status_code == 200 and 'id="windows"' in body and 'id="backfill-grid"' not in body
    statuses = re.findall(r'data-window="(\d+)">.*?class="status s-(\w+)"', body, re.S)
    assert statuses == [(str(i), "failed" if i == 3 else "succeeded") for i in range(7)]
    assert "Pending" not in _text(rows)


def test_a_completed_backfill_with_a_failed_window_reads_as_a_failure(viewer_client, backfill):
    _finish(backfill, failed_seq=3)
    detail = viewer_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk]))
    pill = re.search(r'<span class="status s-(\w+)" id="backfill-status"[^>]*>([^<]+)</span>', detail.content.decode())
    assert pill.groups() == ("failed", "Completed with 1 failed window")
    listed = viewer_client.get(reverse("scheduler:backfills")).content.decode()
    assert re.search(r'class="status s-failed" data-status="COMPLETED">Completed with 1 failed window<', listed)


def test_a_clean_completed_backfill_stays_a_success(viewer_client, backfill):
    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.SUCCEEDED)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    page = viewer_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk])).content.decode()
    assert re.search(r'class="status s-completed" id="backfill-status"[^>]*>Completed<', page)


def test_windows_read_in_the_viewers_zone_with_the_size_in_words(viewer_client, backfill):
    text = _text(_berlin(viewer_client).get(reverse("scheduler:backfill_detail", args=[backfill.pk])))
    assert "[2026-11-01 00:00:00 CET, 2026-11-08 00:00:00 CET) in windows of 1 day" in text
    assert "[2026-11-03 00:00:00 CET, 2026-11-04 00:00:00 CET)" in text  # a row of the table
    assert "+00:00" not in text and "86400" not in text
    listed = _text(viewer_client.get(reverse("scheduler:backfills")))
    assert "[2026-11-01 00:00:00 CET, 2026-11-08 00:00:00 CET) by 1 day" in listed


def test_a_viewer_in_utc_reads_the_same_windows_in_utc(viewer_client, backfill):
    text = _text(viewer_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk])))
    assert "[2026-10-31 23:00:00 UTC, 2026-11-07 23:00:00 UTC) in windows of 1 day" in text
