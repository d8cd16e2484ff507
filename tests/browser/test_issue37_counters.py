"""Issue 37, points 3, 5, 9 and 12 in a real browser at 1366 and 390 px: since when, is this normal, why waiting,
counters that say what they mean. The shared served demo (`server`), one fresh context per width."""
from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from scheduler.models import BreakerStatus, RunStatus, Schedule, WorkloadClass
from tests.browser.conftest import _screenshot

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus
WIDTHS = {1366: {"width": 1366, "height": 768}, 390: {"width": 390, "height": 844}}


@pytest.fixture(params=sorted(WIDTHS), ids=lambda w: f"{w}px")
def screen(request, browser, server, viewer):
    width = request.param
    extra = {"is_mobile": True, "has_touch": True} if width == 390 else {}
    context = browser.new_context(base_url=server.url, viewport=WIDTHS[width], **extra)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", viewer.username)
    page.fill("input[name=password]", f"pw-{viewer.username}-x9!")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login" not in url)
    page.width = width
    yield page
    context.close()


def _inside(page, locator) -> None:
    """The element is drawn, and within the page's width (nothing to scroll sideways for)."""
    box = locator.first.bounding_box()
    assert box is not None and box["width"] > 0
    assert box["x"] >= 0 and box["x"] + box["width"] <= page.width + 1, box


def _typical_14s(make_run, schedule, now):
    for i in range(5):
        start = now - timedelta(hours=2, minutes=i)
        make_run(schedule, S.SUCCEEDED, started_at=start, finished_at=start + timedelta(seconds=12 + i))


def test_since_when_a_schedule_fails_once_its_breaker_is_open(screen, make_schedule, make_run, now):
    feed = make_schedule("flaky-feed")
    make_run(feed, S.SUCCEEDED, finished_at=now - timedelta(hours=1))
    failed = [make_run(feed, S.FAILED, reason=f"EtlError: feed down {i}",
                       finished_at=now - timedelta(minutes=30 - i)) for i in range(4)]
    Schedule.objects.filter(pk=feed.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=4,
                                               breaker_opened_at=now - timedelta(minutes=26))
    for i in range(12):
        make_run(feed, S.BLOCKED, reason="circuit open", queued_at=now - timedelta(minutes=25) + timedelta(
            seconds=30 * i))
    screen.goto("/?team=all")
    item = screen.locator("#attention li.att-breaker")
    expect(item).to_contain_text("failing since")
    expect(item).to_contain_text("(4 in a row)")
    expect(item).to_contain_text("EtlError: feed down 3")
    _inside(screen, item.locator(".streak"))
    _screenshot(screen, f"issue37-failing-since-{screen.width}")
    expect(screen.locator(f"#failure-{feed.pk}")).to_contain_text("4 failures")
    item.locator(f"a[href='/runs/{failed[-1].pk}/']").click()
    expect(screen.locator("#run-status")).to_have_text("FAILED")
    screen.goto(f"/schedules/{feed.pk}/")
    expect(screen.locator("#failing-since")).to_contain_text("(4 in a row)")
    folded = screen.locator("#recent-runs tr.folded-blocked")
    expect(folded).to_have_count(1)
    expect(folded).to_contain_text("blocked 12 times since")
    expect(screen.locator(f"#recent-runs tr[data-run='{failed[-1].pk}']")).to_be_visible()


def test_a_hanging_run_shows_its_time_beside_the_typical_one(screen, make_schedule, make_run, now):
    schedule = make_schedule("orders-sync")
    _typical_14s(make_run, schedule, now)
    hanging = make_run(schedule, S.RUNNING, started_at=now - timedelta(minutes=3, seconds=54), heartbeat_at=now,
                       admitted_at=now - timedelta(minutes=4))
    screen.goto("/?team=all")
    elapsed = screen.locator(f"#running-{hanging.pk} .elapsed")
    expect(elapsed).to_contain_text("typical 14 s, 1")
    expect(elapsed).to_have_class("elapsed unusual")
    _inside(screen, elapsed)
    assert elapsed.evaluate("e => getComputedStyle(e).fontWeight") == "600"
    _screenshot(screen, f"issue37-elapsed-{screen.width}")
    screen.goto(f"/runs/{hanging.pk}/")
    expect(screen.locator("#elapsed")).to_contain_text("typical 14 s")
    expect(screen.locator("#elapsed")).to_contain_text("unusually long")
    expect(screen.locator("#finished")).to_have_text("not yet: it is running")


def test_why_a_run_waits_is_one_hop_further_and_waiting_is_a_link(screen, make_schedule, make_run, now):
    heavy, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": 1})
    big = make_schedule("big-load", workload_class=heavy)
    holder = make_run(big, S.RUNNING, workload_class=heavy, started_at=now, heartbeat_at=now)
    make_run(big, S.QUEUED, workload_class=heavy, queued_at=now)
    report = make_schedule("daily-report", max_wait_seconds=600)
    make_run(report, S.WAITING, queued_at=now, reason="waiting for upstream 'orders-sync'")
    screen.goto("/?team=all")
    expect(screen.locator("#latest .wait-reason").first).to_be_visible()
    expect(screen.locator("#latest")).to_contain_text(f"held by run #{holder.pk} of 'big-load'")
    screen.locator("#queue a.queue-link[href*='status=WAITING']").first.click()
    screen.wait_for_url(lambda url: "status=WAITING" in url)
    reason = screen.locator("#runs-table .wait-reason")
    expect(reason).to_have_count(1)
    expect(reason).to_contain_text("it fails as a dependency timeout at")
    expect(reason).to_contain_text("(max wait 600 s)")
    _screenshot(screen, f"issue37-waiting-{screen.width}")


def test_a_failed_run_says_it_was_not_retried_and_words_read_alike(screen, make_schedule, make_run, now):
    schedule = make_schedule("wf", target_kind="workflow", target_id="demo.nightly")
    run = make_run(schedule, S.FAILED, attempt=1, max_attempts=3, reason="node 'load' failed: disk full",
                   report={"records": [{"task_id": "extract", "outcome": "SUCCESS", "rows": 5, "reason": ""},
                                       {"task_id": "load", "outcome": "FAILED", "rows": 0, "reason": "disk full"}],
                           "skipped": [], "blocked": []})
    screen.goto(f"/runs/{run.pk}/")
    attempt = screen.locator("#attempt")
    expect(attempt).to_contain_text("not retried: a workflow's failed node is not retried as a whole")
    assert "of 3" not in attempt.text_content()
    _inside(screen, attempt)
    pills = screen.locator("#report .status")
    expect(pills).to_have_text(["SUCCEEDED", "FAILED"])
    assert pills.first.evaluate("e => getComputedStyle(e).textTransform") == "uppercase"
