"""One way to write time (issue 37 point 11): every time a person reads is in the viewer's zone, to the second,
with its zone named, in one format, `2026-12-05 03:10:49 CET`: the run page's window, the audit's values, the
admin's lists and pages, the next fires of a 30-second interval."""
from __future__ import annotations

import html
import re
from datetime import datetime, timezone

import pytest
from django.urls import reverse

from scheduler.middleware import SESSION_KEY
from scheduler.models import AuditEntry, RunStatus

RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")  # a stored time printed as it is stored
ONE_FORMAT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def _text(response) -> str:
    """What a person reads: the page without its tags (and so without the machine-readable attributes)."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


def _in_berlin(client):
    session = client.session
    session[SESSION_KEY] = "Europe/Berlin"
    session.save()
    return client


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return _in_berlin(client)


def test_the_run_page_window_is_in_the_viewers_zone(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, window_low="2026-11-30T23:00:00+00:00",
                   window_high="2026-12-01T23:00:00+00:00")
    text = _text(_in_berlin(viewer_client).get(reverse("scheduler:run_detail", args=[run.pk])))
    assert "[2026-12-01 00:00:00 CET, 2026-12-02 00:00:00 CET)" in text
    assert "+00:00" not in text


def test_an_integer_window_is_left_as_it_is(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, window_low="100", window_high="250")
    assert "(100, 250]" in _text(viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])))


def test_the_audit_prints_times_in_the_viewers_zone_not_as_stored(viewer_client, make_schedule):
    schedule = make_schedule("orders")
    AuditEntry.objects.create(actor="ops", action="watermark.set", target_type="schedule",
                              target_id=str(schedule.pk), before={"value": "2026-12-05T02:10:49.976248+00:00"},
                              after={"value": "2026-12-04T02:10:49+00:00"}, reason="replay",
                              at=datetime(2026, 12, 5, 2, 11, tzinfo=timezone.utc))
    text = _text(_in_berlin(viewer_client).get(reverse("scheduler:audit"), {"action": "watermark.set"}))
    assert "2026-12-05 03:10:49 CET" in text and "2026-12-04 03:10:49 CET" in text
    assert "2026-12-05 03:11:00 CET" in text  # the entry's own time, the same way
    assert not RAW_ISO.search(text), RAW_ISO.search(text)


def test_the_admin_lists_and_pages_write_times_the_same_way(admin_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED,
                   queued_at=datetime(2026, 12, 7, 4, 0, 5, tzinfo=timezone.utc),
                   finished_at=datetime(2026, 12, 7, 4, 0, 35, tzinfo=timezone.utc))
    listed = _text(admin_client.get(reverse("admin:scheduler_run_changelist")))
    assert "2026-12-07 05:00:05 CET" in listed and "2026-12-07 05:00:35 CET" in listed
    assert "a.m." not in listed and "Dec." not in listed
    shown = _text(admin_client.get(reverse("admin:scheduler_run_change", args=[run.pk])))
    assert "2026-12-07 05:00:05 CET" in shown and "a.m." not in shown


def test_the_next_fires_of_a_30_second_interval_differ_to_the_second(viewer_client, make_schedule):
    schedule = make_schedule("pulse", trigger_kind="interval", trigger_config={"seconds": 30},
                             timezone="Europe/Berlin")
    for url in (reverse("scheduler:schedules"), reverse("scheduler:schedule_detail", args=[schedule.pk])):
        page = _in_berlin(viewer_client).get(url).content.decode()
        fires = re.findall(rf'<time datetime="[^"]+" title="[^"]+">({ONE_FORMAT} CET)</time>', page)
        assert len(fires) >= 2, url
        first, second = (datetime.strptime(f[:19], "%Y-%m-%d %H:%M:%S") for f in fires[:2])
        assert (second - first).total_seconds() == 30, (url, fires)
