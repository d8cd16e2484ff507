"""Issue 37 points 1, 2 and 11 in the browser, against the served demo, logged in as the demo operator, at 1366 px
and at a phone's 390 px: the crowded timeline in minutes with its slice kept in the link, the backfill page's one
live state, and times in the viewer's zone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Backfill, BackfillStatus, BackfillWindow, Run, RunStatus, TriggerKind, WindowStatus
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.history.hour_counts import runs_counted

pytestmark = pytest.mark.django_db(transaction=True)
WIDTHS = {"desktop": {"width": 1366, "height": 768}, "phone": {"width": 390, "height": 844}}
DAILY = {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00"}


@pytest.fixture
def both(browser, server, demo):
    """A page at 1366 px and one at 390 px (touch), each logged in as the demo operator."""
    pages = {}
    for name, size in WIDTHS.items():
        context = browser.new_context(base_url=server.url, viewport=size, is_mobile=name == "phone",
                                      has_touch=name == "phone")
        context.set_default_timeout(15_000)
        on = pages[name] = context.new_page()
        on.goto("/accounts/login/")
        on.fill("input[name=username]", "operator")
        on.fill("input[name=password]", demo["operator"])
        on.click("button[type=submit]")
        on.wait_for_url(lambda url: "/accounts/login" not in url)
    yield pages
    for on in pages.values():
        on.context.close()


def _fits(on) -> bool:
    return on.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def _in_berlin(on) -> None:
    on.click("header a.zone")
    on.select_option("#timezone-form select[name=timezone]", "Europe/Berlin")
    on.click("#timezone-form button[type=submit]:not([name])")
    on.wait_for_load_state()


def test_a_crowded_quarter_hour_is_drawn_by_the_minute_and_a_bar_opens_its_slice(both, make_schedule):
    schedule = make_schedule("replay-target")
    now = timezone.now()
    runs = [Run(schedule=schedule, status=RunStatus.SUCCEEDED, trigger_kind=TriggerKind.MANUAL, trigger_key=f"b{i}",
                workload_class_id=schedule.workload_class_id, queued_at=now - timedelta(seconds=2 * i + 5),
                started_at=now - timedelta(seconds=2 * i + 5), finished_at=now - timedelta(seconds=2 * i + 4))
            for i in range(300)]
    runs_counted([r.pk for r in Run.objects.bulk_create(runs)])
    for name, on in both.items():
        on.goto("/timeline/?range=15m&team=all")  # the demo operator's own teams do not own this schedule
        expect(on.locator("#timeline-slice")).to_have_text("1 minute")
        bars = on.locator('g[data-schedule="replay-target"] a.tl-group')
        assert bars.count() >= 10, name
        expect(on.locator("#id_hide_backfills")).to_be_visible()
        if name == "phone":
            assert _fits(on)  # the chart scrolls inside its card, the page does not
            continue
        href = bars.first.get_attribute("href")
        assert "from=" in href and "to=" in href
        on.goto(href)
        expect(on.locator("input[name=from]")).not_to_have_value("")
        rows = on.locator("#runs-table tbody tr[data-run]")
        expect(rows.first).to_be_visible()
        assert 0 < rows.count() <= 31  # a minute of runs two seconds apart, not the 300


def test_the_backfill_page_tells_one_live_state(both, make_schedule):
    schedule = make_schedule("replay-days", watermark_config=DAILY, timezone="Europe/Berlin")
    backfill = backfill_submit(schedule=schedule, start="2026-10-31T23:00:00+00:00",
                               end="2026-11-07T23:00:00+00:00", window="86400", reason="replay a week",
                               requested_by="tests")
    for on in both.values():
        _in_berlin(on)
        on.goto(f"/backfills/{backfill.pk}/")
        expect(on.locator("#backfill-range")).to_contain_text(
            "[2026-11-01 00:00:00 CET, 2026-11-08 00:00:00 CET) in windows of 1 day")
        expect(on.locator('#windows tr[data-window="3"] .status')).to_have_text("Pending")
    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.SUCCEEDED, attempts=1)
    BackfillWindow.objects.filter(backfill=backfill, seq=3).update(status=WindowStatus.FAILED, attempts=3)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    for name, on in both.items():  # no reload: the summary, the grid and the table change together
        expect(on.locator("#backfill-status")).to_have_text("Completed with 1 failed window")
        expect(on.locator("#backfill-status")).to_have_class("status s-failed")
        expect(on.locator('#windows tr[data-window="3"] .status')).to_have_text("Failed")
        expect(on.locator('#windows tr[data-window="0"] .status')).to_have_text("Succeeded")
        expect(on.locator("#windows")).not_to_contain_text("Pending")
        assert _fits(on), name


def test_times_read_in_the_viewers_zone_to_the_second(both, make_schedule, make_run):
    run = make_run(make_schedule("daily-orders"), RunStatus.SUCCEEDED, window_low="2026-11-30T23:00:00+00:00",
                   window_high="2026-12-01T23:00:00+00:00")
    pulse = make_schedule("pulse", trigger_kind="interval", trigger_config={"seconds": 30})
    for on in both.values():
        _in_berlin(on)
        on.goto(f"/runs/{run.pk}/")
        expect(on.locator("dt:text-is('Window') + dd")).to_have_text(
            "[2026-12-01 00:00:00 CET, 2026-12-02 00:00:00 CET)")
        on.goto(f"/schedules/{pulse.pk}/")
        # the viewer's zone first on each line (the schedule's own zone, UTC, follows it)
        fires = on.locator("dt:text-is('Next fires') + dd > div > time").all_inner_texts()
        assert len(fires) >= 2 and fires[0] != fires[1] and all(f.endswith(" CET") for f in fires), fires
        assert _fits(on)
