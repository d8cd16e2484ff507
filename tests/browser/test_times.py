"""Times are right, in the browser: a viewer picks a display zone and every time follows, labelled with it."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

import pytest
from playwright.sync_api import expect

from scheduler.models import RunStatus

pytestmark = pytest.mark.django_db(transaction=True)
LATE = datetime(2026, 3, 1, 23, 0, 5, tzinfo=dt_timezone.utc)


def test_a_viewer_picks_a_display_zone_from_the_header_and_times_follow(page, login, viewer, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, queued_at=LATE)
    login(viewer)
    page.goto(f"/runs/{run.pk}/")
    queued = page.locator("dt:text-is('Queued') + dd time")
    expect(queued).to_have_text("2026-03-01 23:00:05 UTC")
    page.click("header a.zone")
    page.select_option("#timezone-form select[name=timezone]", "Europe/Berlin")
    page.click("#timezone-form button[type=submit]:not([name])")
    page.wait_for_url(f"**/runs/{run.pk}/")
    expect(queued).to_have_text("2026-03-02 00:00:05 CET")
    expect(queued).to_have_attribute("title", "2026-03-01 23:00:05 UTC")
    expect(page.locator("header a.zone")).to_have_text("Europe/Berlin")
