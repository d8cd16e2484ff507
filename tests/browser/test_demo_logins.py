"""Issue 23 (points 1, 2, 3, 9, 10) in a real browser, logged in as the demo users setup_demo prints."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import AuditEntry, BreakerStatus, FailureAck, Run, RunLogLine, RunStatus, Schedule

pytestmark = pytest.mark.django_db(transaction=True)


def _failures(make_run, schedule, n, reason="OperationalError: source database is down"):
    now = timezone.now()
    return [make_run(schedule, RunStatus.FAILED, reason=reason, queued_at=now - timedelta(minutes=30 - i),
                     started_at=now - timedelta(minutes=30 - i), finished_at=now - timedelta(minutes=29 - i))
            for i in range(n)]


def test_the_operator_acts_on_its_team_and_sees_why_not_on_the_other(page, phone, login_demo, shot, shot_of):
    login_demo("operator")
    ours = Schedule.objects.get(name="flaky_feed")
    page.goto(f"/schedules/{ours.pk}/")
    expect(page.locator("#run-now button")).to_be_visible()
    expect(page.locator("#owner-line")).to_contain_text("Owned by ingest")
    theirs = Schedule.objects.get(name="nightly")
    page.goto(f"/schedules/{theirs.pk}/")
    expect(page.locator("#owner-line")).to_have_text("Owned by analytics; you can view it but not act on it.")
    assert page.locator("#run-now").count() == 0
    page.goto("/schedules/?team=all")
    expect(page.locator("#view-only")).to_contain_text("Schedules of analytics are view only")
    shot("demo-schedules-operator")
    login_demo("operator", on=phone)
    phone.goto(f"/schedules/{theirs.pk}/")
    expect(phone.locator("#owner-line")).to_be_visible()
    shot_of(phone, "phone-demo-view-only")


def test_failures_are_a_work_list_the_operator_acknowledges_with_a_note(page, phone, login_demo, make_run, shot,
                                                                        shot_of):
    flaky, orders = Schedule.objects.get(name="flaky_feed"), Schedule.objects.get(name="order_sync")
    _failures(make_run, flaky, 6, reason="EtlError: demo.flaky failed on purpose (params: fail=true)")
    _failures(make_run, orders, 1)
    make_run(orders, RunStatus.SUCCEEDED, finished_at=timezone.now())  # a later success: recovered
    _failures(make_run, Schedule.objects.get(name="nightly"), 2, reason="node 'revenue' failed")
    login_demo("operator")
    page.goto("/?team=all")
    flaky_item = page.locator(f"#failure-{flaky.pk}")
    expect(flaky_item).to_have_attribute("data-state", "open")
    expect(flaky_item).to_contain_text("6 failures")
    expect(page.locator(f"#failure-{orders.pk}")).to_have_attribute("data-state", "recovered")
    expect(page.locator("#failures")).to_contain_text("Owned by analytics; you can view it but not act on it.")
    shot("overview-failures")
    flaky_item.get_by_role("link", name="Acknowledge…").click()
    page.fill("textarea[name=note]", "vendor feed is down, ticket OPS-12")
    page.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(".messages")).to_contain_text("Failures of flaky_feed acknowledged")
    page.goto("/?team=all")
    acknowledged = page.locator(f"#failures-acknowledged #failure-{flaky.pk}")
    expect(acknowledged).to_contain_text("Acknowledged by operator")
    expect(acknowledged).to_contain_text("vendor feed is down, ticket OPS-12")
    assert FailureAck.objects.get().actor == "operator"
    assert AuditEntry.objects.filter(action="failure.acknowledge", actor="operator").exists()
    page.select_option("#team-filter", "analytics")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(f"#failure-{flaky.pk}")).to_have_count(0)
    login_demo("operator", on=phone)
    phone.goto("/?team=all")
    expect(phone.locator("#failures-card")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    shot_of(phone, "phone-overview-failures")


def test_a_rerun_into_an_open_breaker_offers_reset_and_rerun(page, login_demo, make_run, shot):
    flaky = Schedule.objects.get(name="flaky_feed")
    failed = _failures(make_run, flaky, 3)[-1]
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=3,
                                                breaker_opened_at=timezone.now(), breaker_current_cooldown_seconds=120)
    login_demo("operator")
    page.goto(f"/runs/{failed.pk}/")
    expect(page.locator("#breaker-warning")).to_contain_text("a re-run now would be BLOCKED (circuit open)")
    assert page.locator("#rerun").count() == 0
    shot("rerun-open-breaker")
    page.fill("#reset-rerun-reason", "the feed is back")
    page.click("#reset-rerun")
    expect(page.locator(".messages")).to_contain_text("Breaker reset.")
    new = Run.objects.get(rerun_of=failed)
    assert page.url.endswith(f"/runs/{new.pk}/") and new.status == RunStatus.QUEUED
    assert Schedule.objects.get(pk=flaky.pk).breaker_status == BreakerStatus.CLOSED


def test_the_demo_admin_adds_a_user_on_the_admins_own_pages(page, login_demo, shot):
    login_demo("admin")
    response = page.goto("/admin/auth/user/")
    assert response.status == 200
    page.goto("/admin/auth/user/add/")
    page.fill("#id_username", "newbie")
    page.fill("#id_password1", "a-Long-pw-9921!")
    page.fill("#id_password2", "a-Long-pw-9921!")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("newbie")
    shot("admin-user-added")
    assert page.goto("/admin/auth/group/").status == 200


def test_a_cancelled_run_reads_as_cancelled_and_the_small_things_work(page, login_demo, make_run):
    compact = Schedule.objects.get(name="warehouse_compact")
    now = timezone.now()
    run = make_run(compact, RunStatus.QUEUED, attempt=2, max_attempts=6, started_at=None, finished_at=None,
                   reason="command exited with exit code 3; re-queued (attempt 2/6, in 1.0 s)")
    RunLogLine.objects.create(run=run, seq=1, at=now, level="ERROR", source="scheduler",
                              message="command exited with exit code 3")
    RunLogLine.objects.create(run=run, seq=2, at=now, level="ERROR", source="scheduler",
                              message="finished QUEUED: command exited with exit code 3; re-queued (attempt 2/6)")
    login_demo("operator")
    page.goto(f"/runs/{run.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.fill("#cancel-reason", "the table is gone for good")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#log-lines li").last).to_contain_text(
        "cancelled by operator before attempt 2 of 6 began: the table is gone for good")
    expect(page.locator("#attempt")).to_contain_text("1 of 6 (cancelled before attempt 2 began)")
    # the audit CSV's before/after are JSON
    text = page.request.get("/audit/export.csv?action=run.cancel").text()
    row = next(csv.DictReader(io.StringIO(text)))
    assert json.loads(row["after"]) == {"status": "CANCELLED"}
    # the favicon is served
    icon = page.request.get("/favicon.ico")
    assert icon.status == 200 and "svg" in icon.headers["content-type"]
