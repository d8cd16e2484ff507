from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, Run, RunStatus, TriggerKind, WorkloadClass

URL = reverse("scheduler:runs")


def _ids(response) -> list[int]:
    return [r.pk for r in response.context["page"]["runs"]]


def test_it_lists_runs_newest_first(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    runs = [make_run(schedule) for _ in range(3)]
    assert _ids(viewer_client.get(URL)) == [r.pk for r in reversed(runs)]


def test_it_filters_by_status_schedule_class_and_trigger_kind(viewer_client, make_schedule, make_run):
    heavy = WorkloadClass.objects.get(name="heavy")
    a, b = make_schedule("a"), make_schedule("b", workload_class=heavy)
    failed = make_run(a, RunStatus.FAILED)
    make_run(a, RunStatus.SUCCEEDED)
    on_b = make_run(b, RunStatus.SUCCEEDED, trigger_kind=TriggerKind.CRON)
    assert _ids(viewer_client.get(URL, {"status": "FAILED"})) == [failed.pk]
    assert _ids(viewer_client.get(URL, {"schedule": "b"})) == [on_b.pk]
    assert _ids(viewer_client.get(URL, {"workload_class": "heavy"})) == [on_b.pk]
    assert _ids(viewer_client.get(URL, {"trigger_kind": "cron"})) == [on_b.pk]


def test_it_filters_by_a_date_range_of_whole_utc_days(viewer_client, make_schedule, make_run, now):
    schedule = make_schedule("orders")
    old = make_run(schedule, queued_at=now - timedelta(days=3))
    make_run(schedule, queued_at=now)
    day = (now - timedelta(days=3)).date().isoformat()
    assert _ids(viewer_client.get(URL, {"since": day, "until": day})) == [old.pk]


def test_a_bad_filter_names_the_field_and_shows_all_runs(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    make_run(schedule)
    response = viewer_client.get(URL, {"status": "EXPLODED", "since": "yesterday"})
    assert response.status_code == 200
    assert "EXPLODED is not one of the available choices" in response.content.decode()
    assert response.context["form"].errors.keys() == {"status", "since"}


def test_a_bad_filter_value_keeps_the_other_filters(viewer_client, make_schedule, make_run):
    a, b = make_schedule("a"), make_schedule("b")
    failed_a = make_run(a, RunStatus.FAILED)
    make_run(a, RunStatus.SUCCEEDED)
    make_run(b, RunStatus.FAILED)
    response = viewer_client.get(URL, {"status": "FAILED", "schedule": "a", "since": "yesterday"})
    assert response.context["form"].errors.keys() == {"since"}
    assert _ids(response) == [failed_a.pk]
    response = viewer_client.get(URL, {"status": "FAILED", "since": "2026-03-05", "until": "2026-03-01"})
    assert response.context["form"].errors.keys() == {"until"}
    assert _ids(response) == []  # From still applies: nothing failed after 5 March


def test_it_pages_by_id_cursor_without_counting(
    viewer_client, make_schedule, make_run, monkeypatch, django_assert_max_num_queries
):
    from scheduler.views import pages

    monkeypatch.setattr(pages, "PAGE_SIZE", 2)
    schedule = make_schedule("orders")
    runs = [make_run(schedule) for _ in range(5)]
    first = viewer_client.get(URL)
    assert _ids(first) == [runs[4].pk, runs[3].pk]
    older = first.context["page"]["older"]
    second = viewer_client.get(URL, {"before": older})
    assert _ids(second) == [runs[2].pk, runs[1].pk]
    newer = second.context["page"]["newer"]
    back = viewer_client.get(URL, {"after": newer})
    assert _ids(back) == [runs[4].pk, runs[3].pk]
    last = viewer_client.get(URL, {"before": runs[1].pk})
    assert _ids(last) == [runs[0].pk] and last.context["page"]["older"] is None


def test_the_runs_page_never_counts_the_table(viewer_client, make_schedule, make_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    make_run(make_schedule("orders"))
    with CaptureQueriesContext(connection) as queries:
        viewer_client.get(URL, {"status": "SUCCEEDED"})
    assert not [q for q in queries if "COUNT(" in q["sql"].upper() and "scheduler_run" in q["sql"]]


@pytest.mark.parametrize("n", [3, 60])
def test_the_query_count_does_not_grow_with_the_page(
    viewer_client, make_schedule, make_run, n, django_assert_max_num_queries
):
    schedules = [make_schedule(f"s{i}") for i in range(4)]
    for i in range(n):
        make_run(schedules[i % 4])
    with django_assert_max_num_queries(9):
        viewer_client.get(URL)


def test_htmx_polls_get_only_the_table(viewer_client, db):
    body = viewer_client.get(URL, headers={"HX-Request": "true"}).content.decode()
    assert body.lstrip().startswith('<div id="runs-table"') and "<html" not in body


def test_run_detail_shows_params_window_attempts_and_error(viewer_client, make_schedule, make_run):
    run = make_run(
        make_schedule("orders"),
        RunStatus.FAILED,
        params={"day": "2026-03-01"},
        window_low="10",
        window_high="20",
        attempt=2,
        max_attempts=3,
        error="Traceback: ValueError: bad row",
        rows_loaded=7,
    )
    page = html.unescape(viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode())
    # failed with an attempt left: not "2 of 3", as though a third were coming (issue 37)
    for text in ['"day": "2026-03-01"', "(10, 20]", '2 <span class="muted">(not retried: ', "ValueError: bad row",
                 ">7<"]:
        assert text in page, text


def test_run_detail_says_why_a_queued_run_waits(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    response = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk]))
    assert response.context["waiting_reason"]
    assert 'id="waiting-reason"' in response.content.decode()


def test_run_detail_names_the_upstream_that_blocked_it(viewer_client, make_schedule, make_run):
    up = make_schedule("extract")
    down = make_schedule("load", depends_on=[up], trigger_kind="upstream")
    run = make_run(down, RunStatus.BLOCKED, reason="upstream extract failed", blocked_by=up)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert "upstream extract failed" in page
    assert reverse("scheduler:schedule_detail", args=[up.pk]) in page


def test_run_detail_shows_the_upstream_runs_the_run_stands_for(viewer_client, make_schedule, make_run, now):
    from scheduler.models import RunUpstream

    extract, other = make_schedule("extract"), make_schedule("other")
    load = make_schedule("load", depends_on=[extract, other], trigger_kind="upstream")
    up = make_run(extract, RunStatus.SUCCEEDED, logical_time=now - timedelta(minutes=10))
    run = make_run(load, RunStatus.WAITING, logical_time=now - timedelta(minutes=10))
    RunUpstream.objects.create(run=run, upstream_schedule=extract, upstream_run=up, pinned=True)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert 'id="upstream-runs"' in page
    assert reverse("scheduler:run_detail", args=[up.pk]) in page and "it triggered this run" in page
    # still waiting: the other upstream has no run of its logical time yet
    assert "none yet" in page and "(judged now)" in page


def test_run_detail_draws_a_workflow_report_as_table_and_graph(viewer_client, make_schedule, make_run):
    schedule = make_schedule("wf", target_kind="workflow", target_id=_any_workflow())
    report = {
        "records": [
            {"task_id": "extract", "outcome": "SUCCESS", "rows": 5, "reason": ""},
            {"task_id": "transform", "outcome": "FAILED", "rows": 0, "reason": "ValueError: x"},
        ],
        "skipped": [],
        "blocked": ["load"],
        "ok": False,
    }
    run = make_run(schedule, RunStatus.FAILED, report=report)
    response = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk]))
    page = response.content.decode()
    assert '<section class="card" id="report">' in page and "<svg" in page
    outcomes = {r["task"]: r["outcome"] for r in response.context["report_rows"]}
    assert outcomes == {"extract": "SUCCEEDED", "transform": "FAILED", "load": "BLOCKED"}
    assert 'class="node n-blocked"' in page


def _any_workflow() -> str:
    from scheduler.pipelines.registry import all_workflows

    return sorted(w.id for w in all_workflows())[0]


def test_run_detail_of_an_unknown_run_is_404(viewer_client, db):
    assert viewer_client.get(reverse("scheduler:run_detail", args=[999999])).status_code == 404


def test_an_operator_cancels_a_queued_run_and_it_is_audited(operator_client, operator, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), {"reason": "wrong params"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert AuditEntry.objects.filter(action="run.cancel", actor=operator.username, reason="wrong params").exists()


def test_cancelling_a_finished_run_says_so_and_changes_nothing(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), follow=True)
    assert "already SUCCEEDED" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_blocked_list_shows_the_reason_and_the_upstream_or_breaker(viewer_client, make_schedule, make_run):
    up = make_schedule("extract")
    down = make_schedule("load", depends_on=[up], trigger_kind="upstream")
    by_upstream = make_run(down, RunStatus.BLOCKED, reason="upstream extract failed", blocked_by=up)
    by_breaker = make_run(up, RunStatus.BLOCKED, reason="circuit open", blocked_by=up)
    make_run(up, RunStatus.SKIPPED, reason="still fresh")
    response = viewer_client.get(reverse("scheduler:blocked"))
    page = response.content.decode()
    assert [r.pk for r in response.context["page"]["runs"]] == [by_breaker.pk, by_upstream.pk]
    assert "upstream <a" in page and "breaker of <a" in page and "circuit open" in page


def test_blocked_rows_show_the_breaker_state_at_the_time_not_today(viewer_client, make_schedule, make_run):
    schedule = make_schedule("feed")
    make_run(schedule, RunStatus.BLOCKED, reason="circuit open", blocked_by=schedule)
    make_run(schedule, RunStatus.BLOCKED, reason="circuit half-open: test run in progress", blocked_by=schedule)
    # since then the breaker closed again: the old rows must not say "closed"
    page = viewer_client.get(reverse("scheduler:blocked")).content.decode()
    assert page.count("(open at the time)") == 1 and page.count("(half-open at the time)") == 1
    assert "(closed)" not in page


def test_skipped_list_shows_only_skipped_runs_with_their_reason(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    skipped = make_run(schedule, RunStatus.SKIPPED, reason="still fresh: last success 5 min ago")
    make_run(schedule, RunStatus.SUCCEEDED)
    response = viewer_client.get(reverse("scheduler:skipped"))
    assert [r.pk for r in response.context["page"]["runs"]] == [skipped.pk]
    assert "still fresh: last success 5 min ago" in response.content.decode()


def test_the_last_day_the_picker_offers_means_no_upper_bound(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"))
    response = viewer_client.get(URL, {"since": "0001-01-01", "until": "9999-12-31"})
    assert response.status_code == 200 and _ids(response) == [run.pk]
