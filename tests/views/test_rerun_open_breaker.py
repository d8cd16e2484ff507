"""A re-run into an open breaker: the run page tells before, not after (issue 23, point 3)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus, Schedule, TriggerKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def tripped(make_schedule, make_run):
    """A schedule whose breaker opened a minute ago with a 10-minute cooldown, and its failed run."""
    schedule = make_schedule("flaky_feed", target_id="demo.flaky")
    Schedule.objects.filter(pk=schedule.pk).update(
        breaker_status=BreakerStatus.OPEN, breaker_failures=3, breaker_opened_at=timezone.now() - timedelta(minutes=1),
        breaker_current_cooldown_seconds=600)
    schedule.refresh_from_db()
    return schedule, make_run(schedule, RunStatus.FAILED, reason="feed down")


def test_the_run_page_warns_and_offers_reset_and_rerun_to_whoever_may_reset(operator_client, tripped):
    _, failed = tripped
    page = operator_client.get(reverse("scheduler:run_detail", args=[failed.pk])).content.decode()
    assert 'id="breaker-warning"' in page and "a re-run now would be BLOCKED (circuit open)" in page
    assert 'name="reset_breaker" value="1"' in page and "Reset the breaker and re-run" in page
    assert 'id="rerun"' not in page  # no plain re-run that would only be blocked


def test_reset_and_rerun_closes_the_breaker_and_queues_the_rerun_with_both_audited(operator_client, operator,
                                                                                 tripped):
    schedule, failed = tripped
    response = operator_client.post(reverse("scheduler:run_rerun", args=[failed.pk]),
                                    {"reset_breaker": "1", "reason": "feed is back"})
    new = Run.objects.get(rerun_of=failed)
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[new.pk])
    assert (new.status, new.trigger_kind) == (RunStatus.QUEUED, TriggerKind.RERUN)
    schedule.refresh_from_db()
    assert (schedule.breaker_status, schedule.breaker_failures) == (BreakerStatus.CLOSED, 0)
    assert AuditEntry.objects.get(action="breaker.reset").actor == "olivia"
    assert AuditEntry.objects.get(action="run.rerun").reason == "feed is back"


def test_someone_who_may_not_reset_is_told_why_the_rerun_would_be_blocked(client, make_user, default_team, tripped):
    from django.contrib.auth.models import Permission

    user = make_user("tom", "operator")
    default_team.members.add(user)
    user.groups.first().permissions.remove(Permission.objects.get(codename="reset_breaker"))
    client.force_login(user)
    _, failed = tripped
    page = client.get(reverse("scheduler:run_detail", args=[failed.pk])).content.decode()
    assert "a re-run now would be BLOCKED (circuit open)" in page and 'name="reset_breaker"' not in page
    assert "one test run is admitted" in page and "may view but not reset the breaker of schedules" in page
    response = client.post(reverse("scheduler:run_rerun", args=[failed.pk]), {"reset_breaker": "1"})
    assert response.status_code == 302 and not Run.objects.filter(rerun_of=failed).exists()
    assert Schedule.objects.get(pk=failed.schedule_id).breaker_status == BreakerStatus.OPEN
    assert AuditEntry.objects.filter(action="permission.denied", actor="tom").exists()


def test_a_closed_breaker_keeps_the_plain_rerun(operator_client, make_schedule, make_run):
    failed = make_run(make_schedule("orders"), RunStatus.FAILED)
    page = operator_client.get(reverse("scheduler:run_detail", args=[failed.pk])).content.decode()
    assert 'id="rerun"' in page and 'id="breaker-warning"' not in page


def test_after_the_cooldown_the_rerun_is_offered_as_the_breakers_test_run(operator_client, tripped):
    schedule, failed = tripped
    Schedule.objects.filter(pk=schedule.pk).update(breaker_opened_at=timezone.now() - timedelta(hours=1))
    page = operator_client.get(reverse("scheduler:run_detail", args=[failed.pk])).content.decode()
    assert 'id="rerun"' in page and "the breaker's test run" in page and 'id="breaker-warning"' not in page


def test_the_schedule_pages_run_now_warns_too(operator_client, tripped):
    schedule, _ = tripped
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert 'id="run-now-breaker"' in page and "now would be BLOCKED (circuit open)" in page
