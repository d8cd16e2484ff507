"""Moving a watermark: a confirmation step that previews the next window, a required reason, times in the
viewer's zone to the second (issue 23, point 8)."""
from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, WatermarkHistory, WatermarkState

NOW = datetime(2026, 12, 4, 12, 0, 0, 123456, tzinfo=timezone.utc)
DAY = {"type": "datetime", "column": "ts", "initial": "2026-11-01T00:00:00+00:00", "max_window": 86400, "lag": 0}


@pytest.fixture
def dated(make_schedule):
    return make_schedule("dated", watermark_config=DAY)


@pytest.fixture
def berlin(operator_client):
    """The viewer chose Europe/Berlin (CET, UTC+1 in December) in their preferences."""
    operator_client.post(reverse("scheduler:preferences"), {"timezone": "Europe/Berlin"})
    return operator_client


def _text(response) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())))


def test_a_move_asks_for_confirmation_first_and_changes_nothing_until_then(berlin, dated):
    url = reverse("scheduler:schedule_watermark", args=[dated.pk])
    response = berlin.post(url, {"value": "2026-12-01T09:30:15", "op": "set", "reason": "skip the bad day"})
    assert response.status_code == 200 and 'id="watermark-confirm"' in response.content.decode()
    assert not WatermarkState.objects.filter(schedule=dated).exclude(value="").exists()
    assert not WatermarkHistory.objects.filter(schedule=dated).exists()
    text = _text(response)
    # typed in the viewer's zone (CET): 09:30:15 CET is 08:30:15 UTC
    assert "2026-12-01 09:30:15 CET" in text and "skip the bad day" in text
    # the next window it causes: from the new mark for one day (max_window), in the viewer's zone
    assert "2026-12-01 09:30:15 CET to 2026-12-02 09:30:15 CET" in text
    response = berlin.post(url, {"value": "2026-12-01T09:30:15", "op": "set", "reason": "skip the bad day",
                                 "confirm": "1"})
    assert response.status_code == 302
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-01T08:30:15+00:00"
    assert AuditEntry.objects.filter(action="watermark.set", reason="skip the bad day").exists()


def test_a_reset_is_confirmed_too_and_previews_the_window_from_the_initial_value(berlin, dated):
    url = reverse("scheduler:schedule_watermark", args=[dated.pk])
    WatermarkState.objects.create(schedule=dated, value="2026-12-03T00:00:00+00:00")
    response = berlin.post(url, {"value": "", "op": "reset", "reason": "reload"})
    assert response.status_code == 200 and "2026-11-01 01:00:00 CET to 2026-11-02 01:00:00 CET" in _text(response)
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-03T00:00:00+00:00"


def test_the_reason_is_required_and_named_before_any_confirmation(berlin, dated):
    response = berlin.post(reverse("scheduler:schedule_watermark", args=[dated.pk]),
                           {"value": "2026-12-01T09:30:15", "op": "set", "reason": " "})
    assert response.status_code == 400 and "reason: This field is required." in _text(response)
    assert 'id="watermark-confirm"' not in response.content.decode()


def test_a_bad_value_is_named_before_any_confirmation(berlin, dated):
    response = berlin.post(reverse("scheduler:schedule_watermark", args=[dated.pk]),
                           {"value": "yesterday", "op": "set", "reason": "x"})
    assert response.status_code == 400 and "value: " in _text(response) and "not an ISO 8601" in _text(response)


def test_the_schedule_page_shows_the_mark_and_its_history_in_the_viewers_zone_to_the_second(berlin, dated):
    WatermarkState.objects.create(schedule=dated, value=NOW.isoformat())
    WatermarkHistory.objects.create(schedule=dated, kind="set", old_value="2026-12-01T00:00:00.5+00:00",
                                    new_value=NOW.isoformat(), actor="olivia", reason="x", at=NOW)
    text = _text(berlin.get(reverse("scheduler:schedule_detail", args=[dated.pk])))
    assert "2026-12-04 13:00:00 CET" in text and "2026-12-01 01:00:00 CET" in text
    assert "123456" not in text and "12:00:00.123456+00:00" not in text


def test_the_confirmation_of_a_mark_in_the_future_still_needs_force(berlin, dated):
    future = (datetime.now(timezone.utc) + timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%S")
    response = berlin.post(reverse("scheduler:schedule_watermark", args=[dated.pk]),
                           {"value": future, "op": "set", "reason": "x"})
    assert response.status_code == 400 and "is in the future" in _text(response)
