"""Issue 23, points 4-8, in a real browser against `manage.py serve`, logged in with the demo logins that
`setup_demo` prints: workflow runs, layout at 390 px and 1,920 px, the timeline's range, the backfill form, the
watermark move."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import NodeRecord, Run, RunLogLine, RunStatus, Schedule, TriggerKind, WatermarkHistory
from tests.browser.demo import demo, demo_login  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _run(schedule, status, *, queued, started=None, finished=None, **fields) -> Run:
    return Run.objects.create(schedule=schedule, status=status, trigger_kind=TriggerKind.MANUAL,
                              trigger_key=f"t-{queued.timestamp()}-{schedule.pk}", queued_at=queued,
                              started_at=started, finished_at=finished, priority=schedule.priority,
                              workload_class_id=schedule.workload_class_id, **fields)


@pytest.fixture
def nightly_failed(demo):
    """A failed run of the demo's `nightly` workflow: node records, node-tagged log lines, a traceback."""
    schedule = Schedule.objects.get(name="nightly")
    t0 = timezone.now() - timedelta(minutes=10)
    run = _run(schedule, RunStatus.FAILED, queued=t0, started=t0, finished=t0 + timedelta(seconds=95),
               reason="node 'revenue' failed", attempt=1, max_attempts=1)
    nodes = [("customers", "SUCCESS", 0, 30, ""), ("orders", "SUCCESS", 5, 60, ""),
             ("revenue", "FAILED", 60, 95, "KeyError: 'country'")]
    for task, outcome, start, end, reason in nodes:
        NodeRecord.objects.create(
            run=run, task_id=task, outcome=outcome, started_at=t0 + timedelta(seconds=start),
            finished_at=t0 + timedelta(seconds=end), rows=120 if outcome == "SUCCESS" else 0, reason=reason,
            error=("Traceback (most recent call last):\n  File \"demo/revenue.py\", line 42, in transform\n"
                   "    row[\"country\"]\nKeyError: 'country'") if reason else "")
    lines = [("", "started on cluster-a/1, attempt 1 of 1"), ("customers", "node started"),
             ("customers", "read 120 customers"), ("orders", "node started"), ("orders", "read 120 orders"),
             ("revenue", "node started"), ("revenue", "joining orders to customers"),
             ("revenue", "node failed after 1 try: KeyError: 'country'"), ("", "finished FAILED after 95.0 s")]
    for seq, (node, message) in enumerate(lines, start=1):
        RunLogLine.objects.create(run=run, seq=seq, at=t0 + timedelta(seconds=seq * 10), node=node,
                                  level="ERROR" if "failed" in message else "INFO",
                                  source="scheduler" if "node" in message or not node else f"demo.{node}",
                                  message=message)
    return run


def test_point4_a_workflow_run_names_each_lines_node_filters_by_node_and_draws_its_nodes(
        page, phone, shot, shot_of, demo, nightly_failed):
    demo_login(page, "operator", demo["operator"])
    page.goto(f"/runs/{nightly_failed.pk}/")
    bars = page.locator("#node-gantt rect.gantt-bar")
    expect(bars).to_have_count(3)
    expect(page.locator("#node-gantt rect.g-failed")).to_have_attribute("data-node", "revenue")
    expect(page.locator("#log-lines li[data-node=revenue] .node").first).to_have_text("revenue")
    failed_row = page.locator('#nodes tr[data-node="revenue"]')
    failed_row.locator("summary").click()
    expect(failed_row.locator("pre")).to_contain_text("KeyError: 'country'")
    expect(failed_row.locator("pre")).to_contain_text("Traceback (most recent call last)")
    shot("run-detail")
    page.select_option("#log-node", "orders")
    page.click("#log-filter button[type=submit]")
    expect(page.locator("#log-lines li")).to_have_count(2)
    expect(page.locator("#log-lines")).to_contain_text("read 120 orders")
    expect(page.locator("#log-lines")).not_to_contain_text("joining orders")
    shot("run-log")
    demo_login(phone, "operator", demo["operator"])
    phone.goto(f"/runs/{nightly_failed.pk}/")
    expect(phone.locator("#node-gantt")).to_be_visible()
    shot_of(phone, "phone-run-detail")


# Every cell shows its content; a card never overflows; a table wider than the screen scrolls in its own box.
CLIPPED = """(wide) => {
  const out = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && el.className.baseVal === undefined ? '.' + String(el.className).trim().replace(/\\s+/g, '.') : '');
  if (document.documentElement.scrollWidth > window.innerWidth + 1) out.push('page ' + document.documentElement.scrollWidth);
  for (const el of document.querySelectorAll('main td, main th')) {
    if (el.offsetParent === null) continue;
    if (el.scrollWidth > el.clientWidth + 1) out.push('cell ' + name(el) + ' ' + el.textContent.trim().slice(0, 40));
  }
  for (const el of document.querySelectorAll('main, main .card')) {
    if (el.scrollWidth > el.clientWidth + 1) out.push('box ' + name(el) + ' ' + el.scrollWidth + '>' + el.clientWidth);
  }
  for (const el of document.querySelectorAll('main .table-box')) {
    const over = el.scrollWidth > el.clientWidth + 1;
    if (over && wide) out.push('table box scrolls on a wide screen: ' + name(el.querySelector('table')));
    if (over && !['auto', 'scroll'].includes(getComputedStyle(el).overflowX)) out.push('table box clips');
  }
  return out;
}"""

ONE_LINE = """() => [...document.querySelectorAll('td.fires div')].filter(el =>
  el.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(el).lineHeight)).map(el => el.textContent)"""


@pytest.fixture
def busy_demo(demo, nightly_failed):
    """The demo with a few runs and a watermark history whose "By" holds a person, a reason and a run."""
    customers = Schedule.objects.get(name="customer_sync")
    now = timezone.now()
    for i in range(6):
        at = now - timedelta(minutes=50 - i * 7)
        _run(customers, RunStatus.FAILED if i == 2 else RunStatus.SUCCEEDED, queued=at, started=at,
             finished=at + timedelta(seconds=12), reason="OperationalError: the source database refused the "
             "connection (timeout after 30 s)" if i == 2 else "")
    WatermarkHistory.objects.create(schedule=customers, kind="set", old_value="2026-11-01T00:00:00+00:00",
                                    new_value=(now - timedelta(days=2)).isoformat(), actor="operator",
                                    reason="skip the day the CRM export was corrupt (ticket OPS-4711)", at=now)
    return customers


@pytest.mark.parametrize("width", [1920, 390])
def test_point5_nothing_is_clipped_at_a_phones_width_or_a_wide_screens(browser, server, demo, busy_demo,
                                                                        nightly_failed, width, shot_of):
    context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 1000},
                                  is_mobile=width < 500, has_touch=width < 500)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        demo_login(page, "operator", demo["operator"])
        pages = ["/", "/schedules/", f"/schedules/{busy_demo.pk}/", "/runs/", f"/runs/{nightly_failed.pk}/",
                 "/timeline/", "/backfills/", f"/schedules/{busy_demo.pk}/backfill/", "/audit/"]
        for path in pages:
            page.goto(path)
            assert page.evaluate(CLIPPED, width > 1000) == [], (width, path)
        if width > 1000:
            page.goto("/schedules/")
            assert page.evaluate(ONE_LINE) == []  # "Next fires" does not wrap
            main = page.evaluate("document.querySelector('main').getBoundingClientRect().width")
            assert main > 1800  # the screen's width, not ~1,000 px
            shot_of(page, "schedules")
            page.goto(f"/schedules/{busy_demo.pk}/")
            shot_of(page, "schedule-detail")
        else:
            page.goto(f"/schedules/{busy_demo.pk}/")
            expect(page.locator("#recent-runs tr[data-run]").first).to_be_visible()
            shot_of(page, "phone-schedule-detail")
    finally:
        context.close()


def test_point6_the_timeline_draws_the_range_it_selects_and_offers_15_minutes(page, shot, demo, busy_demo):
    demo_login(page, "operator", demo["operator"])
    page.goto("/timeline/")
    drawn = page.locator("#timeline")
    assert page.locator("#id_range").input_value() == "6h"
    assert drawn.get_attribute("data-span-seconds") == str(6 * 3600)
    page.select_option("#id_range", "15m")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#id_range")).to_have_value("15m")
    expect(drawn).to_have_attribute("data-span-seconds", "900")
    expect(page.locator("#timeline-range")).to_have_text("Last 15 minutes")
    page.select_option("#id_range", "1h")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#id_range")).to_have_value("1h")
    expect(drawn).to_have_attribute("data-span-seconds", "3600")
    expect(page.locator("svg.timeline a.tl-run").first).to_be_visible()
    shot("timeline")


def test_point7_the_backfill_form_reads_the_schedules_zone_previews_live_and_submits(page, phone, shot, shot_of,
                                                                                     demo, busy_demo):
    at = timezone.now() - timedelta(days=3)  # November 1 in Berlin already succeeded: "failed only" skips it
    _run(busy_demo, RunStatus.SUCCEEDED, queued=at, started=at, finished=at + timedelta(seconds=12),
         window_low="2026-10-31T23:00:00+00:00", window_high="2026-11-01T23:00:00+00:00")
    demo_login(page, "admin", demo["admin"])
    page.goto(f"/schedules/{busy_demo.pk}/")
    page.click("#backfill-action a")  # the visible action
    expect(page.locator("#backfill-zone")).to_have_text("Europe/Berlin")
    page.fill("#id_from_date", "2026-11-01")
    page.fill("#id_to_date", "2026-12-02")
    page.fill("#id_reason", "replay November after the CRM fix")
    page.select_option("#id_order", "newest")
    expect(page.locator("#preview-text")).to_contain_text("31 windows of 1 day, about 6 min at the recent run time")
    page.select_option("#id_reprocess", "failed")
    expect(page.locator("#preview-text")).to_contain_text("30 of 31 windows of 1 day: 1 already succeeded")
    page.select_option("#id_reprocess", "all")
    expect(page.locator("#preview-text")).to_contain_text("31 windows of 1 day, about 6 min")
    shot("backfill-form")
    page.fill("#id_to_date", "2026-10-01")  # before From: the preview names the field, live
    expect(page.locator("#preview-error")).to_contain_text("to: must be after from")
    page.click("#submit-backfill")
    expect(page.locator(".form-error")).to_have_text("to: must be after from")  # and the submit too
    assert not busy_demo.backfills.exists()
    page.fill("#id_to_date", "2026-12-02")
    page.select_option("#id_order", "newest")
    expect(page.locator("#preview-text")).to_contain_text("31 windows")
    page.click("#submit-backfill")
    page.wait_for_url(re.compile(r"/backfills/\d+/$"))
    backfill = busy_demo.backfills.get()
    assert backfill.total_windows == 31 and backfill.newest_first
    assert backfill.range_from == "2026-10-31T23:00:00+00:00"  # midnight in Berlin
    demo_login(phone, "admin", demo["admin"])
    phone.goto(f"/schedules/{busy_demo.pk}/backfill/")
    expect(phone.locator("#preview-text")).to_contain_text("7 windows of 1 day")  # the defaults: the last 7 days
    phone.fill("#id_from_date", "2026-11-01")
    phone.fill("#id_to_date", "2026-11-08")
    expect(phone.locator("#preview-text")).to_contain_text("7 windows of 1 day")
    shot_of(phone, "phone-backfill-form")


def test_point8_a_watermark_move_is_confirmed_with_its_next_window_in_the_viewers_zone(page, shot, demo, busy_demo):
    demo_login(page, "admin", demo["admin"])
    page.goto(f"/schedules/{busy_demo.pk}/")
    assert "." not in page.locator("#watermark-value").inner_text()  # no microseconds, no raw ISO
    page.fill("#watermark-form input[name=value]", "2026-12-01T06:30:15")
    page.fill("#watermark-form input[name=reason]", "re-read from the morning of the outage")
    page.click("#watermark-form button[value=set]")
    confirm = page.locator("#watermark-confirm")
    zone = page.locator("header a.zone").inner_text().strip()
    expect(confirm.locator("#confirm-new")).to_contain_text("2026-12-01 06:30:15")  # typed in the viewer's zone
    expect(confirm.locator("#confirm-window")).to_contain_text("from 2026-12-01 06:29:15")  # the demo's 60 s overlap
    expect(confirm.locator("#confirm-reason")).to_have_text("re-read from the morning of the outage")
    assert not re.search(r"\d\.\d{3}|\+00:00", confirm.inner_text())  # no microseconds, no raw UTC
    shot("watermark-confirm")
    page.click("#confirm-move")
    page.wait_for_url(re.compile(rf"/schedules/{busy_demo.pk}/$"))
    expect(page.locator("#watermark-value")).to_contain_text("2026-12-01 06:30:15")
    assert zone  # the page names the zone the times are in
