"""What on-call needs, in a real browser: attention first, logs that follow, re-run, time, live actions."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.core import IdentityTransform, Pipeline
from scheduler.models import (
    Backfill, BackfillStatus, BackfillWindow, BreakerStatus, GovernanceTick, Run, RunLogLine, RunStatus, Schedule,
    WindowStatus,
)
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.cluster.execution import execute_run
from tests.browser.helpers import dispatch, mark_page, not_reloaded
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db(transaction=True)
log = logging.getLogger("shop.orders")


class OrdersSource:
    def extract(self):
        log.info("reading orders changed since the watermark")
        log.warning("3 orders without a customer id; loaded with customer 0")
        return [{"id": i} for i in range(5)]

    def __repr__(self):
        return "OrdersSource(shop.orders)"


@pytest.fixture
def orders_pipeline():
    registry.register_pipeline(
        "test.orders", lambda ctx: Pipeline(OrdersSource(), IdentityTransform(), NoopSink()), replace=True
    )
    yield
    registry._pipelines.pop("test.orders", None)


def _line(run, seq, message, level="INFO"):
    RunLogLine.objects.create(run=run, seq=seq, at=timezone.now(), level=level, source="shop.orders", message=message)


def test_the_overview_opens_with_what_needs_a_person(page, login, shot, viewer, make_schedule, make_run):
    now = timezone.now()
    GovernanceTick.objects.create(started_at=now, finished_at=now, holder="cluster-a")
    orders = make_schedule("orders-sync")
    failed = make_run(orders, RunStatus.FAILED, reason="OperationalError: source database is down",
                      queued_at=now - timedelta(minutes=3))
    flaky = make_schedule("flaky-feed")
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5,
                                                breaker_opened_at=now - timedelta(minutes=4))
    make_run(make_schedule("big-load"), RunStatus.RUNNING, heartbeat_at=now - timedelta(minutes=7),
             worker_id="cluster-b/3")
    report = make_schedule("daily-report", max_wait_seconds=600)
    make_run(report, RunStatus.WAITING, queued_at=now - timedelta(minutes=8), reason="waiting for orders-sync")
    beat = make_schedule("heartbeat")
    for _ in range(8):
        make_run(beat, RunStatus.SUCCEEDED)
    login(viewer)
    page.goto("/")
    attention = page.locator("#attention")
    expect(attention.locator("li.att")).to_have_count(4)
    expect(attention).to_contain_text("Stuck run")
    expect(attention).to_contain_text("flaky-feed")
    expect(attention).to_contain_text("Waiting long")
    expect(page.locator("#latest")).to_contain_text("+7 like it")
    box = lambda sel: page.locator(sel).bounding_box()["y"]  # noqa: E731
    assert box("#attention") < box("#running") < box("#failures") < box("#latest")
    assert page.evaluate("typeof Idiomorph") == "object"
    shot("overview")
    attention.locator("li.att-failing > a").click()  # the item's own link (its streak links the run too)
    expect(page).to_have_url(f"{page.url.split('/runs/')[0]}/runs/{failed.pk}/")


def test_a_runs_log_follows_live_and_its_actions_change_when_it_ends(
    page, login, shot, operator, make_schedule, make_run
):
    run = make_run(make_schedule("orders-sync"), RunStatus.RUNNING, reason="")
    _line(run, 1, "started on cluster-a/1, attempt 1 of 3")
    login(operator)
    page.goto(f"/runs/{run.pk}/")
    mark_page(page)
    expect(page.locator("#log-lines li")).to_have_count(1)
    expect(page.locator("#cancel-form")).to_be_visible()
    expect(page.locator("#rerun-form")).to_have_count(0)

    page.fill("#cancel-reason", "wrong window")  # typing while the page refreshes
    _line(run, 2, "reading orders changed since the watermark")
    _line(run, 3, "3 orders without a customer id", level="WARNING")
    expect(page.locator("#log-lines li")).to_have_count(3)
    expect(page.locator("#log-lines li.l-warning")).to_contain_text("without a customer id")
    Run.objects.filter(pk=run.pk).update(worker_id="cluster-a/9")
    expect(page.locator("#run-live")).to_contain_text("cluster-a/9")  # the live part was refreshed ...
    expect(page.locator("#cancel-reason")).to_be_focused()  # ... and kept focus and the text being typed
    expect(page.locator("#cancel-reason")).to_have_value("wrong window")

    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, finished_at=timezone.now(), reason="source down")
    _line(run, 4, "finished FAILED: source down", level="ERROR")
    expect(page.locator("#run-status")).to_have_text("FAILED")
    expect(page.locator("#cancel-form")).to_have_count(0)
    expect(page.locator("#rerun-form")).to_be_visible()
    expect(page.locator("#log-lines li")).to_have_count(4)
    assert not_reloaded(page)

    page.fill("#rerun-reason", "source is back")
    page.click("#rerun")
    expect(page.locator(".messages")).to_contain_text(f"a re-run of run {run.pk}")
    new = Run.objects.get(rerun_of=run)
    assert new.triggered_by == operator.username and new.propagate is False
    expect(page.locator("#rerun-of")).to_contain_text(f"#{run.pk}")


def test_a_real_run_shows_the_pipelines_lines_and_the_schedulers_own(
    page, login, shot, viewer, make_schedule, orders_pipeline
):
    schedule = make_schedule("orders-sync", target_id="test.orders")
    run = run_trigger_manual(schedule=schedule, actor="tests")
    [(run_id, token)] = dispatch()
    assert execute_run(run_id, token) == RunStatus.SUCCEEDED
    login(viewer)
    page.goto(f"/runs/{run.pk}/")
    lines = page.locator("#log-lines li")
    expect(lines.first).to_contain_text("started on")
    expect(page.locator("#logs")).to_contain_text("reading orders changed since the watermark")
    expect(page.locator("#logs li.l-warning")).to_contain_text("3 orders without a customer id")
    expect(lines.last).to_contain_text("finished SUCCEEDED")
    expect(page.locator("#rerun-form")).to_have_count(0)  # a viewer may not re-run
    shot("run-log")


def test_the_timeline_shows_runs_per_schedule_with_their_queue_wait(
    page, login, shot, viewer, make_schedule, make_run
):
    now = timezone.now()
    for name, offsets in [("customers-sync", [170, 110, 50]), ("orders-sync", [165, 105, 45]),
                          ("revenue", [150, 90, 30])]:
        schedule = make_schedule(name)
        for i, minutes in enumerate(offsets):
            start = now - timedelta(minutes=minutes)
            make_run(schedule, RunStatus.FAILED if (name, i) == ("orders-sync", 1) else RunStatus.SUCCEEDED,
                     queued_at=start - timedelta(minutes=4), started_at=start,
                     finished_at=start + timedelta(minutes=12))
    running = make_run(Schedule.objects.get(name="revenue"), RunStatus.RUNNING,
                       queued_at=now - timedelta(minutes=6), started_at=now - timedelta(minutes=3))
    login(viewer)
    page.goto("/timeline/?hours=3")
    expect(page.locator("svg.timeline g.tl-row")).to_have_count(3)
    expect(page.locator("svg.timeline a.tl-run")).to_have_count(10)
    expect(page.locator("svg.timeline .tl-wait")).to_have_count(10)
    expect(page.locator('svg.timeline a.tl-run[data-status="failed"]')).to_have_count(1)
    shot("timeline")
    page.locator(f'svg.timeline a.tl-run[data-run="{running.pk}"] rect.tl-bar').click()
    expect(page.locator("h1")).to_contain_text(f"Run #{running.pk}")


def test_the_schedules_list_shows_recent_statuses_and_typical_duration(
    page, login, viewer, make_schedule, make_run
):
    now = timezone.now()
    orders = make_schedule("orders-sync")
    for i, status in enumerate([RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SUCCEEDED]):
        make_run(orders, status, started_at=now - timedelta(minutes=10 - i), finished_at=now - timedelta(minutes=9 - i))
    login(viewer)
    page.goto("/schedules/")
    row = page.locator('tr[data-schedule="orders-sync"]')
    expect(row.locator(".strip .tick")).to_have_count(3)
    expect(row.locator(".strip .t-failed")).to_have_count(1)
    expect(row.locator(".typical")).to_have_text("1 min 0 s")


def test_a_breaker_is_reset_inline_from_the_blocked_list_after_confirming(
    page, login, shot, operator, make_schedule, make_run
):
    flaky = make_schedule("flaky-feed")
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    make_run(flaky, RunStatus.BLOCKED, blocked_by=flaky, reason="circuit open")
    login(operator)
    page.goto("/runs/blocked/")
    button = page.locator("form.breaker-reset button")
    expect(button).to_have_text("Reset breaker of flaky-feed")
    page.once("dialog", lambda dialog: dialog.dismiss())
    button.click()
    expect(button).to_be_visible()
    assert Schedule.objects.get(pk=flaky.pk).breaker_status == BreakerStatus.OPEN  # declined: nothing changed
    page.once("dialog", lambda dialog: dialog.accept())
    button.click()
    expect(page.locator(".messages")).to_contain_text("Breaker of flaky-feed reset")
    assert page.url.endswith("/runs/blocked/")
    expect(page.locator("form.breaker-reset")).to_have_count(0)
    assert Schedule.objects.get(pk=flaky.pk).breaker_status == BreakerStatus.CLOSED


def test_the_blocked_list_refreshes_by_itself(page, login, viewer, make_schedule, make_run):
    schedule = make_schedule("revenue")
    login(viewer)
    page.goto("/runs/blocked/")
    mark_page(page)
    run = make_run(schedule, RunStatus.BLOCKED, reason="upstream orders-sync failed")
    expect(page.locator(f'#reason-table tr[data-run="{run.pk}"]')).to_be_visible()
    assert not_reloaded(page)


def test_a_backfill_that_completes_no_longer_offers_pause(page, login, operator, make_schedule):
    schedule = make_schedule("orders-sync")
    backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to="30", window_size="10",
                                       total_windows=3, requested_by="alice", reason="reload",
                                       created_at=timezone.now())
    for i, status in enumerate([WindowStatus.SUCCEEDED, WindowStatus.RUNNING, WindowStatus.PENDING]):
        BackfillWindow.objects.create(backfill=backfill, seq=i + 1, low=str(10 * i), high=str(10 * i + 10),
                                      status=status)
    login(operator)
    page.goto(f"/backfills/{backfill.pk}/")
    mark_page(page)
    expect(page.locator("#backfill-actions button", has_text="Pause")).to_be_visible()
    BackfillWindow.objects.filter(backfill=backfill, seq=2).update(status=WindowStatus.SUCCEEDED)
    BackfillWindow.objects.filter(backfill=backfill, seq=3).update(status=WindowStatus.CANCELLED)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    expect(page.locator("#backfill-status")).to_have_text("Completed")
    expect(page.locator("#backfill-actions button", has_text="Pause")).to_have_count(0)
    expect(page.locator("#backfill-progress")).to_contain_text("1 cancelled")
    assert not_reloaded(page)


def test_a_refresh_keeps_the_row_being_read_where_it_is(page, login, viewer, make_schedule, make_run):
    schedule = make_schedule("orders-sync")
    runs = [make_run(schedule, RunStatus.QUEUED, finished_at=None, started_at=None) for _ in range(45)]
    login(viewer)
    page.set_viewport_size({"width": 1280, "height": 600})
    page.goto("/runs/")
    mark_page(page)
    oldest = page.locator(f'#runs-table tr[data-run="{runs[0].pk}"]')
    oldest.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -100)")
    assert page.evaluate("window.scrollY") > 500
    top = oldest.bounding_box()["y"]  # where the reader sees the row, in the viewport
    Run.objects.filter(pk=runs[0].pk).update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    expect(oldest).to_have_attribute("data-status", "CANCELLED")
    assert abs(oldest.bounding_box()["y"] - top) <= 2
    assert not_reloaded(page)
