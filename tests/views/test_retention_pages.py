"""What a person sees of retention: the ages in force on the audit page, and a note where runs were pruned."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse

from scheduler.models import RunStatus
from scheduler.services.history.prune import history_prune

OVERVIEW = reverse("scheduler:overview")
AUDIT = reverse("scheduler:audit")


def test_the_audit_page_shows_the_retention_in_force(viewer_client, settings, make_schedule):
    settings.ETL_RETENTION_RUNS_DAYS = 60
    settings.ETL_AUDIT_ARCHIVE_DIR = ""
    make_schedule("orders", retention_days=400)
    page = viewer_client.get(AUDIT).content.decode()
    assert 'id="retention"' in page
    assert "runs, logs and node records</td><td>60 days" in page
    assert "a schedule&#x27;s own retention_days replaces it" in page
    assert "governance ticks</td><td>7 days" in page and "lineage outbox (sent)</td><td>1 day" in page
    assert "audit log</td><td>kept for ever (no archive set)" in page


def test_the_overview_carries_no_retention_card(viewer_client, db):
    for headers in ({}, {"HX-Request": "true"}):
        page = viewer_client.get(OVERVIEW, headers=headers).content.decode()
        assert 'id="retention"' not in page


def test_the_run_after_pruned_runs_says_so_and_an_untouched_schedule_does_not(viewer_client, make_schedule,
                                                                               make_run, now):
    orders, other = make_schedule("orders", retention_days=30), make_schedule("other")
    old = [make_run(orders, RunStatus.FAILED, queued_at=now - timedelta(days=40),
                    finished_at=now - timedelta(days=40)) for _ in range(2)]
    neighbour = make_run(orders, RunStatus.SUCCEEDED)
    newer = make_run(orders, RunStatus.SUCCEEDED)
    untouched = make_run(other, RunStatus.SUCCEEDED)
    history_prune(now=now)
    assert not orders.runs.filter(pk__in=[r.pk for r in old]).exists()
    page = viewer_client.get(reverse("scheduler:run_detail", args=[neighbour.pk])).content.decode()
    assert 'id="runs-pruned"' in page and "Older runs pruned after 30 days" in page
    for run in (newer, untouched):
        page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
        assert 'id="runs-pruned"' not in page


def test_a_schedules_page_says_how_long_its_history_is_kept(viewer_client, settings, make_schedule):
    settings.ETL_RETENTION_RUNS_DAYS = 90
    own, plain = make_schedule("finance", retention_days=400), make_schedule("plain")
    page = viewer_client.get(reverse("scheduler:schedule_detail", args=[own.pk])).content.decode()
    assert "finished runs 400 days" in page and "its own retention_days" in page
    page = viewer_client.get(reverse("scheduler:schedule_detail", args=[plain.pk])).content.decode()
    assert "finished runs 90 days" in page and "(the default)" in page
