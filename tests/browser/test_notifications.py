"""The "send a test notification" button in a real browser: htmx answers inline, success and refusal."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_tests_a_schedules_channels_and_reads_the_answer_inline(page, login, shot, make_user, make_schedule,
                                                                        default_team, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True  # to save it here; the served site (setting off) refuses to send
    schedule = make_schedule("orders", alert_channels=["mailto://oncall@example.com",
                                                       "json://etl:hunter2-secret@127.0.0.1:9/alerts"])
    ada = make_user("ada", "admin")
    default_team.members.add(ada)  # the owning team's admin
    login(ada)
    page.goto(f"/schedules/{schedule.pk}/")
    channels = page.locator("#schedule-channels")
    expect(channels).to_contain_text("json://etl:****@127.0.0.1:9/alerts")
    assert "hunter2-secret" not in page.content()
    url = page.url
    channels.locator("li").nth(0).locator("button").click()
    expect(page.locator("#schedule-channel-test-0")).to_contain_text("sent")
    channels.locator("li").nth(1).locator("button").click()
    expect(page.locator("#schedule-channel-test-1")).to_contain_text("ETL_ALERT_ALLOW_PRIVATE_URLS")
    assert page.url == url  # answered in place, no reload
    shot("schedule-channels")
    assert sorted(AuditEntry.objects.filter(action="schedule.test_channel").values_list("after__ok", flat=True)) == [
        False, True]
