"""The overview opens with what needs a person, each item a link; noise is folded away."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from scheduler.models import Backfill, BackfillWindow, BreakerStatus, RunStatus, Schedule, WindowStatus

URL = reverse("scheduler:overview")


def _attention(response) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for item in response.context["attention"]:
        out.setdefault(item["kind"], []).append(item)
    return out


def test_a_quiet_system_says_nothing_needs_a_person(viewer_client, make_schedule, make_run):
    make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    response = viewer_client.get(URL)
    assert response.context["attention"] == []
    assert 'id="all-clear"' in response.content.decode()


def test_a_failing_schedule_links_to_its_failed_run(viewer_client, make_schedule, make_run):
    orders = make_schedule("orders")
    make_run(orders, RunStatus.SUCCEEDED)
    failed = make_run(orders, RunStatus.FAILED, reason="source down")
    make_run(orders, RunStatus.SKIPPED)  # a skip is no verdict: still failing
    recovered = make_schedule("customers")
    make_run(recovered, RunStatus.FAILED)
    make_run(recovered, RunStatus.SUCCEEDED)
    items = _attention(viewer_client.get(URL))["failing"]
    assert [i["title"] for i in items] == ["orders"]
    assert items[0]["href"] == reverse("scheduler:run_detail", args=[failed.pk])
    assert "source down" in items[0]["detail"]


def test_open_breakers_stuck_runs_and_lost_workers_are_listed(viewer_client, make_schedule, make_run, now):
    flaky = make_schedule("flaky")
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    now = timezone.now()
    stuck = make_run(make_schedule("slow"), RunStatus.RUNNING, heartbeat_at=now - timedelta(minutes=10))
    make_run(make_schedule("fine"), RunStatus.RUNNING, heartbeat_at=now)
    lost = make_run(make_schedule("lost"), RunStatus.FAILED, queued_at=now - timedelta(minutes=30),
                    reason="worker lost: no heartbeat from a/1 since 11:00:00 UTC (attempt 3/3)")
    found = _attention(viewer_client.get(URL))
    assert [i["title"] for i in found["breaker"]] == ["flaky"]
    assert found["breaker"][0]["href"] == reverse("scheduler:schedule_detail", args=[flaky.pk])
    assert [i["href"] for i in found["stuck"]] == [reverse("scheduler:run_detail", args=[stuck.pk])]
    assert [i["href"] for i in found["lost"]] == [reverse("scheduler:run_detail", args=[lost.pk])]


def test_runs_waiting_past_half_their_max_wait_are_listed(viewer_client, make_schedule, make_run):
    now = timezone.now()
    schedule = make_schedule("report", max_wait_seconds=600)
    long = make_run(schedule, RunStatus.WAITING, queued_at=now - timedelta(seconds=400), reason="waiting for orders")
    make_run(schedule, RunStatus.WAITING, queued_at=now - timedelta(seconds=200))
    items = _attention(viewer_client.get(URL))["waiting"]
    assert [i["href"] for i in items] == [reverse("scheduler:run_detail", args=[long.pk])]
    assert "of at most 600 s" in items[0]["detail"] and "waiting for orders" in items[0]["detail"]


def test_backfills_with_failed_windows_are_listed(viewer_client, make_schedule):
    schedule = make_schedule("orders")
    backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to="20", window_size="10",
                                       total_windows=2, requested_by="alice", reason="x", created_at=timezone.now())
    BackfillWindow.objects.create(backfill=backfill, seq=1, low="0", high="10", status=WindowStatus.FAILED)
    BackfillWindow.objects.create(backfill=backfill, seq=2, low="10", high="20", status=WindowStatus.SUCCEEDED)
    items = _attention(viewer_client.get(URL))["backfill"]
    assert items[0]["href"] == reverse("scheduler:backfill_detail", args=[backfill.pk])
    assert "1 of 2 windows failed" in items[0]["detail"]


def test_a_schedule_breaking_its_freshness_objective_is_late_data(viewer_client, make_schedule):
    make_schedule("fresh", freshness_max_age_seconds=3600)
    late = make_schedule("orders", freshness_max_age_seconds=3600)
    Schedule.objects.filter(pk=late.pk).update(freshness_breached_at=timezone.now() - timedelta(minutes=5))
    items = _attention(viewer_client.get(URL))["late"]
    assert [i["title"] for i in items] == ["orders"]
    assert items[0]["href"] == reverse("scheduler:schedule_detail", args=[late.pk])
    assert items[0]["detail"].startswith("freshness objective (3600 s, last success) breached since ")


def test_attention_comes_first_and_recent_failures_above_latest_runs(viewer_client, make_schedule, make_run):
    make_run(make_schedule("orders"), RunStatus.FAILED)
    page = viewer_client.get(URL).content.decode()
    assert page.index('id="attention"') < page.index('id="running"') < page.index('id="failures"')
    assert page.index('id="failures"') < page.index('id="latest"')


def test_heartbeat_style_runs_fold_into_one_row(viewer_client, make_schedule, make_run):
    beat = make_schedule("heartbeat")
    beats = [make_run(beat, RunStatus.SUCCEEDED) for _ in range(6)]
    other = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    response = viewer_client.get(URL)
    latest = response.context["latest"]
    assert [(g["run"].pk, g["more"]) for g in latest] == [(other.pk, 0), (beats[-1].pk, 5)]
    assert "+5 like it" in response.content.decode()


def test_the_live_part_is_morphed_and_announces_a_summary(viewer_client, db):
    body = viewer_client.get(URL, headers={"HX-Request": "true"}).content.decode()
    assert "hx-swap=\"morph:" in body and 'aria-live="polite"' in body and 'id="overview-summary"' in body


def test_a_schedule_with_an_open_breaker_is_listed_once(viewer_client, make_schedule, make_run):
    flaky = make_schedule("flaky")
    make_run(flaky, RunStatus.FAILED)
    Schedule.objects.filter(pk=flaky.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    found = _attention(viewer_client.get(URL))
    assert [i["title"] for i in found["breaker"]] == ["flaky"] and "failing" not in found
