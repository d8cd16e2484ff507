"""Blocked and backfill lists refresh, their actions live in the refreshed part, counts are honest."""
from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from scheduler.models import (
    AuditEntry, Backfill, BackfillStatus, BackfillWindow, BreakerStatus, RunStatus, Schedule, WindowStatus,
)

BLOCKED = reverse("scheduler:blocked")


def _open(schedule):
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=3)


def test_the_blocked_list_refreshes_and_offers_a_breaker_reset_inline(operator_client, make_schedule, make_run):
    flaky = make_schedule("flaky")
    _open(flaky)
    make_run(flaky, RunStatus.BLOCKED, blocked_by=flaky, reason="circuit open")
    live = operator_client.get(BLOCKED, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-get="/runs/blocked/"' in live and "morph:" in live
    assert reverse("scheduler:breaker_reset", args=[flaky.pk]) in live and "Reset breaker of flaky" in live
    assert 'data-confirm="Reset the breaker of flaky?' in live


def test_resetting_from_the_blocked_list_returns_to_it_and_is_audited(
    operator_client, operator, make_schedule, make_run
):
    flaky = make_schedule("flaky")
    _open(flaky)
    make_run(flaky, RunStatus.BLOCKED, blocked_by=flaky, reason="circuit open")
    response = operator_client.post(
        reverse("scheduler:breaker_reset", args=[flaky.pk]), {"next": BLOCKED, "reason": "source fixed"}
    )
    assert response.status_code == 302 and response["Location"] == BLOCKED
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.CLOSED
    assert AuditEntry.objects.get(action="breaker.reset").actor == operator.username
    page = operator_client.get(BLOCKED).content.decode()
    assert "Reset breaker of flaky" not in page  # closed now: nothing to reset


def test_a_foreign_next_is_ignored(operator_client, make_schedule):
    flaky = make_schedule("flaky")
    _open(flaky)
    response = operator_client.post(reverse("scheduler:breaker_reset", args=[flaky.pk]),
                                    {"next": "https://evil.example/"})
    assert response["Location"] == reverse("scheduler:schedule_detail", args=[flaky.pk])


def test_a_viewer_gets_no_reset_button_and_is_refused(viewer_client, make_schedule, make_run):
    flaky = make_schedule("flaky")
    _open(flaky)
    make_run(flaky, RunStatus.BLOCKED, blocked_by=flaky)
    assert "Reset breaker" not in viewer_client.get(BLOCKED).content.decode()
    assert viewer_client.post(reverse("scheduler:breaker_reset", args=[flaky.pk])).status_code == 403
    flaky.refresh_from_db()
    assert flaky.breaker_status == BreakerStatus.OPEN


def _backfill(schedule, status=BackfillStatus.ACTIVE, windows=(WindowStatus.SUCCEEDED, WindowStatus.CANCELLED)):
    backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to=str(10 * len(windows)),
                                       window_size="10", total_windows=len(windows), requested_by="alice",
                                       reason="x", created_at=timezone.now(), status=status)
    for i, w in enumerate(windows):
        BackfillWindow.objects.create(backfill=backfill, seq=i + 1, low=str(10 * i), high=str(10 * i + 10), status=w)
    return backfill


def test_the_backfill_list_refreshes_and_counts_cancelled_windows(viewer_client, make_schedule):
    backfill = _backfill(make_schedule("orders"))
    live = viewer_client.get(reverse("scheduler:backfills"), headers={"HX-Request": "true"}).content.decode()
    assert live.lstrip().startswith('<section class="card" id="backfills-live"') and "hx-get" in live
    assert "1 cancelled" in live and f'id="backfill-{backfill.pk}"' in live


def test_backfill_progress_counts_cancelled_windows_as_settled(viewer_client, make_schedule):
    backfill = _backfill(make_schedule("orders"), status=BackfillStatus.CANCELLED)
    response = viewer_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk]))
    progress = response.context["progress"]
    assert progress["cancelled"] == 1 and progress["settled"] == 2 and progress["percent"] == 100
    assert "1 cancelled" in response.content.decode()


def test_a_completed_backfill_no_longer_offers_pause_in_the_refreshed_grid(operator_client, make_schedule):
    backfill = _backfill(make_schedule("orders"), windows=(WindowStatus.RUNNING,))
    url = reverse("scheduler:backfill_detail", args=[backfill.pk])
    grid = operator_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'id="backfill-actions"' in grid and ">Pause</button>" in grid
    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.SUCCEEDED)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    response = operator_client.get(url, headers={"HX-Request": "true"})
    grid = response.content.decode()
    assert response.status_code == 286  # htmx stops polling a finished backfill
    assert ">Pause</button>" not in grid and ">Cancel</button>" not in grid and 'id="backfill-status"' in grid
