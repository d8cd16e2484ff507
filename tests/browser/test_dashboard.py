"""The dashboard in a real browser: live updates without a reload, actions, refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import BackfillWindow, BreakerStatus, GovernanceTick, Run, RunStatus, Schedule, WindowStatus
from scheduler.services.cluster.execution import execute_run
from tests.browser.helpers import dispatch, mark_page, not_reloaded

pytestmark = pytest.mark.django_db(transaction=True)
WM = {"type": "integer", "column": "id", "initial": 0}


def test_a_triggered_run_goes_queued_running_succeeded_on_the_overview_without_a_reload(
    page, login, shot, operator, make_schedule, make_run
):
    schedule = make_schedule("orders-sync", description="Nightly orders")
    up = make_schedule("customers", watermark_config=WM)
    make_schedule("revenue", depends_on=[schedule, up], trigger_kind="upstream")
    GovernanceTick.objects.create(started_at=timezone.now(), finished_at=timezone.now(), holder="cluster-a")
    base = timezone.now() - timedelta(hours=8)
    for i, (status, seconds, rows) in enumerate(
        [
            (RunStatus.SUCCEEDED, 40, 1200),
            (RunStatus.SUCCEEDED, 55, 1350),
            (RunStatus.FAILED, 12, None),
            (RunStatus.SUCCEEDED, 70, 1900),
            (RunStatus.SUCCEEDED, 48, 1500),
            (RunStatus.SUCCEEDED, 52, 1620),
        ]
    ):
        start = base + timedelta(hours=i)
        make_run(
            up,
            status,
            rows_loaded=rows,
            queued_at=start - timedelta(seconds=2),
            started_at=start,
            finished_at=start + timedelta(seconds=seconds),
            reason="source timed out" if rows is None else "",
        )
    login(operator)

    page.goto(f"/schedules/{schedule.pk}/")
    page.fill("#run-now textarea[name=params]", '{"n": 3}')
    page.click("#run-now button[type=submit]")
    expect(page.locator("#run-status")).to_have_text("QUEUED")
    run = Run.objects.get(schedule=schedule)
    assert run.params == {"n": 3} and run.triggered_by == operator.username

    page.goto("/")
    mark_page(page)
    row = page.locator(f'#latest tr[data-run="{run.pk}"]')
    expect(row).to_have_attribute("data-status", "QUEUED")

    [(run_id, token)] = dispatch()
    expect(row).to_have_attribute("data-status", "RUNNING")
    expect(page.locator(f'#running tr[data-run="{run.pk}"]')).to_be_visible()
    shot("overview")

    assert execute_run(run_id, token) == RunStatus.SUCCEEDED
    expect(row).to_have_attribute("data-status", "SUCCEEDED")
    expect(page.locator(f'#running tr[data-run="{run.pk}"]')).to_have_count(0)
    assert not_reloaded(page)

    page.goto("/runs/")
    shot("runs")
    page.goto(f"/runs/{run.pk}/")
    shot("run-detail")
    page.goto("/schedules/")
    shot("schedules")
    page.goto(f"/schedules/{up.pk}/")
    shot("schedule-detail")
    page.goto("/schedules/graph/")
    expect(page.locator("#graph a.node")).to_have_count(3)
    shot("graph")


def test_a_submitted_backfill_fills_its_window_grid_live(page, login, shot, operator, make_schedule, settings):
    # window by window through the dispatch loop, so the grid is seen filling (a worker would otherwise run a
    # backfill's next windows itself: ETL_CATCHUP_ON_WORKER)
    settings.ETL_CATCHUP_ON_WORKER = False
    make_schedule("orders-sync", watermark_config=WM)
    login(operator)
    page.goto("/backfills/")
    page.select_option("#backfill-form select[name=schedule]", "orders-sync")
    page.fill("#backfill-form input[name=range_from]", "0")
    page.fill("#backfill-form input[name=range_to]", "60")
    page.fill("#backfill-form input[name=window_size]", "10")
    page.fill("#backfill-form input[name=max_parallel]", "2")
    page.fill("#backfill-form input[name=reason]", "reload after the source fix")
    page.click("#backfill-form button[type=submit]")
    cells = page.locator("#backfill-grid .windows [data-seq]")
    expect(cells).to_have_count(6)
    expect(page.locator('#backfill-grid .windows [data-status="PENDING"]')).to_have_count(6)
    mark_page(page)

    sent = dispatch()
    assert len(sent) == 2  # max_parallel
    expect(
        page.locator('#backfill-grid .windows [data-status="RUNNING"], #backfill-grid .windows [data-status="QUEUED"]')
    ).to_have_count(2)
    for run_id, token in sent:
        execute_run(run_id, token)
    expect(page.locator('#backfill-grid .windows [data-status="SUCCEEDED"]')).to_have_count(2)
    shot("backfill-detail")

    for _ in range(5):
        batch = dispatch()
        for run_id, token in batch:
            execute_run(run_id, token)
        if not batch:
            break
    dispatch()  # lets the pump see no open window and complete the backfill
    expect(page.locator('#backfill-grid .windows [data-status="SUCCEEDED"]')).to_have_count(6)
    expect(page.locator("#backfill-status")).to_have_text("Completed")
    assert set(BackfillWindow.objects.values_list("status", flat=True)) == {WindowStatus.SUCCEEDED}
    assert not_reloaded(page)
    page.goto("/backfills/")
    shot("backfills")


def test_an_operator_resets_an_open_breaker(page, login, shot, operator, make_schedule):
    schedule = make_schedule("flaky-feed", target_id="demo.flaky")
    Schedule.objects.filter(pk=schedule.pk).update(
        breaker_status=BreakerStatus.OPEN,
        breaker_failures=5,
        breaker_opened_at=timezone.now(),
        breaker_current_cooldown_seconds=300,
    )
    login(operator)
    page.goto("/")
    expect(page.locator("#breakers")).to_contain_text("flaky-feed")
    page.goto(f"/schedules/{schedule.pk}/")
    expect(page.locator("#breaker .status")).to_have_text("OPEN")  # one casing for every status word (issue 37)
    page.fill("#breaker input[name=reason]", "feed fixed")
    page.click("#breaker button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Breaker of flaky-feed reset")
    expect(page.locator("#breaker .status")).to_have_text("CLOSED")
    assert Schedule.objects.get(pk=schedule.pk).breaker_status == BreakerStatus.CLOSED
    page.goto("/audit/")
    expect(page.locator("#entries")).to_contain_text("breaker.reset")
    shot("audit")


def test_a_viewer_sees_no_actions_and_a_forged_post_is_refused(page, login, viewer, make_schedule):
    schedule = make_schedule("orders-sync")
    login(viewer)
    page.goto(f"/schedules/{schedule.pk}/")
    expect(page.locator("h1")).to_contain_text("orders-sync")
    expect(page.locator("#run-now")).to_have_count(0)
    expect(page.locator("#breaker button")).to_have_count(0)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"/schedules/{schedule.pk}/run", form={"params": "{}"}, headers={"X-CSRFToken": csrf, "Referer": page.url}
    )
    assert response.status == 403
    assert not Run.objects.exists()
    page.goto("/admin/")
    assert "/admin/login/" in page.url
