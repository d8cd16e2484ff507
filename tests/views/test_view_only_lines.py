"""Wherever a control is hidden for lack of a permission, the page says so in one line (issue 23, point 1)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from scheduler.models import RunStatus, Team
from scheduler.services.admission.backfills import backfill_submit

pytestmark = pytest.mark.django_db
VIEW_ONLY = "Owned by analytics; you can view it but not act on it."


@pytest.fixture
def theirs(make_schedule):
    return make_schedule("theirs", owner=Team.objects.create(name="analytics"),
                         watermark_config={"type": "integer", "column": "id", "initial": 0})


def test_another_teams_schedule_shows_its_owner_and_says_it_is_view_only(operator_client, theirs, make_schedule):
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[theirs.pk])).content.decode()
    assert VIEW_ONLY in page and 'id="run-now"' not in page and "Reset breaker" not in page
    ours = make_schedule("ours")
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[ours.pk])).content.decode()
    assert VIEW_ONLY not in page and 'id="run-now"' in page and "Owned by" in page


def test_the_schedules_list_names_the_view_only_teams_and_marks_their_rows(operator_client, theirs, make_schedule):
    make_schedule("ours")
    page = operator_client.get(reverse("scheduler:schedules") + "?team=all").content.decode()
    assert "Schedules of analytics are view only: you are not in that team." in page
    assert "view only: owned by analytics" in page


def test_a_viewer_is_told_once_that_the_group_only_views(viewer_client, make_schedule):
    make_schedule("ours")
    page = viewer_client.get(reverse("scheduler:schedules")).content.decode()
    assert "Your login (viewer) may view but not trigger schedules; an admin can add you to the operator group." in page


def test_the_run_page_says_why_there_is_no_rerun_or_cancel(operator_client, theirs, make_run):
    failed = make_run(theirs, RunStatus.FAILED)
    page = operator_client.get(reverse("scheduler:run_detail", args=[failed.pk])).content.decode()
    assert f"No re-run button: {VIEW_ONLY}" in page
    running = make_run(theirs, RunStatus.RUNNING)
    page = operator_client.get(reverse("scheduler:run_detail", args=[running.pk])).content.decode()
    assert "you may watch but not cancel it. Owned by analytics" in page


def test_a_backfill_of_another_team_says_why_there_are_no_buttons(operator_client, theirs):
    backfill = backfill_submit(schedule=theirs, start=0, end=20, window=10, reason="r", requested_by="tests")
    page = operator_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk])).content.decode()
    assert VIEW_ONLY in page and 'id="backfill-actions"' not in page


def test_the_blocked_list_says_why_there_is_no_breaker_reset(operator_client, theirs, make_run):
    from scheduler.models import BreakerStatus, Schedule

    Schedule.objects.filter(pk=theirs.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=3)
    make_run(theirs, RunStatus.BLOCKED, reason="circuit open", blocked_by=theirs)
    page = operator_client.get(reverse("scheduler:blocked") + "?team=all").content.decode()
    assert VIEW_ONLY in page and "Reset breaker of theirs" not in page
