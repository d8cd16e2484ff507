"""A run that missed its deadline: listed under "Needs attention" (a day, until it succeeds) and said on its page."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import RunStatus, Schedule, Team
from scheduler.services.oversight.deadlines import deadlines_check

URL = reverse("scheduler:overview")


def _deadline_items(response) -> list[dict]:
    return [item for item in response.context["attention"] if item["kind"] == "deadline"]


@pytest.fixture
def nightly(make_schedule):
    return make_schedule("nightly", deadline_seconds=3600)


def test_a_run_governance_found_past_its_deadline_is_listed_linking_to_it(viewer_client, nightly, make_run):
    now = timezone.now()
    run = make_run(nightly, RunStatus.RUNNING, logical_time=now - timedelta(hours=2))
    assert deadlines_check(now=now) == [run.pk]
    response = viewer_client.get(URL)
    [item] = _deadline_items(response)
    assert item["href"] == reverse("scheduler:run_detail", args=[run.pk])
    assert item["title"] == f"run #{run.pk} of nightly"
    assert "missed its deadline (3600 s after logical time" in item["detail"] and "it is RUNNING" in item["detail"]
    body = response.content.decode()
    assert 'data-kind="deadline"' in body and "Missed deadline" in body


def test_it_leaves_the_list_once_it_succeeded_or_was_cancelled_or_after_a_day(viewer_client, nightly, make_run):
    now = timezone.now()
    done = make_run(nightly, RunStatus.QUEUED, logical_time=now - timedelta(hours=2))
    cancelled = make_run(nightly, RunStatus.QUEUED, logical_time=now - timedelta(hours=3))
    make_run(nightly, RunStatus.FAILED, logical_time=now - timedelta(hours=30),
                   deadline_missed_at=now - timedelta(hours=25))
    still = make_run(nightly, RunStatus.FAILED, logical_time=now - timedelta(hours=4))
    deadlines_check(now=now)
    type(done).objects.filter(pk=done.pk).update(status=RunStatus.SUCCEEDED)
    type(cancelled).objects.filter(pk=cancelled.pk).update(status=RunStatus.CANCELLED)
    listed = [item["href"] for item in _deadline_items(viewer_client.get(URL))]
    assert listed == [reverse("scheduler:run_detail", args=[still.pk])]


def test_another_teams_missed_deadline_is_not_in_my_list(operator_client, nightly, make_schedule, make_run):
    now = timezone.now()
    theirs = make_schedule("theirs", deadline_seconds=60)
    Schedule.objects.filter(pk=theirs.pk).update(owner=Team.objects.create(name="payments"))
    ours = make_run(nightly, RunStatus.QUEUED, logical_time=now - timedelta(hours=2))
    make_run(theirs, RunStatus.QUEUED, logical_time=now - timedelta(hours=2))
    deadlines_check(now=now)
    assert [i["href"] for i in _deadline_items(operator_client.get(URL))] == [
        reverse("scheduler:run_detail", args=[ours.pk])]


def test_the_run_page_says_it_missed_its_deadline(viewer_client, nightly, make_run):
    now = timezone.now()
    run = make_run(nightly, RunStatus.FAILED, logical_time=now - timedelta(hours=2))
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="deadline-missed"' not in page
    deadlines_check(now=now)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="deadline-missed"' in page
    assert "This run missed its deadline (3600 s after logical time" in page
