"""Pages offer only the actions the viewer may take: no button that would answer 403 (issue 14)."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import Backfill, BreakerStatus, RunStatus, Schedule, Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(make_schedule, default_team):
    payments = Team.objects.create(name="payments")
    schedule = make_schedule("theirs-ledger", watermark_config={"type": "integer", "column": "id", "initial": 0})
    Schedule.objects.filter(pk=schedule.pk).update(owner=payments, breaker_status=BreakerStatus.OPEN)
    schedule.refresh_from_db()
    return schedule


@pytest.fixture
def ours(make_schedule, default_team):
    schedule = make_schedule("ours-orders", watermark_config={"type": "integer", "column": "id", "initial": 0})
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN)
    schedule.refresh_from_db()
    return schedule


ACTIONS = {
    "run now": "schedule_run_now", "breaker reset": "breaker_reset", "watermark": "schedule_watermark",
    "toggle": "schedule_toggle",
}


def _action_urls(schedule) -> dict[str, str]:
    return {name: reverse(f"scheduler:{view}", args=[schedule.pk]) for name, view in ACTIONS.items()}


def test_the_schedule_page_offers_no_action_on_another_teams_schedule(operator_client, theirs, ours):
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[theirs.pk])).content.decode()
    assert [name for name, url in _action_urls(theirs).items() if f'action="{url}"' in page] == []
    assert "Backfill…" not in page
    own = operator_client.get(reverse("scheduler:schedule_detail", args=[ours.pk])).content.decode()
    offered = [name for name, url in _action_urls(ours).items() if f'action="{url}"' in own]
    assert offered == ["run now", "breaker reset", "watermark", "toggle"] and "Backfill…" in own  # pause (37)


def test_the_schedules_list_offers_run_now_and_the_toggle_only_on_own_schedules(operator_client, theirs, ours):
    page = operator_client.get(reverse("scheduler:schedules"), {"team": "all"}).content.decode()
    for name in ("run now", "toggle"):
        assert f'action="{_action_urls(ours)[name]}"' in page
        assert f'action="{_action_urls(theirs)[name]}"' not in page
    assert 'view only: owned by payments' in page


def test_the_run_page_offers_no_cancel_or_rerun_on_another_teams_run(operator_client, theirs, ours, make_run):
    running, finished = make_run(theirs, RunStatus.RUNNING), make_run(theirs, RunStatus.FAILED)
    page = operator_client.get(reverse("scheduler:run_detail", args=[running.pk])).content.decode()
    assert reverse("scheduler:run_cancel", args=[running.pk]) not in page
    assert "you may watch but not cancel it" in page
    page = operator_client.get(reverse("scheduler:run_detail", args=[finished.pk])).content.decode()
    assert reverse("scheduler:run_rerun", args=[finished.pk]) not in page
    own = make_run(ours, RunStatus.RUNNING)
    assert reverse("scheduler:run_cancel", args=[own.pk]) in operator_client.get(
        reverse("scheduler:run_detail", args=[own.pk])).content.decode()


def test_the_blocked_list_offers_the_breaker_reset_only_for_own_schedules(operator_client, theirs, ours, make_run):
    make_run(theirs, RunStatus.BLOCKED, blocked_by=theirs, reason="circuit open")
    make_run(ours, RunStatus.BLOCKED, blocked_by=ours, reason="circuit open")
    page = operator_client.get(reverse("scheduler:blocked"), {"team": "all"}).content.decode()
    assert f'action="{reverse("scheduler:breaker_reset", args=[ours.pk])}"' in page
    assert f'action="{reverse("scheduler:breaker_reset", args=[theirs.pk])}"' not in page


def test_the_backfill_page_offers_no_pause_or_cancel_on_another_teams_backfill(operator_client, theirs, ours):
    def page_of(schedule):
        backfill = Backfill.objects.create(schedule=schedule, range_from="0", range_to="10", window_size="5",
                                           reason="gap", requested_by="tests", created_at=timezone.now())
        return backfill, operator_client.get(reverse("scheduler:backfill_detail", args=[backfill.pk])).content.decode()

    backfill, page = page_of(theirs)
    assert reverse("scheduler:backfill_cancel", args=[backfill.pk]) not in page
    backfill, page = page_of(ours)
    assert reverse("scheduler:backfill_cancel", args=[backfill.pk]) in page


def test_an_admin_is_offered_every_action_on_every_team(admin_client, theirs):
    page = admin_client.get(reverse("scheduler:schedule_detail", args=[theirs.pk])).content.decode()
    assert all(f'action="{url}"' in page for name, url in _action_urls(theirs).items() if name != "toggle")
