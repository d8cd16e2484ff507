"""Is this run's time normal, why does it wait, and counters that say what they mean (issue 37, points 5, 9, 12)."""
from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduler.models import NodeRecord, RunStatus, WorkloadClass
from scheduler.run_facts import UNUSUAL_FACTOR, Elapsed, typical_durations
from scheduler.services.admission.waits import wait_reasons

pytestmark = pytest.mark.django_db
S = RunStatus


def _typical_14s(make_run, schedule, real, n=5):
    for i in range(n):
        start = real - timedelta(hours=2, minutes=i)
        make_run(schedule, S.SUCCEEDED, started_at=start, finished_at=start + timedelta(seconds=12 + i))  # 14 s


def test_the_typical_duration_is_the_median_of_the_last_successes_for_every_schedule_at_once(make_schedule,
                                                                                              make_run):
    real = timezone.now()
    a, b, none = make_schedule("a"), make_schedule("b"), make_schedule("none")
    _typical_14s(make_run, a, real)
    make_run(a, S.FAILED, started_at=real - timedelta(hours=1), finished_at=real)  # a failure is no measure
    for seconds in (100, 200, 300):
        make_run(b, S.SUCCEEDED, started_at=real - timedelta(seconds=seconds), finished_at=real)
    with CaptureQueriesContext(connection) as queries:
        typical = typical_durations([a.pk, b.pk, none.pk], last=2)
    assert len(queries) == 2 and typical == {a.pk: 15.5, b.pk: 250.0}  # the last 2 successes of each
    assert typical_durations([a.pk])[a.pk] == 14.0


def test_elapsed_is_told_beside_typical_and_marked_past_the_factor():
    assert Elapsed(234, 14).factor_text == "17×" and Elapsed(234, 14).unusual
    assert Elapsed(20, 14).factor_text == "1.4×" and not Elapsed(20, 14).unusual
    assert Elapsed(14 * UNUSUAL_FACTOR, 14).unusual and not Elapsed(5, 14).factor_text
    assert Elapsed(30, None).factor is None and not Elapsed(30, None).unusual


def test_the_overview_and_the_run_page_put_a_hanging_run_beside_its_typical_time(viewer_client, make_schedule,
                                                                                 make_run):
    real = timezone.now()
    schedule = make_schedule("orders")
    _typical_14s(make_run, schedule, real)
    hanging = make_run(schedule, S.RUNNING, started_at=real - timedelta(minutes=3, seconds=54),
                       heartbeat_at=real, admitted_at=real - timedelta(minutes=4))
    overview = viewer_client.get(reverse("scheduler:overview") + "?team=all").content.decode()
    row = overview[overview.index(f'id="running-{hanging.pk}"'):]
    row = row[:row.index("</tr>")]
    assert 'class="elapsed unusual"' in row and "· typical 14 s, 17×" in row and "3 min 5" in row
    page = viewer_client.get(reverse("scheduler:run_detail", args=[hanging.pk])).content.decode()
    assert 'id="elapsed"' in page and "typical 14 s, 17×" in page and "unusually long" in page
    assert "not yet: it is running" in page and "Finished</dt><dd id=\"finished\">—" not in page


def test_a_run_within_its_typical_time_is_not_highlighted(viewer_client, make_schedule, make_run):
    real = timezone.now()
    schedule = make_schedule("orders")
    _typical_14s(make_run, schedule, real)
    run = make_run(schedule, S.RUNNING, started_at=real - timedelta(seconds=5), heartbeat_at=real)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'class="elapsed"' in page and "typical 14 s</span>" in page and "unusually long" not in page


def test_a_run_waiting_on_a_full_class_names_its_holders_in_the_list_the_overview_and_its_page(
        viewer_client, make_schedule, make_run):
    heavy, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": 2})
    big = make_schedule("big", workload_class=heavy)
    holders = [make_run(big, S.RUNNING, workload_class=heavy) for _ in range(2)]
    queued = make_run(big, S.QUEUED, workload_class=heavy)
    expected = (f"class 'heavy' full (2/2): held by run #{holders[0].pk} of 'big', "
                f"run #{holders[1].pk} of 'big'")
    runs = html.unescape(viewer_client.get(reverse("scheduler:runs") + "?team=all").content.decode())
    assert expected in runs
    overview = viewer_client.get(reverse("scheduler:overview") + "?team=all")
    [group] = [g for g in overview.context["latest"] if g["run"].pk == queued.pk]
    assert group["wait_reason"] == expected
    page = viewer_client.get(reverse("scheduler:run_detail", args=[queued.pk]))
    assert page.context["waiting_reason"] == expected


def test_another_teams_holder_is_not_named(make_schedule, make_run, now, default_team):
    from scheduler.models import Team

    heavy, _ = WorkloadClass.objects.update_or_create(name="heavy", defaults={"concurrency_limit": 1})
    theirs = make_schedule("theirs", workload_class=heavy, owner=Team.objects.create(name="analytics"))
    make_run(theirs, S.RUNNING, workload_class=heavy)
    mine = make_run(make_schedule("mine", workload_class=heavy, owner=default_team), S.QUEUED,
                    workload_class=heavy)
    mine.refresh_from_db()
    reasons = wait_reasons([mine], now=now, team_ids=frozenset({default_team.pk}))
    assert reasons[mine.pk] == "class 'heavy' full (1/1): held by a run of another team"


def test_a_waiting_run_says_when_it_fails(viewer_client, make_schedule, make_run):
    real = timezone.now().replace(microsecond=0)
    up = make_schedule("extract")
    down = make_schedule("load", depends_on=[up], trigger_kind="upstream", max_wait_seconds=600)
    waiting = make_run(down, S.WAITING, queued_at=real, reason="waiting for upstream 'extract'")
    deadline = f"{real + timedelta(seconds=600):%Y-%m-%d %H:%M:%S} UTC"
    runs = html.unescape(viewer_client.get(reverse("scheduler:runs") + "?status=WAITING&team=all").content.decode())
    assert f"it fails as a dependency timeout at {deadline} (max wait 600 s)" in runs
    page = viewer_client.get(reverse("scheduler:run_detail", args=[waiting.pk]))
    assert f"it fails as a dependency timeout at {deadline}" in page.context["waiting_reason"]


def test_the_overviews_queued_and_waiting_counts_link_to_those_runs(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    make_run(schedule, S.WAITING)
    page = viewer_client.get(reverse("scheduler:overview") + "?team=all").content.decode()
    link = f'{reverse("scheduler:runs")}?status=WAITING&amp;workload_class=standard&amp;team=all'
    assert f'<a href="{link}" class="queue-link"' in page
    listed = viewer_client.get(html.unescape(link))
    assert [r.status for r in listed.context["page"]["runs"]] == [S.WAITING]


@pytest.mark.parametrize("reason, why", [
    ("node 'n3' failed: source down", "a workflow's failed node is not retried as a whole"),
    ("permanent error, not retried: ValueError: bad config", "its error is marked permanent"),
    ("dependency timeout: waited more than 60 s", "a dependency timeout is final"),
])
def test_a_failed_run_with_attempts_left_says_it_was_not_retried_and_why(viewer_client, make_schedule, make_run,
                                                                         reason, why):
    run = make_run(make_schedule("orders"), S.FAILED, attempt=1, max_attempts=3, reason=reason)
    page = html.unescape(viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode())
    attempt = page[page.index('id="attempt"'):]
    attempt = attempt[:attempt.index("</dd>")]
    assert "of 3" not in attempt and f"(not retried: {why}" in attempt


def test_a_failed_run_that_spent_its_attempts_says_so(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), S.FAILED, attempt=3, max_attempts=3, reason="EtlError: down")
    page = html.unescape(viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode())
    assert '3 of 3 <span class="muted">(every attempt spent)</span>' in page


def test_node_outcomes_and_statuses_read_one_word_in_one_casing(viewer_client, make_schedule, make_run, now):
    schedule = make_schedule("wf", target_kind="workflow", target_id="demo.nightly")
    run = make_run(schedule, S.SUCCEEDED, report={"records": [
        {"task_id": "a", "outcome": "SUCCESS", "rows": 3, "reason": ""}], "skipped": [], "blocked": []})
    NodeRecord.objects.create(run=run, task_id="a", outcome="SUCCESS", attempts=1, started_at=now, finished_at=now,
                              rows=3, run_attempt=1)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    pill = '<span class="status s-succeeded">SUCCEEDED</span>'
    assert ">SUCCESS<" not in page and page.count(pill) == 2  # the report's row and the node record's
    schedules = viewer_client.get(reverse("scheduler:schedules") + "?team=all").content.decode()
    assert '<span class="status s-closed">CLOSED</span>' in schedules and ">Closed<" not in schedules
