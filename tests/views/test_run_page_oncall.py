"""The run page: its log (followed while it runs), its actions inside the part that refreshes, re-run."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AuditEntry, Run, RunLogLine, RunStatus, Schedule, TriggerKind


def _log(run, *messages, level="INFO"):
    start = RunLogLine.objects.filter(run=run).count()
    for i, message in enumerate(messages, start=start + 1):
        RunLogLine.objects.create(run=run, seq=i, at=timezone.now(), level=level, source="tests.pipeline",
                                  message=message)


def test_the_run_page_shows_its_log_lines_with_level_and_source(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.FAILED)
    _log(run, "connecting", "Traceback (most recent call last):\n  boom", level="ERROR")
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="log-lines"' in page and "connecting" in page and "Traceback (most recent call last):\n  boom" in page
    assert 'class="l-error"' in page and "tests.pipeline" in page


def test_a_running_runs_log_is_followed_from_the_last_line(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    _log(run, "one", "two")
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    log_url = reverse("scheduler:run_log", args=[run.pk])
    assert f'hx-get="{log_url}?after=2"' in page
    _log(run, "three")
    more = viewer_client.get(log_url, {"after": 2}, headers={"HX-Request": "true"}).content.decode()
    assert "three" in more and "two" not in more
    assert 'id="log-follow"' in more and 'hx-swap-oob="true"' in more and f"{log_url}?after=3" in more


def test_a_finished_runs_log_stops_following_after_the_grace(viewer_client, make_schedule, make_run):
    now = timezone.now()
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, finished_at=now - timedelta(minutes=5))
    log_url = reverse("scheduler:run_log", args=[run.pk])
    more = viewer_client.get(log_url, {"after": 0}, headers={"HX-Request": "true"}).content.decode()
    assert "hx-get" not in more and "the log is complete" in more
    just_now = make_run(make_schedule("customers"), RunStatus.SUCCEEDED, finished_at=now)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[just_now.pk])).content.decode()
    assert "?after=0" in page  # the worker writes the last lines just after the final status


def test_the_whole_log_is_plain_text_without_htmx(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    _log(run, "hello <b>")
    response = viewer_client.get(reverse("scheduler:run_log", args=[run.pk]))
    assert response["Content-Type"].startswith("text/plain")
    assert "INFO    tests.pipeline: hello <b>" in response.content.decode()


def test_the_log_needs_view_permission(client, make_user, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    url = reverse("scheduler:run_log", args=[run.pk])
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(make_user("nobody"))
    assert client.get(url).status_code == 403


def test_a_running_run_offers_cancel_and_a_finished_one_offers_rerun_inside_the_live_part(
    operator_client, make_schedule, make_run
):
    schedule = make_schedule("orders")
    run = make_run(schedule, RunStatus.RUNNING)
    url = reverse("scheduler:run_detail", args=[run.pk])
    live = operator_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="cancel-form"' in live and 'id="rerun-form"' not in live
    assert 'data-confirm="Cancel run' in live
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, finished_at=timezone.now())
    live = operator_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="cancel-form"' not in live and 'id="rerun-form"' in live
    assert 'id="rerun-downstream"' not in live  # nothing depends on orders
    make_schedule("report", trigger_kind="upstream", depends_on=["orders"])
    live = operator_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="rerun-downstream"' in live


def test_a_viewer_sees_no_rerun_and_is_refused(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.FAILED)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="rerun-form"' not in page
    response = viewer_client.post(reverse("scheduler:run_rerun", args=[run.pk]))
    assert response.status_code == 403
    assert Run.objects.count() == 1 and not AuditEntry.objects.filter(action="run.rerun").exists()


def test_an_operator_reruns_and_lands_on_the_new_run(operator_client, operator, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.FAILED, params={"day": "2026-03-01"}, window_high="40")
    response = operator_client.post(reverse("scheduler:run_rerun", args=[run.pk]), {"downstream": "1",
                                                                                      "reason": "fixed"})
    new = Run.objects.exclude(pk=run.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[new.pk])
    assert new.trigger_kind == TriggerKind.RERUN and new.params == {"day": "2026-03-01"} and new.window_high == "40"
    assert new.propagate is True and new.rerun_of_id == run.pk
    assert AuditEntry.objects.get(action="run.rerun").actor == operator.username
    page = operator_client.get(response["Location"]).content.decode()
    assert 'id="rerun-of"' in page


def test_rerun_of_a_disabled_schedule_asks_for_a_reason_and_changes_nothing_without_one(
    operator_client, make_schedule, make_run
):
    schedule = make_schedule("orders")
    run = make_run(schedule, RunStatus.FAILED)
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    page = operator_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert "(required: orders is disabled)" in page
    response = operator_client.post(reverse("scheduler:run_rerun", args=[run.pk]), follow=True)
    assert "orders&#x27; is disabled: give a reason" in response.content.decode()
    assert Run.objects.count() == 1


def test_rerun_refuses_get_and_a_run_that_is_still_running(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    url = reverse("scheduler:run_rerun", args=[run.pk])
    assert operator_client.get(url).status_code == 405
    response = operator_client.post(url, follow=True)
    assert "only a finished run can be re-run" in response.content.decode()
    assert Run.objects.count() == 1


@pytest.mark.parametrize("reason", ["x" * 501, "a\x00b"])
def test_a_bad_reason_names_the_field(operator_client, make_schedule, make_run, reason):
    run = make_run(make_schedule("orders"), RunStatus.FAILED)
    response = operator_client.post(reverse("scheduler:run_rerun", args=[run.pk]), {"reason": reason}, follow=True)
    assert "reason:" in response.content.decode()
    assert Run.objects.count() == 1


def test_a_run_cancelled_before_its_next_attempt_counts_only_the_attempts_that_began(viewer_client, make_schedule,
                                                                                    make_run):
    run = make_run(make_schedule("c1"), RunStatus.CANCELLED, attempt=4, max_attempts=6, started_at=None)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert "3 of 6 <span class=\"muted\">(cancelled before attempt 4 began)</span>" in page
    assert "4 of 6" not in page
