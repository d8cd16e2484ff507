"""Times are right: UTC means UTC whatever TIME_ZONE says, each viewer picks their zone, relative next to absolute."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.template import Context, Template
from django.utils import timezone

from scheduler.middleware import SESSION_KEY
from scheduler.models import RunStatus
from scheduler.templatetags.scheduler_tags import ago

pytestmark = pytest.mark.django_db
LATE = datetime(2026, 3, 1, 23, 0, 5, tzinfo=dt_timezone.utc)


def _text(response) -> str:
    return response.content.decode().replace("\xa0", " ")


def test_a_run_queued_at_23_utc_is_not_shown_as_midnight_utc_under_a_berlin_time_zone(
    settings, operator_client, make_schedule, make_run
):
    settings.TIME_ZONE = "Europe/Berlin"
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=LATE)
    html = _text(operator_client.get(f"/runs/{run.pk}/"))
    assert "2026-03-02 00:00:05 CET" in html
    assert '<time datetime="2026-03-01T23:00:05Z" title="2026-03-01 23:00:05 UTC">' in html
    assert "00:00:05 UTC" not in html


def test_a_viewer_picks_their_display_zone_and_only_their_pages_change(
    client, operator, viewer, make_schedule, make_run
):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=LATE)
    client.force_login(operator)
    response = client.post("/preferences/", {"timezone": "America/New_York", "next": f"/runs/{run.pk}/"})
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert client.session[SESSION_KEY] == "America/New_York"
    html = _text(client.get(f"/runs/{run.pk}/"))
    assert "2026-03-01 18:00:05 EST" in html
    assert "America/New_York" in html  # the header says which zone the page is in

    other = type(client)()
    other.force_login(viewer)
    assert "2026-03-01 23:00:05 UTC" in _text(other.get(f"/runs/{run.pk}/"))

    client.post("/preferences/", {"reset": "1"})
    assert SESSION_KEY not in client.session
    assert "2026-03-01 23:00:05 UTC" in _text(client.get(f"/runs/{run.pk}/"))


@pytest.mark.parametrize("value", ["Mars/Base", "", "'; DROP TABLE x", "UTC" * 100])
def test_an_unknown_zone_is_refused_naming_the_field_and_changes_nothing(operator_client, value):
    operator_client.post("/preferences/", {"timezone": "Asia/Tokyo"})
    response = operator_client.post("/preferences/", {"timezone": value})
    assert response.status_code == 400
    assert "Display time zone:" in _text(response)
    assert operator_client.session[SESSION_KEY] == "Asia/Tokyo"


def test_the_preferences_page_needs_a_login_and_never_redirects_off_site(client, operator):
    assert client.get("/preferences/")["Location"].startswith("/accounts/login/")
    assert client.post("/preferences/", {"timezone": "UTC"})["Location"].startswith("/accounts/login/")
    client.force_login(operator)
    response = client.post("/preferences/", {"timezone": "UTC", "next": "https://evil.example/"})
    assert response["Location"] == "/preferences/"
    assert client.put("/preferences/").status_code == 405


def test_a_stale_zone_in_a_session_falls_back_to_the_server_zone(operator_client, make_schedule, make_run):
    session = operator_client.session
    session[SESSION_KEY] = "Nowhere/Gone"
    session.save()
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=LATE)
    assert "2026-03-01 23:00:05 UTC" in _text(operator_client.get(f"/runs/{run.pk}/"))


def test_an_absolute_time_carries_how_long_ago_it_was(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=timezone.now() - timedelta(minutes=5))
    assert "5 minutes ago" in _text(operator_client.get(f"/runs/{run.pk}/"))


@pytest.mark.parametrize(
    "delta, text",
    [(timedelta(seconds=20), "just now"), (timedelta(hours=3, minutes=2), "3 hours ago"),
     (timedelta(days=-2, hours=-1), "in 2 days"), (timedelta(minutes=1), "1 minute ago")],
)
def test_relative_times_keep_the_largest_unit(delta, text):
    now = datetime(2026, 3, 2, 12, 0, tzinfo=dt_timezone.utc)
    assert ago(now - delta, now).replace("\xa0", " ") == text


def test_the_when_tag_uses_the_page_now_and_shows_a_dash_for_no_time():
    now = datetime(2026, 3, 2, 12, 0, tzinfo=dt_timezone.utc)
    template = Template("{% load scheduler_tags %}{% when at %}|{% when missing %}")
    html = template.render(Context({"at": now - timedelta(hours=2), "now": now, "missing": None}))
    assert html.replace("\xa0", " ").endswith("2 hours ago</span>|—")


def test_durations_under_a_second_are_in_milliseconds():
    from scheduler.templatetags.scheduler_tags import seconds

    assert [seconds(v) for v in (0, 0.0042, 0.2, 0.949, 0.96, 1.23, 12.3, 125, 7300, None)] == [
        "0 ms", "4 ms", "200 ms", "949 ms", "1.0 s", "1.2 s", "12 s", "2 min 5 s", "2 h 1 min", "—"]
