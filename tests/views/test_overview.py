from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import BreakerStatus, GovernanceTick, RunStatus, Schedule

URL = reverse("scheduler:overview")


def test_it_shows_running_runs_with_schedule_pipeline_and_worker(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    run = make_run(schedule, RunStatus.RUNNING, worker_id="cluster-a/7")
    page = viewer_client.get(URL).content.decode()
    assert f'data-run="{run.pk}" data-status="RUNNING"' in page
    assert "orders" in page and "demo.noop" in page and "cluster-a/7" in page


def test_it_shows_queue_depth_against_the_class_limit(viewer_client, make_schedule, make_run, standard_class):
    schedule = make_schedule("orders")
    for _ in range(3):
        make_run(schedule, RunStatus.QUEUED)
    make_run(schedule, RunStatus.RUNNING)
    response = viewer_client.get(URL)
    queue = {q["name"]: q for q in response.context["queue"]}
    assert queue["standard"] == {"name": "standard", "limit": 4, "running": 1, "queued": 3, "waiting": 0}
    assert "1 / 4" in response.content.decode()


def test_it_warns_when_the_governance_loop_is_late(viewer_client, db):
    GovernanceTick.objects.create(started_at=timezone.now() - timedelta(hours=1))
    page = viewer_client.get(URL).content.decode()
    assert 'id="governance-late"' in page


def test_it_does_not_warn_when_the_last_tick_is_recent(viewer_client, db):
    GovernanceTick.objects.create(started_at=timezone.now())
    page = viewer_client.get(URL).content.decode()
    assert 'id="governance-ok"' in page and 'id="governance-late"' not in page


def test_it_lists_open_breakers_and_recent_failures(viewer_client, make_schedule, make_run):
    schedule = make_schedule("flaky", target_id="demo.flaky")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    failed = make_run(schedule, RunStatus.FAILED, reason="boom: source down")
    page = viewer_client.get(URL).content.decode()
    assert "boom: source down" in page and f"#{failed.pk}" in page
    assert "s-open" in page


def test_htmx_gets_only_the_live_partial_that_polls_while_visible(viewer_client, db):
    response = viewer_client.get(URL, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="live"')
    assert "visibilityState" in body and "<html" not in body


@pytest.mark.parametrize("n", [5, 40])
def test_the_query_count_does_not_grow_with_the_number_of_runs(
    viewer_client, make_schedule, make_run, n, django_assert_max_num_queries
):
    schedules = [make_schedule(f"s{i}") for i in range(3)]
    for i in range(n):
        make_run(schedules[i % 3], RunStatus.RUNNING)
        make_run(schedules[i % 3], RunStatus.FAILED)
    # one per "needs attention" kind (missed deadlines is the 20th), five for the failure work list; issue 37 adds
    # two for since when the failing schedules fail, one more for the work list's streaks, two for the running
    # runs' typical durations and one for the holders of full classes (queued runs' reasons): each for all rows
    with django_assert_max_num_queries(31):
        assert viewer_client.get(URL).status_code == 200
